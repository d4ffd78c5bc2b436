"""Attribution on the layouts real teams use: each symptom observed on a real project,
reproduced through the CLI, with what must happen instead.

Adjacent ranges that each cover one function, separated by blank lines: inside a run of
identical lines git prints a change at one of several equivalent positions, and that
choice must never decide which task a change belongs to.
"""

from __future__ import annotations

from pathlib import Path

from testing.cli import Result, ok
from testing.repo import git, git_bytes, write

F_AND_G = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"


def err(r: Result) -> str:
    return r.doc["error"]["message"]


def begin(coord, worker, repo: Path, tid: str, *grants: str, checks: tuple[str, ...] = ()) -> None:
    args = ["assign", tid, "--title", f"title {tid}", "--expect", "e"]
    for g in grants:
        args += ["--write", g]
    for c in checks:
        args += ["--check", c]
    ok(coord(repo, *args))
    ok(worker(repo, "start", tid, "--session", f"sess-20260101-0900-{tid.lower()}@m"))


def head_file(repo: Path, path: str) -> bytes:
    return git_bytes(repo, "show", f"HEAD:{path}")


def test_a_helper_appended_after_ones_function_is_committed_with_it(make_repo, coord, worker):
    """Was: git slid F's insertion past the blank lines onto G's side; `coord accept G`
    (G made no edits) committed `h()` as G's, and F's accept omitted it.

    A helper between two tasks' functions could as well be G's, put above its function:
    nothing recorded who wrote it, so F is asked, and says it is its own."""
    repo = make_repo({"a.py": F_AND_G})
    begin(coord, worker, repo, "F", "a.py:1-4")
    begin(coord, worker, repo, "G", "a.py:5-6")
    new = "def f():\n    return 1\n\n\ndef h():\n    return 3\n\n\ndef g():\n    return 2\n"
    write(repo, "a.py", new)
    r = worker(repo, "done", "F")
    assert r.code == 1 and "could be yours or your neighbour's" in err(r)
    assert ok(worker(repo, "done", "F", "--claim", "a.py"))["report"]["changes"] == 1
    # G has nothing of its own: asked, it says so, and its "done" is refused
    # (docs/newcomer.md), so nothing of F's can be accepted under G's name.
    r = worker(repo, "done", "G")
    assert r.code == 1 and "could be yours or your neighbour's" in err(r)
    r = worker(repo, "done", "G", "--disclaim", "all")
    assert r.code == 1 and "no changes in your grants" in err(r)
    r = coord(repo, "accept", "G")
    assert r.code == 3 and "only reported tasks" in err(r)
    # While G may still claim the helper in a report, F's accept waits for it.
    r = coord(repo, "accept", "F")
    assert r.code == 1 and "may claim it" in err(r)
    ok(coord(repo, "reject", "G", "--note", "not needed"))
    ok(coord(repo, "accept", "F"))
    assert head_file(repo, "a.py") == new.encode()
    assert "Coord-Task: F" in git(repo, "log", "-1", "--format=%B")


def test_a_deletion_git_prints_in_the_neighbours_range_is_never_committed_for_it(
        make_repo, coord, worker):
    """Was: in `x y y y z`, A (1-3) deleted line 2; git printed the deletion at line 4
    (B's range); A reported 0 hunks and `coord accept B` committed A's deletion.

    Which `y` went is not in the file: either A deleted one of its own (the `y` left at
    line 3 is B's) or B deleted its own (that `y` is A's). Nothing recorded who wrote what,
    so each worker says whose line 3 is; only then is anything committed."""
    repo = make_repo({"f.txt": "x\ny\ny\ny\nz\n"})
    begin(coord, worker, repo, "A", "f.txt:1-3")
    begin(coord, worker, repo, "B", "f.txt:4-5")
    write(repo, "f.txt", "x\ny\ny\nz\n")
    r = worker(repo, "done", "A")
    assert r.code == 1 and "f.txt:3" in err(r) and "--disclaim" in err(r)
    assert "boundary" in err(r)
    # Both say line 3 is theirs: nothing is committed for either.
    ok(worker(repo, "done", "A", "--claim", "f.txt:3"))
    ok(worker(repo, "done", "B", "--claim", "f.txt:3"))
    root = git(repo, "rev-parse", "HEAD")
    for tid in ("B", "A"):
        r = coord(repo, "accept", tid)
        assert r.code == 1 and "ambiguous" in err(r), r.stdout
        assert "A" in err(r) and "B" in err(r) and "lines 3" in err(r)
    assert git(repo, "rev-parse", "HEAD") == root
    # A says the truth (it deleted one of its own, line 3 is B's): A's deletion alone.
    ok(worker(repo, "done", "A", "--disclaim", "f.txt:3"))
    ok(coord(repo, "accept", "A"))
    assert head_file(repo, "f.txt") == b"x\ny\ny\nz\n"


