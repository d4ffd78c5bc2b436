"""`coord init`, `coord assign` and `coord status`, driven through the real CLI.

Every call goes through the installed `coord` entry point in a real temporary repo;
`--json` is appended by the `coord` fixture.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testing.cli import Result, ok, run_cli
from testing.repo import MakeRepo, git, numbered, set_line, write

Coord = Callable[..., Result]

TASK_KEYS = {"id", "title", "expect", "state", "batch", "grants", "checks", "session"}


@pytest.fixture
def repo(make_repo: MakeRepo) -> Path:
    return make_repo({
        "f.txt": numbered(10),
        "src/a.py": "a = 1\n",
        "src/b.py": "b = 2\n",
        "README.md": "# readme\n",
    })


def assign(coord: Coord, repo: Path, *writes: str, tid: str | None = None,
           extra: tuple[str, ...] = (), **kw: Any) -> Result:
    args = ["assign"] + ([tid] if tid else []) + ["--title", "Do it", "--expect", "It is done"]
    for w in writes:
        args += ["--write", w]
    return coord(repo, *args, *extra, **kw)


def refused(r: Result, code: int) -> str:
    """The error of a refused call: exit code, JSON error document, one line on stderr."""
    assert r.code == code, f"exit {r.code}: {r.stdout}{r.stderr}"
    doc = json.loads(r.stdout)
    assert set(doc) == {"error"}
    assert doc["error"]["code"] == code
    message = doc["error"]["message"]
    assert isinstance(message, str) and message
    lines = r.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].strip(), r.stderr
    return message


def task_ids(coord: Coord, repo: Path, **kw: Any) -> list[str]:
    return [t["id"] for t in ok(coord(repo, "status", **kw))["tasks"]]


# ---- ids and the TASK document ----------------------------------------------------------

def test_explicit_id_then_allocated_ids_count_up(coord: Coord, repo: Path) -> None:
    assert ok(assign(coord, repo, "README.md", tid="fix-readme"))["task"]["id"] == "fix-readme"
    assert ok(assign(coord, repo, "src/a.py"))["task"]["id"] == "task-001"
    assert ok(assign(coord, repo, "src/b.py"))["task"]["id"] == "task-002"


def test_allocation_skips_ids_taken_explicitly(coord: Coord, repo: Path) -> None:
    assert ok(assign(coord, repo, "src/a.py", tid="task-001"))["task"]["id"] == "task-001"
    assert ok(assign(coord, repo, "src/b.py"))["task"]["id"] == "task-002"


def test_assign_prints_the_task_document(coord: Coord, repo: Path) -> None:
    doc = ok(coord(repo, "assign", "--title", "Speed up", "--expect", "Page loads in 1s",
                   "--write", "src/*.py", "--write", "./f.txt:2-4",
                   "--check", "pytest -q tests/test_a.py", "--check", "ruff check src"))
    t = doc["task"]
    assert TASK_KEYS <= set(t)
    assert t["id"] == "task-001"
    assert (t["title"], t["expect"]) == ("Speed up", "Page loads in 1s")
    assert t["state"] == "assigned"
    assert t["batch"] == 1
    assert t["grants"] == ["src/*.py", "f.txt:2-4"]
    assert t["checks"] == ["pytest -q tests/test_a.py", "ruff check src"]
    assert t["session"] is None


def test_human_output_names_the_task_and_its_grants(coord: Coord, repo: Path) -> None:
    r = assign(coord, repo, "f.txt:1-3", json_out=False)
    assert r.code == 0, r.stderr
    assert "task-001" in r.stdout and "f.txt:1-3" in r.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.stdout)


def test_reusing_an_id_is_refused_and_keeps_the_first_task(coord: Coord, repo: Path) -> None:
    ok(assign(coord, repo, "src/a.py", tid="t1"))
    message = refused(assign(coord, repo, "src/b.py", tid="t1"), 3)
    assert "t1" in message
    (t,) = ok(coord(repo, "status"))["tasks"]
    assert t["grants"] == ["src/a.py"]


# ---- ownership conflicts ----------------------------------------------------------------

CONFLICTS = [
    # (held grants, held extra flags, new grants, new extra flags, path named)
    pytest.param(["src/*.py"], [], ["src/a.py"], [], "src/a.py", id="glob-vs-glob-on-file"),
    pytest.param(["f.txt:1-3"], [], ["f.txt"], [], "f.txt", id="whole-file-over-range"),
    pytest.param(["f.txt:4-6"], [], ["*.txt"], [], "f.txt", id="glob-over-range"),
    pytest.param(["f.txt"], [], ["f.txt:8-9"], [], "f.txt", id="range-inside-whole-file"),
    pytest.param(["f.txt:1-5"], [], ["f.txt:5-8"], [], "f.txt", id="overlapping-ranges"),
    pytest.param(["src/new/**"], [], ["src/new/*.py"], [], "src/new/", id="globs-on-future-files"),
    pytest.param(["docs/api.md"], [], ["docs/"], [], "docs/", id="same-future-file"),
    pytest.param(["f.txt:1-3"], [], ["f.txt:8-9"], ["--exclusive"], "f.txt", id="new-exclusive"),
    pytest.param(["f.txt:1-3"], ["--exclusive"], ["f.txt:8-9"], [], "f.txt", id="held-exclusive"),
]


@pytest.mark.parametrize("held, held_flags, new, new_flags, path", CONFLICTS)
def test_ownership_conflict_is_refused_naming_task_and_path(
        coord: Coord, repo: Path, held: list[str], held_flags: list[str], new: list[str],
        new_flags: list[str], path: str) -> None:
    ok(assign(coord, repo, *held, tid="holder-1", extra=tuple(held_flags)))
    message = refused(assign(coord, repo, *new, tid="newcomer", extra=tuple(new_flags)), 3)
    assert "holder-1" in message
    assert path in message


def test_refused_assign_creates_no_task_and_uses_no_id(coord: Coord, repo: Path) -> None:
    ok(assign(coord, repo, "f.txt:1-3"))
    refused(assign(coord, repo, "f.txt"), 3)
    assert ok(assign(coord, repo, "src/a.py"))["task"]["id"] == "task-002"
    assert task_ids(coord, repo) == ["task-001", "task-002"]


def test_held_ranges_follow_later_commits(coord: Coord, repo: Path) -> None:
    ok(assign(coord, repo, "f.txt:5-8", tid="held"))
    write(repo, "f.txt", "new 1\nnew 2\n" + numbered(10))
    git(repo, "commit", "-qam", "two lines on top")
    # the held lines are now 7-10: the new top lines are free, old line 5 is not
    ok(assign(coord, repo, "f.txt:1-2", tid="top"))
    message = refused(assign(coord, repo, "f.txt:7-7", tid="late"), 3)
    assert "held" in message and "f.txt" in message


def test_disjoint_grants_are_all_granted(coord: Coord, repo: Path) -> None:
    ok(assign(coord, repo, "f.txt:1-5", "src/a/*.py"))
    ok(assign(coord, repo, "f.txt:6-10", "src/b/*.py"))  # adjacent range, sibling dir
    ok(assign(coord, repo, "*.md"))
    assert task_ids(coord, repo) == ["task-001", "task-002", "task-003"]


def test_serial_paths_in_coord_toml_exclude_disjoint_ranges(coord: Coord, make_repo: MakeRepo) -> None:
    repo = make_repo({"schema.sql": numbered(10), "f.txt": numbered(10),
                      "coord.toml": '[ownership]\nserial = ["*.sql"]\n'})
    ok(assign(coord, repo, "schema.sql:1-3", "f.txt:1-3", tid="mig-1"))
    ok(assign(coord, repo, "f.txt:5-9", tid="mig-2"))  # not serial: ranges may share
    message = refused(assign(coord, repo, "schema.sql:8-9", tid="mig-3"), 3)
    assert "mig-1" in message and "schema.sql" in message


# ---- hostile and bad input ---------------------------------------------------------------

HOSTILE = [
    pytest.param(("assign", "..", "--write", "x"), id="id-dotdot"),
    pytest.param(("assign", "x" * 65, "--write", "x"), id="id-too-long"),
    pytest.param(("assign", "a/b", "--write", "x"), id="id-slash"),
    pytest.param(("assign", "--write", "x", "--", "-rf"), id="id-leading-dash"),
    pytest.param(("assign", "--write", "../x"), id="grant-parent"),
    pytest.param(("assign", "--write", "a/../../b"), id="grant-climbs-out"),
    pytest.param(("assign", "--write", "/etc/passwd:1-2"), id="grant-absolute-range"),
    pytest.param(("assign", "--write", ".git/config"), id="grant-git-dir"),
    pytest.param(("assign", "--write", "sub/.git/x"), id="grant-nested-git-dir"),
    pytest.param(("assign", "--write", "f.txt:9-3"), id="grant-reversed"),
    pytest.param(("assign", "--write", "f.txt:0-4"), id="grant-line-zero"),
    pytest.param(("assign", "--write", "f\x1b[2Jx.txt"), id="grant-control-char"),
    pytest.param(("assign", "--write", "src\\a.py"), id="grant-backslash"),
    pytest.param(("assign", "--write", ""), id="grant-empty"),
    pytest.param(("assign", "--write", "!src/a.py"), id="grant-negated"),
    pytest.param(("assign",), id="no-grant"),
]


@pytest.mark.parametrize("argv", HOSTILE)
def test_hostile_input_exits_2_with_one_line(coord: Coord, repo: Path, argv: tuple[str, ...]) -> None:
    r = coord(repo, *argv, "--title", "t", "--expect", "e")
    refused(r, 2)
    assert r.stderr.startswith("coord: ")


def test_hostile_input_creates_nothing(coord: Coord, repo: Path) -> None:
    refused(assign(coord, repo, "x", tid="../evil"), 2)
    refused(assign(coord, repo, "../outside"), 2)
    refused(assign(coord, repo, ".git/hooks/pre-commit"), 2)
    assert task_ids(coord, repo) == []
    assert git(repo, "status", "--porcelain", "--ignored") == ""
    assert not (repo.parent / "outside").exists()


def test_range_past_end_of_file_is_refused(coord: Coord, repo: Path) -> None:
    message = refused(assign(coord, repo, "f.txt:8-11"), 2)
    assert "f.txt" in message and "10 lines" in message
    ok(assign(coord, repo, "f.txt:8-10"))


def test_range_counts_lines_at_head_not_in_the_tree(coord: Coord, repo: Path) -> None:
    write(repo, "f.txt", numbered(20))  # uncommitted growth does not count
    message = refused(assign(coord, repo, "f.txt:12-14"), 2)
    assert "f.txt" in message


@pytest.mark.parametrize("grant", ["missing.txt:1-2", "new.txt:1-1", "src:1-1"])
def test_range_on_a_file_missing_at_head_is_refused(coord: Coord, repo: Path, grant: str) -> None:
    write(repo, "new.txt", "untracked, not committed\n")
    message = refused(assign(coord, repo, grant), 2)
    assert grant.split(":")[0] in message


# ---- coord.toml --------------------------------------------------------------------------

@pytest.mark.parametrize("toml, line", [
    pytest.param('[verify]\ncommands = ["pytest"]\n[ownership\nserial = []\n', 3, id="syntax"),
    pytest.param('[verify]\ncommands = ["pytest"]\n\n[ownership]\nserial = "*.sql"\n', 5,
                 id="wrong-type"),
    pytest.param('[claims]\nttl_seconds = 60\nttl_minutes = 5\n', 3, id="unknown-key"),
    pytest.param('[verify]\ncommands = []\n[verfy]\ntimeout_seconds = 5\n', 3,
                 id="unknown-section"),
    pytest.param('[ownership]\nserial = ["*.sql",\n  3]\n', 2,
                 id="bad-list-element"),
    pytest.param('[verify]\ntimeout_seconds = 5\n\n[checks]\ntimeout_seconds = -1\n', 5,
                 id="key-repeated-in-other-section"),
])
def test_malformed_coord_toml_exits_2_naming_the_line(coord: Coord, make_repo: MakeRepo,
                                                      toml: str, line: int) -> None:
    repo = make_repo({"f.txt": numbered(3), "coord.toml": toml})
    message = refused(assign(coord, repo, "f.txt"), 2)
    assert "coord.toml" in message
    assert f"line {line}" in message


# ---- state: init, location ---------------------------------------------------------------

def test_init_is_idempotent_and_state_stays_out_of_the_tree(coord: Coord, repo: Path) -> None:
    first = ok(coord(repo, "init"))
    common = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    assert Path(first["state_dir"]).resolve() == (common / "coord").resolve()
    ok(assign(coord, repo, "f.txt:1-3"))
    again = ok(coord(repo, "init"))
    assert again["state_dir"] == first["state_dir"]
    assert task_ids(coord, repo) == ["task-001"]  # init never resets the state
    assert git(repo, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""


def test_init_human_output_says_where_state_lives(coord: Coord, repo: Path) -> None:
    r = coord(repo, "init", json_out=False)
    assert r.code == 0, r.stderr
    assert str(Path(git(repo, "rev-parse", "--absolute-git-dir").strip())) in r.stdout


def test_coord_dir_relocates_the_state(coord: Coord, repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    env = {"COORD_DIR": str(elsewhere)}
    ok(assign(coord, repo, "f.txt:1-3", env=env))
    assert task_ids(coord, repo, env=env) == ["task-001"]
    assert (elsewhere / "state.json").is_file()
    assert not (repo / ".git" / "coord").exists()
    assert task_ids(coord, repo) == []  # without COORD_DIR: the default, empty state


# ---- status ------------------------------------------------------------------------------

def test_status_shape_on_a_fresh_repo(coord: Coord, repo: Path) -> None:
    doc = ok(coord(repo, "status"))
    assert doc["tasks"] == []
    assert doc["freeze"] is None
    assert doc["inbox"]["pending"] == 0
    assert doc["unowned"] == [] and doc["conflicts"] == []
    assert doc["index_dirty"] is False


def test_status_lists_tasks_unowned_changes_conflicts_and_staged_files(
        coord: Coord, repo: Path) -> None:
    ok(assign(coord, repo, "f.txt:1-5", tid="top"))
    ok(assign(coord, repo, "f.txt:7-10", tid="bottom"))
    set_line(repo, "f.txt", 2, "mine, inside top")        # owned: not listed
    set_line(repo, "f.txt", 5, "five")                     # top's last line and the
    set_line(repo, "f.txt", 6, "six")                      #   unowned line 6: undividable
    write(repo, "src/a.py", "a = 100\n")                   # unowned
    write(repo, "notes.txt", "hello\n")
    git(repo, "add", "notes.txt")                          # staged by someone else

    doc = ok(coord(repo, "status"))
    tasks = {t["id"]: t for t in doc["tasks"]}
    assert set(tasks) == {"top", "bottom"}
    for t in tasks.values():
        assert TASK_KEYS | {"stale"} <= set(t)
        assert t["stale"] is False and t["state"] == "assigned"
    assert tasks["top"]["grants"] == ["f.txt:1-5"]
    assert doc["freeze"] is None
    assert doc["inbox"]["pending"] == 0

    unowned = sorted(u["path"] for u in doc["unowned"])
    assert unowned == ["notes.txt", "src/a.py"]
    assert len(doc["conflicts"]) == 1
    conflict = doc["conflicts"][0]
    assert conflict["path"] == "f.txt"
    assert sorted(conflict["tasks"]) == ["bottom", "top"]
    assert doc["index_dirty"] is True


def test_status_human_output_shows_tasks_and_unowned(coord: Coord, repo: Path) -> None:
    ok(assign(coord, repo, "src/a.py"))
    write(repo, "README.md", "# changed\n")
    r = coord(repo, "status", json_out=False)
    assert r.code == 0, r.stderr
    assert "task-001" in r.stdout
    assert "README.md" in r.stdout


def test_repo_option_works_from_another_directory(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    r = run_cli("coord", outside, "assign", "--title", "t", "--expect", "e",
                "--write", "f.txt:1-2", "--repo", str(repo))
    assert r.code == 0, r.stderr
    assert r.doc["task"]["grants"] == ["f.txt:1-2"]
    r = run_cli("coord", outside, "status")
    refused(r, 2)


def test_a_range_on_a_binary_file_is_refused(make_repo, coord) -> None:
    repo = make_repo({"b.bin": b"\x00\x01\x02\n\x03\n"})
    r = coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "b.bin:1-1")
    assert r.code == 2 and "binary" in r.doc["error"]["message"]
    assert json.loads(coord(repo, "status").stdout)["tasks"] == []
