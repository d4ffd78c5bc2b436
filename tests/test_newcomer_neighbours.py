"""`worker done` tells the worker what it changed in its files outside its grants."""

from __future__ import annotations

from testing.cli import Cli, ok
from testing.repo import MakeRepo, numbered, set_line, write

S1 = "sess-20260101-0000-worker@m"
S2 = "sess-20260101-0001-worker@m"


def _neighbours(coord: Cli, worker: Cli, make_repo: MakeRepo):  # type: ignore[no-untyped-def]
    repo = make_repo({"a.py": numbered(20), "other.py": numbered(3)})
    ok(coord(repo, "assign", "t1", "--title", "T1", "--expect", "E", "--write", "a.py:1-10"))
    ok(coord(repo, "assign", "t2", "--title", "T2", "--expect", "E", "--write", "a.py:11-20",
             "--write", "other.py"))
    ok(worker(repo, "start", "t1", session=S1))
    ok(worker(repo, "start", "t2", session=S2))
    return repo


def test_an_edit_in_a_neighbours_range_is_named_at_done(coord: Cli, worker: Cli,
                                                         make_repo: MakeRepo) -> None:
    repo = _neighbours(coord, worker, make_repo)
    set_line(repo, "a.py", 3, "mine")
    set_line(repo, "a.py", 15, "strayed into t2's range")
    r = worker(repo, "done", "t1", session=S1)
    assert r.code == 0, r  # delivered all the same: the exit code is unchanged
    doc = r.doc
    assert doc["report"]["changes"] == 1
    outside = doc["outside_grants"]
    assert [(o["path"], o["lines"], o["task_id"]) for o in outside] == [("a.py", "line 15", "t2")]
    assert "a.py:11-20" in outside[0]["note"]
    assert "outside your grants" in r.stderr and "a.py line 15" in r.stderr
    assert "coord grant" in r.stderr


def test_unowned_lines_in_a_held_file_are_named_and_other_files_are_not(
        coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.py": numbered(20), "b.py": numbered(3)})
    ok(coord(repo, "assign", "t1", "--title", "T1", "--expect", "E", "--write", "a.py:1-10"))
    ok(worker(repo, "start", "t1", session=S1))
    set_line(repo, "a.py", 2, "mine")
    set_line(repo, "a.py", 18, "no one's")
    write(repo, "b.py", "elsewhere\n")  # a file the task neither holds nor touches
    doc = ok(worker(repo, "done", "t1", session=S1))
    assert [(o["path"], o["lines"], o["task_id"]) for o in doc["outside_grants"]] == [
        ("a.py", "line 18", None)]


def test_a_neighbours_reported_change_is_not_named(coord: Cli, worker: Cli,
                                                    make_repo: MakeRepo) -> None:
    repo = _neighbours(coord, worker, make_repo)
    set_line(repo, "a.py", 15, "t2's own")
    ok(worker(repo, "done", "t2", session=S2))
    set_line(repo, "a.py", 3, "mine")
    r = worker(repo, "done", "t1", session=S1)
    assert r.code == 0 and r.doc["outside_grants"] == []
    assert "outside your grants" not in r.stderr


def test_nothing_said_when_all_is_in_the_grant(coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo = _neighbours(coord, worker, make_repo)
    set_line(repo, "a.py", 3, "mine")
    r = worker(repo, "done", "t1", session=S1, json_out=False)
    assert r.code == 0 and "warning" not in r.stderr
