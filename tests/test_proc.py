"""The one door for user commands: a timeout or the end of a command takes every process
it started with it, and output stays bounded."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from hunkwise.shared.proc import run_command

from testing.cli import ok
from testing.repo import numbered, write
from testing.wait import wait_until


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_a_timeout_kills_the_checks_children_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    ran = run_command(f"sleep 30 & echo $! > {shlex.quote(str(pidfile))}; wait", tmp_path, 0.5)
    assert ran.exit_code == 124 and "timed out" in ran.output_tail
    pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip()))
    wait_until(lambda: not _alive(pid), what=f"sleep {pid} to die")


def test_a_process_that_left_the_group_is_killed_when_the_command_ends(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    ran = run_command(f"setsid sleep 30 & echo $! > {shlex.quote(str(pidfile))}", tmp_path, 10)
    assert ran.exit_code == 0
    pid = int(pidfile.read_text().strip())
    wait_until(lambda: not _alive(pid), what=f"setsid sleep {pid} to die")


def test_output_is_bounded_and_input_is_fed(tmp_path: Path) -> None:
    ran = run_command("cat; python3 -c \"print('x' * 10_000_000)\"", tmp_path, 60,
                      stdin=b"hello\n", tail_lines=3)
    assert ran.passed and ran.tail[0] == "hello"
    assert sum(len(line) for line in ran.tail) < 20_000


def test_worker_done_shows_the_failing_checks_output(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    ok(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "f.txt",
             "--check", "echo first; echo 'AssertionError: 2 != 3'; exit 1"))
    ok(worker(repo, "start", "A", session="sess-20260101-0900-w@m"))
    write(repo, "f.txt", "x\n")
    r = worker(repo, "done", "A")
    assert r.code == 1
    assert "AssertionError: 2 != 3" in r.doc["error"]["details"]
    assert "AssertionError: 2 != 3" in r.stderr
    # The check's output streams first, then the one-line verdict.
    assert any(ln.startswith("worker: A: check failed") for ln in r.stderr.splitlines())
    assert os.listdir(repo / ".git/coord/inbox/new") == []


def test_an_interruption_while_the_command_starts_still_kills_it(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """Ctrl-C (or a CI cancel) that lands after the command started but before the start
    returned: the command and its children are killed, not left running."""
    import signal
    import subprocess
    import threading

    import pytest
    from hunkwise.shared import proc

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    pidfile = tmp_path / "sleeper.pid"
    real = subprocess.Popen

    def popen_then_interrupted(*a: object, **k: object) -> subprocess.Popen[bytes]:
        started = real(*a, **k)  # type: ignore[call-overload]
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the command")
        os.kill(os.getpid(), signal.SIGINT)
        wait_until(lambda: True)  # a Python call: the pending signal is handled here
        return started

    monkeypatch.setattr(proc.subprocess, "Popen", popen_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_command(f"sleep 30 & echo $! > {shlex.quote(str(pidfile))}; wait", tmp_path, 60)
    pid = int(pidfile.read_text())
    try:
        wait_until(lambda: not _alive(pid), timeout=15, what=f"the command (pid {pid}) to die")
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
