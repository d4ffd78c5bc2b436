"""Wedges a newcomer met: each one a dead end that no command got out of."""

from __future__ import annotations

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git, write
from testing.wait import wait_until

S = "sess-20260101-0000-worker@m"
S2 = "sess-20260101-0001-worker@m"


def test_a_task_id_ending_in_dot_lock_works_end_to_end(coord: Cli, worker: Cli,
                                                        make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    ok(coord(repo, "assign", "t.lock", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t.lock", session=S))
    write(repo, "a.txt", "edited\n")
    ok(worker(repo, "heartbeat", "t.lock", session=S))  # records the work in progress
    r = worker(repo, "done", "t.lock", session=S)
    assert r.code == 0, r
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/hunkwise/")
    assert "refs/hunkwise/snapshots/t.lock+/r1" in refs
    git(repo, "checkout", "--", "a.txt")  # something destroys the edit
    assert ok(coord(repo, "status"))["lost"][0]["task"] == "t.lock"
    ok(coord(repo, "restore", "t.lock"))
    assert (repo / "a.txt").read_text() == "edited\n"
    commit = ok(coord(repo, "accept", "t.lock"))["commit"]
    assert git(repo, "show", f"{commit}:a.txt") == "edited\n"


def test_a_handoff_of_a_dot_lock_task(coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    ok(coord(repo, "assign", "x.lock", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "x.lock", session=S))
    write(repo, "a.txt", "edited\n")
    ok(worker(repo, "handoff", "x.lock", "--to", S2, "--next", "finish it", session=S))
    ok(worker(repo, "start", "x.lock", session=S2))
    ok(worker(repo, "done", "x.lock", session=S2))
    ok(coord(repo, "accept", "x.lock"))


def test_a_file_under_no_grant_written_all_along_does_not_wedge_done(
        coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    """Another worker's check writing its output into the tree (a log, a report file)
    over and over: the tree never stops changing there, and no task may commit it."""
    import subprocess
    import sys

    repo = make_repo({"a.txt": "a\n", ".gitignore": "stop\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t1", session=S))
    write(repo, "a.txt", "edited\n")
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, time\n"
        "while not os.path.exists('stop'):\n"
        "    with open('check-output.log', 'w') as f: f.write(str(time.time_ns()) * 50)\n")],
        cwd=repo)
    try:
        wait_until(lambda: (repo / "check-output.log").exists(), what="the writer writing")
        r = worker(repo, "done", "t1", session=S)
    finally:
        write(repo, "stop", "")
        writer.wait(timeout=60)
    assert r.code == 0, r
    assert r.doc["report"]["changes"] == 1
    ok(coord(repo, "accept", "t1"))
    assert git(repo, "show", "HEAD:a.txt") == "edited\n"
    assert "check-output.log" not in git(repo, "show", "--stat", "HEAD")