def test_an_ambiguous_change_is_committed_for_the_only_task_that_can_claim_it(
        make_repo, coord, worker):
    repo = make_repo({"f.txt": "x\ny\ny\ny\nz\n"})
    begin(coord, worker, repo, "A", "f.txt:1-3")
    ok(coord(repo, "assign", "B", "--title", "b", "--expect", "e", "--write", "f.txt:4-5"))
    write(repo, "f.txt", "x\ny\ny\nz\n")
    ok(worker(repo, "done", "A", "--disclaim", "all"))
    # B never started: what it finds at its start is inherited, never its claim.
    ok(coord(repo, "accept", "A"))
    assert head_file(repo, "f.txt") == b"x\ny\ny\nz\n"


def test_rejecting_the_neighbour_never_deletes_a_blank_line_inserted_at_the_range_end(
        make_repo, coord, worker):
    """Was: A inserted a blank line at the end of m.py:1-3; it was credited to B, and
    `coord reject B --discard` deleted A's line."""
    repo = make_repo({"m.py": "def a():\n    pass\n\ndef b():\n    pass\n"})
    begin(coord, worker, repo, "A", "m.py:1-3")
    begin(coord, worker, repo, "B", "m.py:4-5")
    mine = "def a():\n    pass\n\n\ndef b():\n    pass\n"
    write(repo, "m.py", mine)
    ok(coord(repo, "reject", "B", "--note", "not needed", "--discard"))
    assert (repo / "m.py").read_text() == mine
    ok(worker(repo, "done", "A"))
    ok(coord(repo, "accept", "A"))
    assert head_file(repo, "m.py") == mine.encode()


def test_deleting_ones_last_blank_line_is_committed_with_the_task(make_repo, coord, worker):
    """Was: A deleted its own last blank line; git showed the deletion on the next,
    unowned line, and `coord accept A` succeeded without it."""
    repo = make_repo({"m.py": "def a():\n    pass\n\n\nx = 1\n"})
    begin(coord, worker, repo, "A", "m.py:1-3")
    write(repo, "m.py", "def a():\n    pass\n\nx = 1\n")
    ok(worker(repo, "done", "A"))
    ok(coord(repo, "accept", "A"))
    assert head_file(repo, "m.py") == b"def a():\n    pass\n\nx = 1\n"
    assert git(repo, "status", "--porcelain") == ""


def test_a_rejected_tasks_boundary_change_is_discarded_not_adopted(make_repo, coord, worker):
    """Was: `coord reject F --discard` left F's boundary insertion in the tree; G, which
    made no edits, then reported it and accept committed it."""
    repo = make_repo({"a.py": F_AND_G})
    begin(coord, worker, repo, "F", "a.py:1-4")
    begin(coord, worker, repo, "G", "a.py:5-6")
    write(repo, "a.py", "def f():\n    return 1\n\n\ndef h():\n    return 3\n\n\ndef g():\n    return 2\n")
    ok(worker(repo, "done", "F", "--claim", "a.py"))  # (a helper G could have put above g)
    r = coord(repo, "reject", "F", "--note", "no helper", "--discard")
    assert r.code == 3 and "G is in_progress and may claim it" in err(r)  # nothing written
    ok(coord(repo, "reject", "G", "--note", "not needed"))
    ok(coord(repo, "reject", "F", "--note", "no helper", "--discard"))
    assert (repo / "a.py").read_text() == F_AND_G


