"""Waiting for a condition (a readiness line, a file, a state change), never for a fixed
time."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")


class Lines:
    """A process's output read line by line in the background, to wait for a condition
    (a readiness line, an event) instead of sleeping for a fixed time."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.seen: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            for raw in iter(stream.readline, b""):
                self._q.put(raw.decode("utf-8", "replace"))
            self._q.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def wait_for(self, needle: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        for line in self.seen:
            if needle in line:
                return line
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line with {needle!r} in {timeout}s; saw {self.seen}")
            try:
                got = self._q.get(timeout=left)
            except queue.Empty:
                continue
            if got is None:
                raise AssertionError(f"output ended without {needle!r}; saw {self.seen}")
            self.seen.append(got)
            if needle in got:
                return got


def wait_until(predicate: Callable[[], T], timeout: float = 60.0, what: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def stopped_by_each_signal(argv: list[str], cwd: Path, ready: str) -> list[tuple[int, bytes]]:
    """Start `argv` with SIGINT ignored (as a shell's background job starts it), wait for
    its `ready` line on stderr, stop it with SIGTERM, then again with SIGINT: each time, its
    exit code and what it wrote on stdout."""
    import signal
    import subprocess

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    got = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=ignore_sigint)
        try:
            assert proc.stderr is not None
            Lines(proc.stderr).wait_for(ready)
        finally:
            proc.send_signal(sig)
            out, _ = proc.communicate(timeout=60)
        got.append((proc.returncode, out))
    return got
