"""Shared insertion points: `--write PATH:+N` (whole new lines after line N; 0 is the top),
held by several active tasks at once (SPEC.md, "Words" and "Ownership rules")."""

from __future__ import annotations

from pathlib import Path

import pytest
from hunkwise.shared.errors import UsageError
from hunkwise.shared.hunks.diff import Hunk
from hunkwise.shared.hunks.ownership import lines_clash, map_grant, map_point
from hunkwise.shared.state.models import PointGrant, RangeGrant, Task, parse_grant

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git, numbered, write


def test_a_point_parses_prints_and_reads_back() -> None:
    g = parse_grant("./docs/api.rst:+12")
    assert isinstance(g, PointGrant) and (g.path, g.start, g.end) == ("docs/api.rst", 12, 12)
    assert str(g) == "docs/api.rst:+12"
    assert str(parse_grant("a.py:+0")) == "a.py:+0"
    t = Task.model_validate({"id": "T", "title": "t", "expect": "e", "created_at": 1.0,
                             "updated_at": 1.0, "grants": [g.model_dump()]})
    assert t.grants == [g]
    assert g.model_dump() == {"kind": "point", "path": "docs/api.rst", "start": 12, "end": 12}


@pytest.mark.parametrize("bad", ["src/*.py:+3", "a.py:+", "a.py:+-1"])
def test_malformed_points_are_refused(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_grant(bad)


def _r(a: int, b: int) -> RangeGrant:
    return RangeGrant(kind="range", path="f", start=a, end=b)


def _p(n: int) -> PointGrant:
    return PointGrant(kind="point", path="f", start=n, end=n)


def test_the_clash_rules_of_points() -> None:
    assert not lines_clash(_p(5), _p(5))          # one point, several holders
    assert not lines_clash(_p(5), _p(6))
    assert lines_clash(_p(5), _r(5, 9))           # strictly inside: START <= N < END
    assert lines_clash(_r(3, 9), _p(8))
    assert not lines_clash(_p(4), _r(5, 9))       # at the range's top edge
    assert not lines_clash(_p(9), _r(5, 9))       # at its bottom edge
    assert not lines_clash(_p(5), _r(5, 5))       # after a one-line range
    assert lines_clash(_r(1, 3), _r(3, 4))


def _ins(after: int, n: int) -> Hunk:
    return Hunk(after, 0, after + 1, n, b"", b"x\n" * n)


def test_a_point_moves_with_the_line_it_follows() -> None:
    assert map_point(5, [_ins(2, 3)]) == 8                  # lines above: it moves down
    assert map_point(5, [_ins(5, 3)]) == 5                  # lines at it: it stays before them
    assert map_point(5, [_ins(7, 3)]) == 5                  # lines below: it stays
    assert map_point(5, [Hunk(1, 2, 0, 0, b"a\nb\n", b"")]) == 3     # two lines above removed
    assert map_point(5, [Hunk(5, 1, 4, 0, b"e\n", b"")]) == 4        # its own line removed
    assert map_point(5, [Hunk(4, 2, 4, 3, b"d\ne\n", b"D\nE\nF\n")]) == 6  # replaced: after it
    assert map_point(0, [_ins(0, 2)]) == 0                  # the top stays the top
    g = _p(5)
    map_grant(g, [_ins(1, 2)])
    assert (g.start, g.end) == (7, 7)


# ---- through the CLI ------------------------------------------------------------------------

@pytest.fixture
def repo(make_repo: MakeRepo) -> Path:
    return make_repo({"f.txt": numbered(10), "g.txt": "a\n"})


def assign(coord: Cli, repo: Path, tid: str, *writes: str, extra: tuple[str, ...] = ()) -> object:
    args = ["assign", tid, "--title", "t", "--expect", "e", *extra]
    for w in writes:
        args += ["--write", w]
    return coord(repo, *args)


def test_several_tasks_hold_one_point_and_a_range_around_it_is_refused(coord: Cli, repo: Path) -> None:
    for tid in ("A", "B", "C"):
        assert ok(assign(coord, repo, tid, "f.txt:+4"))["task"]["grants"] == ["f.txt:+4"]
    r = assign(coord, repo, "D", "f.txt:3-7")
    assert r.code == 3 and "f.txt:+4" in r.doc["error"]["message"]
    # ranges at its edges are not in the way
    ok(assign(coord, repo, "E", "f.txt:5-6"))
    ok(assign(coord, repo, "F", "f.txt:1-4"))
    # a point strictly inside a held range is refused; one at its edge is not
    r = assign(coord, repo, "G", "f.txt:+5")
    assert r.code == 3 and "E" in r.doc["error"]["message"]
    ok(assign(coord, repo, "H", "f.txt:+6"))


def test_a_whole_file_holder_and_an_exclusive_task_exclude_points(coord: Cli, repo: Path) -> None:
    ok(assign(coord, repo, "A", "g.txt"))
    assert assign(coord, repo, "B", "g.txt:+1").code == 3
    ok(assign(coord, repo, "C", "f.txt:+2"))
    assert assign(coord, repo, "D", "f.txt:+2", extra=("--exclusive",)).code == 3


def test_a_point_past_the_end_of_the_file_is_refused(coord: Cli, repo: Path) -> None:
    r = assign(coord, repo, "A", "f.txt:+11")
    assert r.code == 2 and "10 lines" in r.doc["error"]["message"]
    ok(assign(coord, repo, "A", "f.txt:+10"))
    ok(assign(coord, repo, "B", "f.txt:+0"))


def test_a_point_follows_history(coord: Cli, repo: Path) -> None:
    ok(assign(coord, repo, "A", "f.txt:+4"))
    write(repo, "f.txt", "new 1\nnew 2\n" + numbered(10))
    git(repo, "commit", "-qam", "two lines on top")
    assert ok(coord(repo, "status"))["tasks"][0]["grants"] == ["f.txt:+6"]


def test_a_point_shows_where_it_stands_in_the_tree(coord: Cli, worker: Cli, repo: Path) -> None:
    ok(assign(coord, repo, "A", "f.txt:+4"))
    write(repo, "f.txt", "top\n" + numbered(10))
    doc = ok(worker(repo, "start", "A"))
    (place,) = doc["places"]
    assert place["lines"] == {"head": [4, 4], "tree": [5, 5]}
    assert place["landmark"] == "line 4"
    text = worker(repo, "start", "A", session=doc["session"], json_out=False).stdout
    assert "f.txt HEAD +4 · tree +5 · after: line 4" in text


def test_coord_commit_refuses_a_file_a_task_holds_a_point_in(coord: Cli, repo: Path) -> None:
    ok(assign(coord, repo, "A", "f.txt:+3"))
    write(repo, "f.txt", numbered(11))
    r = coord(repo, "commit", "f.txt", "-m", "mine")
    assert r.code == 3 and "A" in r.doc["error"]["message"]


def test_lines_committed_at_a_point_widen_it() -> None:
    g = _p(5)
    map_grant(g, [_ins(5, 3)])  # three lines inserted at the point, committed
    assert (g.start, g.end) == (5, 8) and str(g) == "f:+5-8"
    map_grant(g, [_ins(2, 1)])  # a line above pushes the whole span down
    assert (g.start, g.end) == (6, 9)
    assert parse_grant("f:+6-9") == g


# ---- two holders at one point, end to end ------------------------------------------------

LIST = "names = [\n    'a',\n    'b',\n]\n"


def two_holders(make_repo: MakeRepo, coord: Cli, worker: Cli) -> tuple[Path, dict[str, str]]:
    repo = make_repo({"m.py": LIST})
    sessions = {}
    for tid in ("A", "B"):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", "m.py:+3"))
        sessions[tid] = ok(worker(repo, "start", tid))["session"]
    write(repo, "m.py", LIST.replace("    'b',\n", "    'b',\n    'from_b',\n    'from_a',\n"))
    return repo, sessions


def test_worker_done_asks_about_each_line_at_a_shared_point(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    repo, s = two_holders(make_repo, coord, worker)
    r = worker(repo, "done", "A", session=s["A"])
    assert r.code == 1
    message = r.doc["error"]["message"]
    assert "m.py:4 " in message and "m.py:5 " in message and "shared point" in message
    assert not list((repo / ".git" / "coord" / "inbox").glob("*.json"))  # nothing delivered
    # The narrower answer wins: line 5 is A's, every other line is not.
    ok(worker(repo, "done", "A", "--claim", "m.py:5", "--disclaim", "all", session=s["A"]))
    ok(worker(repo, "done", "B", "--claim", "m.py:4", "--disclaim", "all", session=s["B"]))
    ok(coord(repo, "accept", "B"))
    assert git(repo, "show", "HEAD:m.py") == LIST.replace("    'b',\n", "    'b',\n    'from_b',\n")
    ok(coord(repo, "accept", "A"))
    assert git(repo, "show", "HEAD:m.py") == (repo / "m.py").read_text()
    assert git(repo, "status", "--porcelain") == ""


def test_a_line_both_holders_claim_is_committed_for_neither(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    repo, s = two_holders(make_repo, coord, worker)
    ok(worker(repo, "done", "A", "--claim", "m.py:4-5", session=s["A"]))
    ok(worker(repo, "done", "B", "--claim", "m.py:4", "--disclaim", "all", session=s["B"]))
    root = git(repo, "rev-parse", "HEAD")
    for tid in ("A", "B"):
        r = coord(repo, "accept", tid)
        assert r.code == 1 and "ambiguous" in r.doc["error"]["message"], r.stdout
    assert git(repo, "rev-parse", "HEAD") == root


def test_a_worded_line_two_holders_added_is_never_committed(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    """Both added the same name: nothing tells which copy is whose."""
    repo, s = two_holders(make_repo, coord, worker)
    write(repo, "m.py", LIST.replace("    'b',\n", "    'b',\n    'same',\n    'same',\n"))
    r = worker(repo, "done", "A", "--claim", "m.py:4", "--disclaim", "all", session=s["A"])
    assert r.code == 1 and "cannot be claimed" in r.doc["error"]["message"], r.stdout


def test_every_command_shows_a_range_where_a_commit_would_map_it(make_repo: MakeRepo,
                                                                 coord: Cli, worker: Cli) -> None:
    """`coord diff` maps through git's hunks as `worker start` does, never through the
    region division's (which writes an edge insertion as a replacement of the edge line)."""
    repo = make_repo({"m.py": numbered(12)})
    for tid, grant in (("A", "m.py:1-4"), ("B", "m.py:5-10")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", grant))
    s = ok(worker(repo, "start", "B"))["session"]
    lines = numbered(12).splitlines(keepends=True)
    write(repo, "m.py", "".join(lines[:10] + ["after ten\n"] + lines[10:]))
    started = [p["lines"] for p in ok(worker(repo, "start", "B", session=s))["places"]]
    shown = [p["lines"] for p in ok(coord(repo, "diff", "B"))["places"]]
    assert shown == started


def test_a_contested_line_keeps_its_identity_whatever_else_is_inserted_at_the_point() -> None:
    """A report claims a contested line by its identity: another holder's line at the
    point's other edge (which moves where the window of the division starts) changes
    nothing of it."""
    from hunkwise.shared.hunks.regions import divide, regions_of
    from hunkwise.shared.hunks.slide import placements

    old = [f"line {k}\n".encode() for k in range(1, 21)]

    def canon_of_x(new: list[bytes]) -> set[str]:
        import difflib

        hunks = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
            if tag != "equal":
                hunks.append(Hunk(i1 + 1 if i2 > i1 else i1, i2 - i1, j1 + 1 if j2 > j1 else j1,
                                  j2 - j1, b"".join(old[i1:i2]), b"".join(new[j1:j2])))
        regs = regions_of(len(old), [], [(10, 13, "A"), (10, 13, "B")])
        div = divide(old, new, hunks, placements(old, hunks), regs)
        return {c.canon or "" for c in div.contests if c.hunk.added == b"X\n"}

    one = old[:13] + [b"X\n"] + old[13:]
    two = old[:10] + [b"Y\n"] + old[10:13] + [b"X\n"] + old[13:]
    assert canon_of_x(one) and canon_of_x(one) == canon_of_x(two)
