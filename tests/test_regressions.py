"""Behaviour that once went wrong, each reproduced through the CLI on a real repo."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from hunkwise.shared.hunks.globs import glob_matches

from testing.env import BIN, ROOT
from testing.repo import git, git_bytes, numbered, write

S_A = "sess-20260101-0900-worker@box-a"
S_NEW = "sess-20260101-0901-worker@box-b"


def _lines(*rows: str) -> str:
    return "".join(r + "\n" for r in rows)


def _task(coord, worker, repo: Path, tid: str, grant: str, edit, *, check: str | None = None,
          session: str | None = None) -> None:
    args = ["assign", tid, "--title", tid, "--expect", "e", "--write", grant]
    if check:
        args += ["--check", check]
    assert coord(repo, *args).code == 0
    assert worker(repo, "start", tid, *(["--session", session] if session else [])).code == 0
    edit()


def test_revert_puts_a_deleted_line_after_a_later_replacement(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    f = repo / "f.txt"
    _task(coord, worker, repo, "A", "f.txt:6-8",
          lambda: f.write_text(f.read_text().replace("line 6\n", "")))
    assert worker(repo, "done", "A").code == 0 and coord(repo, "accept", "A").code == 0
    _task(coord, worker, repo, "B", "f.txt:1-5",
          lambda: f.write_text(f.read_text().replace("line 5\n", "X\nY\nZ\n")))
    assert worker(repo, "done", "B").code == 0 and coord(repo, "accept", "B").code == 0
    r = coord(repo, "revert", "A")
    assert r.code == 0, r.stderr
    want = numbered(10).replace("line 5\n", "X\nY\nZ\n").encode()
    assert git_bytes(repo, "show", "HEAD:f.txt") == want
    assert f.read_bytes() == want


def test_restore_around_an_insertion_after_the_deleted_line(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    f = repo / "f.txt"
    _task(coord, worker, repo, "A", "f.txt:6-6",
          lambda: f.write_text(f.read_text().replace("line 6\n", "")))
    assert worker(repo, "done", "A").code == 0
    git(repo, "checkout", "-q", "f.txt")  # destroys A's change
    f.write_text(f.read_text().replace("line 6\n", "line 6\nX\nY\n"))  # someone inserts after 6
    r = coord(repo, "restore", "A")
    assert r.code == 0, r.stdout + r.stderr
    assert f.read_text() == numbered(10).replace("line 6\n", "X\nY\n")


def test_accept_refuses_a_task_sent_back_while_it_was_being_accepted(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "1\n"})
    # The recheck itself sends the task back, deterministically inside accept's window.
    check = f"{BIN / 'coord'} request-changes A --note again --repo {repo}"
    _task(coord, worker, repo, "A", "a.txt", lambda: write(repo, "a.txt", "2\n"), check=check)
    assert worker(repo, "done", "A", "--no-run-checks").code == 0
    head = git(repo, "rev-parse", "HEAD")
    r = coord(repo, "accept", "A", "--recheck")
    assert r.code == 3 and "changed while it was being accepted" in r.doc["error"]["message"]
    assert git(repo, "rev-parse", "HEAD") == head
    tasks = {t["id"]: t for t in coord(repo, "status").doc["tasks"]}
    assert tasks["A"]["state"] == "changes_requested"


def test_a_done_in_flight_loses_to_a_recovery(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "1\n"})
    # The check outlives the claim (aged past its TTL, as age_claims does), then another
    # session recovers and restarts the task.
    age = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
           f"from testing.state import age_claims; age_claims(Path({str(repo)!r}), 'A')")
    check = (f"{shlex.quote(sys.executable)} -c {shlex.quote(age)} && "
             # the coordinator acting meanwhile (coord refuses its commands to the worker)
             f"HUNKWISE_COORDINATOR=1 {BIN / 'coord'} recover A --repo {repo} >/dev/null && "
             f"{BIN / 'worker'} start A --session {S_NEW} --repo {repo} >/dev/null")
    _task(coord, worker, repo, "A", "a.txt", lambda: write(repo, "a.txt", "2\n"), check=check,
          session=S_A)
    r = worker(repo, "done", "A", session=S_A)
    assert r.code == 3, r.stdout + r.stderr
    assert not list((repo / ".git" / "coord" / "inbox" / "new").iterdir())
    tasks = {t["id"]: t for t in coord(repo, "status").doc["tasks"]}
    assert (tasks["A"]["state"], tasks["A"]["session"]) == ("in_progress", S_NEW)


def test_verify_runs_the_frozen_commits_commands(make_repo, coord, worker) -> None:
    repo = make_repo({"coord.toml": '[verify]\ncommands = ["test -f marker"]\n'})
    _task(coord, worker, repo, "A", "coord.toml",
          lambda: write(repo, "coord.toml", '[verify]\ncommands = ["true"]\n'))
    assert coord(repo, "freeze", "--defer-running").code == 0
    r = coord(repo, "verify")
    assert r.code == 1
    assert [c["command"] for c in r.doc["commands"]] == ["test -f marker"]


def test_a_directory_glob_covers_what_is_below_it(make_repo, coord, worker) -> None:
    assert glob_matches("src/*", "src/sub/b.py")
    assert not glob_matches("src/*.py", "src/sub/b.py")
    repo = make_repo({"src/a.py": "a\n", "src/sub/b.py": "b\n"})
    _task(coord, worker, repo, "A", "src/*",
          lambda: (write(repo, "src/a.py", "A\n"), write(repo, "src/sub/b.py", "B\n")))
    done = worker(repo, "done", "A")
    assert done.code == 0 and done.doc["report"]["changes"] == 2
    assert coord(repo, "accept", "A").doc["paths"] == ["src/a.py", "src/sub/b.py"]


def test_a_glob_and_a_range_of_one_task_on_one_file_do_not_conflict(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(8)})
    assert coord(repo, "assign", "D", "--title", "t", "--expect", "e", "--write", "f.txt",
                 "--write", "f.txt:1-3").code == 0
    assert worker(repo, "start", "D").code == 0
    # Lines 3-4: partly outside the range, but the task's glob holds the whole file.
    (repo / "f.txt").write_text(numbered(8).replace("line 3\nline 4\n", "three\nfour\n"))
    assert worker(repo, "done", "D").doc["report"]["hunks"] == 1
    r = coord(repo, "accept", "D")
    assert r.code == 0, r.stdout + r.stderr
    assert git_bytes(repo, "show", "HEAD:f.txt") == (repo / "f.txt").read_bytes()


def test_what_changes_no_code_is_allowed_while_frozen(make_repo, coord, worker) -> None:
    """Was: heartbeat, checkpoint and ask were refused during a freeze, so a reported
    task's claim expired during a long verify."""
    repo = make_repo({"a.txt": "1\n", "coord.toml": '[verify]\ncommands = ["true"]\n'})
    _task(coord, worker, repo, "A", "a.txt", lambda: write(repo, "a.txt", "2\n"), session=S_A)
    assert worker(repo, "done", "A", session=S_A).code == 0
    assert coord(repo, "freeze").code == 0
    assert worker(repo, "heartbeat", "A", session=S_A).code == 0
    assert worker(repo, "checkpoint", "A", "--next", "resume a.txt", session=S_A).code == 0
    assert worker(repo, "ask", "A", "--question", "ship it?", session=S_A).code == 0
    assert worker(repo, "signal", "--to", "*", "--type", "BLOCKED_ON", "--about", "A",
                  session=S_A).code == 0
    assert worker(repo, "signals", "--ack", session=S_A).code == 0
    v = coord(repo, "verify")
    assert v.code == 0, v.doc["problems"]  # none of it touched the frozen set