def test_an_insertion_at_ones_range_end_does_not_block_the_neighbour(make_repo, coord, worker):
    """Was: A's insertion at its range end made B's accept fail with `conflict`, and A's
    `worker done` said 0 hunks."""
    repo = make_repo({"m.py": "def a():\n    pass\n\ndef b():\n    pass\n"})
    begin(coord, worker, repo, "A", "m.py:1-3")
    begin(coord, worker, repo, "B", "m.py:4-5")
    write(repo, "m.py", "def a():\n    pass\n\n\ndef b():\n    return 2\n")
    # (The blank line could as well be B's, put above its function: each says whose.)
    assert ok(worker(repo, "done", "A", "--claim", "m.py"))["report"]["hunks"] >= 1
    ok(worker(repo, "done", "B", "--disclaim", "all"))
    ok(coord(repo, "accept", "B"))
    assert head_file(repo, "m.py") == b"def a():\n    pass\n\ndef b():\n    return 2\n"
    ok(coord(repo, "accept", "A"))
    assert head_file(repo, "m.py") == (repo / "m.py").read_bytes()


def test_a_line_moved_after_the_report_makes_a_whole_file_report_stale(make_repo, coord, worker):
    """Was: a line of a glob-granted file was moved below another after review; review
    and accept still passed (position-free digests)."""
    src = "def allowed(user):\n    if user.banned:\n        return False\n    if user.admin:\n        return True\n    return user.ok\n"
    repo = make_repo({"auth.py": src})
    begin(coord, worker, repo, "A", "auth.py")
    edited = src.replace("return user.ok", "return user.ok and user.active")
    write(repo, "auth.py", edited)
    ok(worker(repo, "done", "A"))
    ok(coord(repo, "review", "A"))
    moved = edited.replace("    if user.banned:\n        return False\n", "")
    moved = moved.replace("        return True\n", "        return True\n    if user.banned:\n        return False\n")
    write(repo, "auth.py", moved)
    r = coord(repo, "review", "A")
    assert r.code == 1
    assert [f["code"] for f in r.doc["findings"]] == ["stale-report"]
    r = coord(repo, "accept", "A")
    assert r.code == 1 and "stale-report" in err(r)


def test_a_moved_line_inside_a_range_makes_the_report_stale(make_repo, coord, worker):
    repo = make_repo({"f.txt": "a\nb\nc\nd\ne\nf\n"})
    begin(coord, worker, repo, "A", "f.txt:1-3")
    begin(coord, worker, repo, "B", "f.txt:4-6")
    write(repo, "f.txt", "a\nB\nc\nd\ne\nf\n")
    ok(worker(repo, "done", "A"))
    write(repo, "f.txt", "B\na\nc\nd\ne\nf\n")
    r = coord(repo, "review", "A")
    assert r.code == 1 and "stale-report" in [f["code"] for f in r.doc["findings"]]


def test_skipped_checks_are_recorded_and_block_accept_unless_rechecked(make_repo, coord, worker):
    """Was: `worker done --no-run-checks` after a failing check gave `validation: ok`,
    and accept committed a change that failed its own check."""
    repo = make_repo({"f.txt": "one\n", "ok.flag": "no\n"})
    begin(coord, worker, repo, "A", "f.txt", checks=("grep -q yes ok.flag",))
    write(repo, "f.txt", "ONE\n")
    assert worker(repo, "done", "A").code == 1  # the check fails: nothing delivered
    ok(worker(repo, "done", "A", "--no-run-checks"))
    r = coord(repo, "review", "A")
    assert r.code == 1 and [f["code"] for f in r.doc["findings"]] == ["checks-skipped"]
    r = coord(repo, "accept", "A")
    assert r.code == 1 and "checks-skipped" in err(r)
    r = coord(repo, "accept", "A", "--recheck")
    assert r.code == 1 and "recheck" in err(r)  # the check still fails on HEAD + A
    assert head_file(repo, "f.txt") == b"one\n"
