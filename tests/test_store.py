"""The state lock: held by another process it refuses after COORD_LOCK_TIMEOUT (exit 3,
nothing written); a holder that dies frees it; a waiter gets it once it is released. And
the state file's bytes: what is saved is read back as it was, and what cannot be read
back is never saved."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hunkwise.shared.state import store
from hunkwise.shared.state.models import State, Task

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


# ---- the state file's bytes ---------------------------------------------------------------

def _read_again(lay: store.Layout) -> State:
    store._SEEN.clear()  # (a command's first read, not the state it saved itself)
    return store.load(lay)


def test_what_orjson_reads_otherwise_is_read_back_as_it_was_saved(make_repo, coord) -> None:
    """The state is read by orjson, which takes an int past 64 bits for a float and
    refuses a byte-order mark: such a state (a ttl of 2**64 seconds in coord.toml reaches
    the task's claim) is read as json reads it, never called unreadable."""
    repo = make_repo({"a.txt": "a\n"})
    assert coord(repo, "assign", "T", "--title", "t", "--expect", "e", "--write", "a.txt").code == 0
    lay = store.layout(repo)
    with store.transaction(lay) as state:
        state.seq["huge"] = 2**64
    assert _read_again(lay).seq["huge"] == 2**64
    lay.state_file.write_bytes(b"\xef\xbb\xbf" + lay.state_file.read_bytes())  # saved by hand
    again = _read_again(lay)
    assert again.seq["huge"] == 2**64 and again.tasks["T"].title == "t"
    assert coord(repo, "status").code == 0


@pytest.mark.parametrize("written", ["field by field", "by its compiled form"])
def test_a_value_that_is_not_a_finite_number_is_never_saved(make_repo, coord, written: str,
                                                            monkeypatch) -> None:
    """NaN or an infinity in a float field (or a dict of floats) fails the save, as json
    did; the file keeps what it held (orjson would write null, which no reader takes)."""
    repo = make_repo({"a.txt": "a\n"})
    assert coord(repo, "assign", "T", "--title", "t", "--expect", "e", "--write", "a.txt").code == 0
    lay = store.layout(repo)
    monkeypatch.setattr(store, "_FORMS", {})
    monkeypatch.setattr(store, "_WRITTEN", {} if written == "field by field"
                        else {State: 10**6, Task: 10**6})
    before = lay.state_file.read_bytes()
    spoils = [lambda s: setattr(s.tasks["T"], "updated_at", float("nan")),
              lambda s: s.sessions.__setitem__("w", float("inf"))]
    for spoil in spoils:
        with pytest.raises(ValueError, match="not a finite number"):
            with store.transaction(lay) as state:
                spoil(state)
        assert lay.state_file.read_bytes() == before
    assert _read_again(lay).tasks["T"].title == "t"
