"""What happens while this process holds the state lock (the `under_lock` fixture)."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest


def watch_the_state_lock(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record what happens while this process holds the state lock: every process started,
    every object read through the command's cat-file, every fsync of something other than
    the state file and its directory. Returns that list, which gets a "hold" entry each
    time the lock is taken; `monkeypatch` undoes the watch."""
    from hunkwise.shared import git as hgit
    from hunkwise.shared.state import store

    seen: list[str] = []
    held = threading.local()
    real_acquire = store._acquire

    def acquire(path: Path, wait: float) -> Callable[[], None] | None:
        release = real_acquire(path, wait)
        if release is None or path.name != "lock":
            return release
        held.on = True
        seen.append("hold")

        def let_go() -> None:
            held.on = False
            release()
        return let_go

    def holding() -> bool:
        return bool(getattr(held, "on", False))

    real_init = subprocess.Popen.__init__

    def popen(self: Any, args: Any, *a: Any, **k: Any) -> None:
        if holding():
            seen.append(f"process {args!r}")
        real_init(self, args, *a, **k)

    real_read = hgit.read_objects

    def read_objects(repo: Path,
                     names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
        if holding():
            seen.append(f"git read {list(names)!r}")
        return real_read(repo, names)

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if holding():
            target = os.readlink(f"/proc/self/fd/{fd}")
            if not (Path(target).name.startswith(".state.json.")
                    or Path(target).name == "coord"):
                seen.append(f"fsync {target}")
        real_fsync(fd)

    monkeypatch.setattr(store, "_acquire", acquire)
    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(hgit, "read_objects", read_objects)
    monkeypatch.setattr(os, "fsync", fsync)
    return seen
