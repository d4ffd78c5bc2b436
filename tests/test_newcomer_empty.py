"""An empty "done" is refused where the worker can still act on it, with the way forward."""

from __future__ import annotations

from testing.cli import Cli, error_message, ok
from testing.repo import MakeRepo, write

S = "sess-20260101-0000-worker@m"


def test_done_with_no_changes_is_refused_naming_the_way_forward(coord: Cli, worker: Cli,
                                                               make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t1", session=S))
    r = worker(repo, "done", "t1", session=S)
    assert r.code == 1, r
    msg = error_message(r)
    assert "no changes in your grants" in msg and "a.txt" in msg
    assert "worker blocked t1 --reason" in msg and "worker failed t1 --reason" in msg
    assert "nothing was delivered" in msg
    assert ok(coord(repo, "inbox"))["reports"] == []
    assert ok(coord(repo, "status"))["tasks"][0]["state"] == "in_progress"
    # The ways named work.
    ok(worker(repo, "blocked", "t1", "--reason", "nothing to change", session=S))
    assert ok(coord(repo, "inbox"))["reports"][0]["status"] == "blocked"


def test_an_edit_outside_the_grant_only_is_still_empty(coord: Cli, worker: Cli,
                                                       make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t1", session=S))
    write(repo, "b.txt", "edited\n")
    r = worker(repo, "done", "t1", session=S)
    assert r.code == 1 and "no changes in your grants" in error_message(r)
