"""The one door for the user's own commands: checks, verify commands, notifiers.

Git has its door (`git.py`); whatever a user configured runs through this one, with one set
of rules:
- in a process group of its own, so a timeout or an interruption (Ctrl-C, a CI cancel's
  SIGTERM) kills the command and every child it started, not only `/bin/sh`;
- processes that left the group (`setsid`, a daemonizing server) are found by a marker in
  their environment and killed too, on Linux, once the command ends;
- output is read as it comes and only a bounded tail is kept (lines cut at MAX_LINE,
  the last `tail_lines` of them), so a command printing gigabytes costs no memory.
"""

from __future__ import annotations

import io
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import cast

MAX_LINE = 2000
MARK = "HUNKWISE_RUN"


@dataclass
class Ran:
    exit_code: int
    duration_s: float
    tail: list[str]

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def output_tail(self) -> str:
        return "\n".join(self.tail)


def run_command(cmd: str, cwd: Path, timeout: float, *, label: str | None = None,
                stdin: bytes | None = None, tail_lines: int = 40,
                env: dict[str, str] | None = None) -> Ran:
    """Run `cmd` with /bin/sh in `cwd`; exit 124 on timeout. With `label`, each output
    line is also echoed to stderr, prefixed with the label and the elapsed time."""
    start = time.monotonic()
    tail: deque[str] = deque(maxlen=tail_lines)
    token = os.urandom(8).hex()

    def emit_line(raw: bytes, cut: bool) -> None:
        line = raw.decode("utf-8", "replace")[:MAX_LINE] + (" [...]" if cut else "")
        tail.append(line)
        if label is not None:
            sys.stderr.write(f"[{label} {time.monotonic() - start:6.1f}s] {line}\n")

    def pump(proc: subprocess.Popen[bytes]) -> None:
        stream = cast(io.BufferedReader, proc.stdout)
        buf = b""
        cut = False
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                emit_line(raw, cut)
                cut = False
            if len(buf) > MAX_LINE * 4:
                buf, cut = buf[: MAX_LINE * 4], True
                while True:  # drop the rest of an endless line until its newline comes
                    more = stream.read1(65536)
                    if not more:
                        break
                    if b"\n" in more:
                        emit_line(buf, True)
                        buf, cut = more.split(b"\n", 1)[1], False
                        break
        if buf:
            emit_line(buf, cut)

    full_env = {**os.environ, **(env or {}), MARK: token}
    # An interruption that arrives while the command is being started is held until it
    # has started (the command may already run, and must then be killed with its group):
    # a Ctrl-C or a CI cancel in that moment used to leave it running.
    saved, held = _hold_interruptions()
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", cmd], cwd=str(cwd), env=full_env,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
    except BaseException:
        _release(saved, held)
        raise
    try:  # at once: an interruption from here on must take the command's group with it
        _release(saved, held)
        reader = threading.Thread(target=pump, args=(proc,), daemon=True)
        reader.start()
        if stdin is not None:
            feeder = threading.Thread(target=_feed, args=(proc, stdin), daemon=True)
            feeder.start()
        code = _wait(proc, timeout)
    except subprocess.TimeoutExpired:
        _kill(proc, token)
        code = 124
        tail.append(f"[timed out after {timeout:g}s]")
    except BaseException:
        _kill(proc, token)
        raise
    _kill_marked(token)  # what it left running in the background goes with it
    reader.join(timeout=5)
    return Ran(code, round(time.monotonic() - start, 3), list(tail))


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """The child's exit code, the moment it exits; TimeoutExpired after `timeout` seconds.

    `Popen.wait(timeout=...)` polls `waitpid` with sleeps that double up to 50 ms, so a
    command that ends at once was seen to end up to tens of milliseconds late. A pidfd
    (Linux 5.3) becomes readable when the child exits, and `select` wakes on it; elsewhere
    a thread blocks in `wait()` and an Event carries its answer back, without polling.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = -1
    if fd >= 0:
        try:
            # select retries on EINTR with the time left (PEP 475); a signal handler that
            # raises (Ctrl-C) ends the wait, and the caller kills the group.
            ready, _w, _x = select.select([fd], [], [], timeout)
        finally:
            os.close(fd)
        if not ready:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        return proc.wait()
    ended = threading.Event()

    def reap() -> None:
        proc.wait()
        ended.set()

    threading.Thread(target=reap, daemon=True).start()
    if not ended.wait(timeout):
        raise subprocess.TimeoutExpired(proc.args, timeout)
    return proc.wait()


_INTERRUPTIONS = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals() -> dict[int, object]:
    """SIGTERM (a service manager, `kill`) stops a long-running command (`coord watch`,
    `coord board`) as cleanly as ^C does, and so does SIGINT where it was ignored at start
    (a shell's background job): both raise KeyboardInterrupt in the main thread. The
    handlers replaced, for `restore_signals` (none off the main thread)."""

    def interrupt(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    saved: dict[int, object] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            saved[sig] = signal.signal(sig, interrupt)
        except ValueError:  # not the main thread (one run from a test's thread)
            break
    return saved


def restore_signals(saved: dict[int, object]) -> None:
    for sig, handler in saved.items():
        signal.signal(sig, cast(signal.Handlers, handler))


def _hold_interruptions() -> tuple[dict[int, object], list[int]]:
    """Hold SIGINT and SIGTERM (main thread only: signals reach no other); what arrives
    meanwhile is listed, and `_release` hands it to the handlers it was held from."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        return {}, held
    saved = {s: signal.signal(s, lambda signum, _frame: held.append(signum))
             for s in _INTERRUPTIONS}
    return cast(dict[int, object], saved), held


def _release(saved: dict[int, object], held: list[int]) -> None:
    for s, handler in saved.items():
        signal.signal(s, cast(signal.Handlers, handler))
    for s in dict.fromkeys(held):
        handler = saved[s]
        if callable(handler):
            handler(s, None)  # SIGINT's default handler raises KeyboardInterrupt; verify's too
        elif handler == signal.SIG_DFL:
            signal.raise_signal(s)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
    except OSError:
        pass  # the command did not read its input


def _kill(proc: subprocess.Popen[bytes], token: str) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _kill_marked(token)
    proc.wait()


def _kill_marked(token: str) -> None:
    """Kill every process whose environment carries this run's marker (Linux /proc)."""
    needle = f"{MARK}={token}".encode()
    me = os.getpid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                found = needle in f.read().split(b"\0")
        except OSError:
            continue
        if found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