def test_recover_releases_a_handoff_nobody_can_take(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "1\n"})
    _task(coord, worker, repo, "A", "a.txt", lambda: None, session=S_A)
    typo = "sess-20260101-0900-workr@box-a"
    assert worker(repo, "handoff", "A", "--to", typo, "--next", "n", session=S_A).code == 0
    assert worker(repo, "start", "A", "--session", S_NEW).code == 3
    r = coord(repo, "recover", "A")
    assert r.code == 0 and r.doc["released_reservation"] == typo
    assert worker(repo, "start", "A", "--session", S_NEW).code == 0


def test_a_range_on_a_binary_file_is_refused(make_repo, coord) -> None:
    repo = make_repo({"b.bin": b"\x00\x01\x02\n\x03\n"})
    r = coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "b.bin:1-1")
    assert r.code == 2 and "binary" in r.doc["error"]["message"]
    assert json.loads(coord(repo, "status").stdout)["tasks"] == []


def test_coord_inbox_sweeps_what_a_killed_writer_left_in_tmp(make_repo, coord) -> None:
    import os
    import time

    repo = make_repo({"a.txt": "1\n"})
    assert coord(repo, "init").code == 0
    tmp = repo / ".git" / "coord" / "inbox" / "tmp"
    old, fresh = tmp / "old-partial", tmp / "fresh-partial"
    old.write_bytes(b'{"half')
    fresh.write_bytes(b'{"half')
    two_days_ago = time.time() - 48 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    r = coord(repo, "inbox")
    assert r.code == 0 and r.doc["reports"] == []
    assert not old.exists() and fresh.exists()  # a writer may still be busy with a fresh one
