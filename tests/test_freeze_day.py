"""A release freeze on a real day: deferred workers are told, their edits do not throw a
passing proof away, and a failing proof says what it covered and why it failed."""

from __future__ import annotations

from testing.cli import ok
from testing.project import project
from testing.repo import numbered, write

W1 = "sess-20260101-0900-build@desk"
W2 = "sess-20260101-0901-build@desk"


def test_deferred_workers_are_signalled_and_their_own_edits_do_not_fail_verify(
        make_repo, coord, worker):
    repo = project(make_repo)
    ok(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "app.txt:1-5"))
    ok(coord(repo, "assign", "B", "--title", "t", "--expect", "e", "--write", "notes.txt"))
    ok(worker(repo, "start", "A", session=W1))
    ok(worker(repo, "start", "B", session=W2))
    write(repo, "app.txt", numbered(10).replace("line 2\n", "line two\n"))
    doc = ok(coord(repo, "freeze", "--defer-running"))
    assert doc["freeze"]["deferred"] == ["A", "B"]
    told = ok(worker(repo, "signals", session=W1))["signals"]
    assert [(s["type"], s["about"]) for s in told] == [("BLOCKED_ON", "A")]
    assert "stop editing" in told[0]["payload"]
    # A keeps editing its own lines during the verify: the frozen commit is unaffected.
    write(repo, "app.txt", numbered(10).replace("line 2\n", "line two\n")
          .replace("line 4\n", "line four\n"))
    r = coord(repo, "verify")
    assert r.code == 0, r.stdout
    assert r.doc["deferred_edits"] == [{"task": "A", "paths": ["app.txt"]}]
    human = coord(repo, "verify", json_out=False).stdout
    assert "deferred task A edited its own grant" in human
    # An edit outside every deferred grant still fails the proof.
    write(repo, "app.txt", numbered(10).replace("line 2\n", "line two\n")
          .replace("line 4\n", "line four\n").replace("line 9\n", "line nine\n"))
    r = coord(repo, "verify")
    assert r.code == 1 and any("app.txt" in p for p in r.doc["problems"])


def test_a_failing_verify_lists_the_batch_and_the_failing_output(make_repo, coord, worker):
    repo = project(make_repo, ["python3 check.py", "echo the-reason-it-broke; exit 4"])
    ok(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "notes.txt"))
    ok(worker(repo, "start", "A", session=W1))
    write(repo, "notes.txt", "better notes\n")
    ok(worker(repo, "done", "A", session=W1))
    ok(coord(repo, "accept", "A"))
    ok(coord(repo, "freeze"))
    r = coord(repo, "verify", json_out=False)
    assert r.code == 1
    assert "accepted tasks A" in r.stdout
    assert "the-reason-it-broke" in r.stdout
    assert "verify FAILED" in r.stdout


def test_a_deferred_task_adding_a_file_in_its_glob_does_not_fail_verify(make_repo, coord,
                                                                        worker):
    repo = project(make_repo)
    ok(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "docs/**"))
    ok(worker(repo, "start", "A", session=W1))
    ok(coord(repo, "freeze", "--defer-running"))
    write(repo, "docs/new.md", "written during the freeze\n")
    r = coord(repo, "verify")
    assert r.code == 0, r.stdout
    assert r.doc["deferred_edits"] == [{"task": "A", "paths": ["docs/new.md"]}]
