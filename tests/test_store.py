"""The state lock: held by another process it refuses after COORD_LOCK_TIMEOUT (exit 3,
nothing written); a holder that dies frees it; a waiter gets it once it is released."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

from hunkwise.shared.state import store

from testing.wait import wait_until

HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def _hold(lock: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "held\n"
    return p


def test_a_held_lock_refuses_with_exit_3_and_a_killed_holder_frees_it(make_repo, coord) -> None:
    repo = make_repo({"a.txt": "a\n"})
    assert coord(repo, "init").code == 0
    lay = store.layout(repo)
    before = lay.state_file.read_bytes()
    holder = _hold(lay.lock_file)
    try:
        r = coord(repo, "assign", "T", "--title", "t", "--expect", "e", "--write", "a.txt",
                  env={"COORD_LOCK_TIMEOUT": "0.2"})
        assert r.code == 3, r
        assert "is held by another process" in json.loads(r.stdout)["error"]["message"]
        assert lay.state_file.read_bytes() == before  # nothing written
    finally:
        holder.send_signal(signal.SIGKILL)  # dies holding it: the kernel frees the lock
        holder.wait()
    r = coord(repo, "assign", "T", "--title", "t", "--expect", "e", "--write", "a.txt",
              env={"COORD_LOCK_TIMEOUT": "5"})
    assert r.code == 0, r


def test_a_waiter_gets_the_lock_once_it_is_released(make_repo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    lay = store.layout(repo)
    order: list[str] = []
    release = threading.Event()
    entered = threading.Event()

    def first() -> None:
        with store.locked(lay, timeout=5):
            order.append("first in")
            entered.set()
            release.wait(10)
            order.append("first out")

    def second() -> None:
        entered.wait(10)
        with store.locked(lay, timeout=10):
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    wait_until(entered.is_set, what="the first holder")
    assert order == ["first in"]  # the second waits while the first holds it
    release.set()
    for t in threads:
        t.join(10)
    assert order == ["first in", "first out", "second in"]


def test_a_transaction_writes_the_state_only_when_it_changed(make_repo, coord) -> None:
    """The state is serialised once per transaction and compared with what was read: an
    unchanged state is not rewritten (same file), a changed one is."""
    repo = make_repo({"a.txt": "a\n"})
    assert coord(repo, "assign", "T", "--title", "t", "--expect", "e", "--write", "a.txt").code == 0
    lay = store.layout(repo)
    before = lay.state_file.stat()
    with store.transaction(lay) as state:
        assert "T" in state.tasks
    after = lay.state_file.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    with store.transaction(lay) as state:
        state.tasks["T"].title = "renamed"
    assert lay.state_file.stat().st_ino != before.st_ino
    assert store.load(lay).tasks["T"].title == "renamed"
    fresh = store.layout(make_repo({"b.txt": "b\n"}))
    with store.transaction(fresh):
        pass
    assert not fresh.state_file.exists()  # nothing to write, nothing written


def test_a_transaction_that_fails_leaves_no_unsaved_state_to_reuse(make_repo) -> None:
    """Its changes were never written: a later load that offers the same object back
    reads the file, not the changed object."""
    import pytest
    from hunkwise.shared.state import store
    from hunkwise.shared.state.models import State

    lay = store.layout(make_repo({"a.txt": "a\n"}))
    store.ensure(lay)
    store.save(lay, State())
    kept = store.load(lay)
    with pytest.raises(RuntimeError):
        with store.transaction(lay, reuse=kept) as st:
            st.batch = 7
            raise RuntimeError("the command failed half-way")
    assert store.load(lay, reuse=kept).batch != 7
