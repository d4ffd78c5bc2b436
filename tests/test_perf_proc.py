"""Waiting for a user's command (a check, a verify command) costs nothing once it exits:
the wait wakes when the child ends, never on a polling timer (which made a command that
ran 70 ms look like 120 ms)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hunkwise.shared import proc
from hunkwise.shared.proc import run_command

from testing.wait import wait_until


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every time.sleep the waiting side makes (Popen.wait with a timeout polls with it)."""
    seen: list[float] = []
    real = time.sleep

    def counted(s: float) -> None:
        seen.append(s)
        real(s)

    monkeypatch.setattr(time, "sleep", counted)
    return seen


def no_pidfd(pid: int, flags: int = 0) -> int:
    raise OSError("no pidfd here")


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "waiter-thread"])
def test_a_command_is_waited_for_without_polling(tmp_path: Path, sleeps: list[float],
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 pidfd: bool) -> None:
    if not pidfd:
        monkeypatch.setattr(os, "pidfd_open", no_pidfd, raising=False)
    ran = run_command("sleep 0.05; echo done; exit 3", tmp_path, 10)
    assert ran.exit_code == 3 and ran.tail == ["done"]
    assert sleeps == []


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "waiter-thread"])
def test_the_timeout_still_ends_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            pidfd: bool) -> None:
    if not pidfd:
        monkeypatch.setattr(os, "pidfd_open", no_pidfd, raising=False)
    started = time.monotonic()
    ran = run_command("sleep 30", tmp_path, 0.3)
    assert ran.exit_code == 124 and "timed out" in ran.output_tail
    assert time.monotonic() - started < 10


def test_wait_answers_the_exit_code_of_a_command_that_already_ended(tmp_path: Path) -> None:
    import subprocess

    p = subprocess.Popen(["sh", "-c", "exit 7"])
    wait_until(lambda: Path(f"/proc/{p.pid}/stat").read_text().split(") ", 1)[1][0] == "Z",
               what="the child to end (a zombie, not reaped yet)")
    assert proc._wait(p, 5) == 7
