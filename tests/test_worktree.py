"""A file replaced in the shared tree while another process holds it open for writing.

That process's next write goes into the file that was replaced, not the new one: the write
must wait until no one holds the old file open for writing, and then, if it grew, put it
back (refused: "changed while this ran, retry") rather than lose the write. Readers that
hold a file open (`tail -f`) do not hold a write up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hunkwise.shared import git as g
from hunkwise.shared.errors import StateRefused
from hunkwise.shared.git import objects, worktree

from testing.wait import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the kernel tells open writers only on Linux")

# Opens the file for writing (appending, or truncating as `open(path, "w")` does), says
# so, writes one line when told to, then closes.
WRITER = r"""
import os, sys
truncate = sys.argv[2] == "truncate"
fd = os.open(sys.argv[1], os.O_WRONLY | (os.O_TRUNC if truncate else os.O_APPEND))
print("open", flush=True)
sys.stdin.readline()
os.write(fd, b"new content\n" if truncate else b"late line\n")
os.close(fd)
print("closed", flush=True)
"""


def _writer(path: Path, how: str) -> subprocess.Popen[str]:
    """WRITER started on `path` ("append" or "truncate"), once it holds the file open."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), how],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == "open\n"
    return proc


def _let_write(proc: subprocess.Popen[str]) -> None:
    """Tell a started WRITER to write and close; return once it has."""
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "closed\n"


def _replace(repo: Path, text: bytes, box: dict[str, Any]) -> None:
    try:
        oid = objects.hash_blobs(repo, [text])[0]
        worktree.write_entries(repo, {"f.txt": ("100644", oid)})
        box["result"] = "written"
    except StateRefused as e:
        box["result"] = e.message
    finally:
        g.close_readers()


def test_a_write_into_the_replaced_file_is_kept(make_repo, monkeypatch) -> None:
    repo = make_repo({"f.txt": "one\n"})
    calls = []
    real = getattr(worktree, "_held_for_writing", None)
    if real is not None:
        monkeypatch.setattr(worktree, "_held_for_writing",
                            lambda p: calls.append(p) or real(p))
    holder = _writer(repo / "f.txt", "append")
    try:
        box: dict[str, Any] = {}
        t = threading.Thread(target=_replace, args=(repo, b"two\n", box))
        t.start()
        # The new file is in place; the write is either over or waiting for the holder.
        wait_until(lambda: (repo / "f.txt").read_bytes() == b"two\n" or box, what="the rename")
        wait_until(lambda: not t.is_alive() or len(calls) >= 3, what="the write to wait")
        _let_write(holder)
        t.join(timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert "changed while this ran" in box["result"], box
    assert (repo / "f.txt").read_bytes() == b"one\nlate line\n"  # nothing lost
    assert not [p for p in os.listdir(repo) if p.startswith(".hunkwise-")]


def test_a_writer_that_keeps_the_file_open_gets_the_write_refused(make_repo, monkeypatch) -> None:
    repo = make_repo({"f.txt": "one\n"})
    monkeypatch.setattr(worktree, "LATE_WAIT_S", 0.2)
    holder = _writer(repo / "f.txt", "append")
    try:
        box: dict[str, Any] = {}
        _replace(repo, b"two\n", box)
        assert "changed while this ran" in box["result"], box
        assert (repo / "f.txt").read_bytes() == b"one\n"
        _let_write(holder)
    finally:
        holder.kill()
        holder.wait()
    assert (repo / "f.txt").read_bytes() == b"one\nlate line\n"


def test_a_reader_holding_the_file_open_does_not_hold_the_write_up(make_repo, monkeypatch) -> None:
    repo = make_repo({"f.txt": "one\n"})
    monkeypatch.setattr(worktree, "LATE_WAIT_S", 60.0)  # a wait would show as a hang
    with open(repo / "f.txt", "rb") as reader:
        box: dict[str, Any] = {}
        _replace(repo, b"two\n", box)
        assert box["result"] == "written"
        assert reader.read() == b"one\n"
    assert (repo / "f.txt").read_bytes() == b"two\n"


def test_a_snapshot_never_takes_a_file_emptied_by_a_writer_still_writing(make_repo) -> None:
    """A writer that truncated a file and has not written it yet (descheduled on a loaded
    machine, however long) leaves it empty: a snapshot must not report it emptied."""
    from hunkwise.shared.hunks import snapshot

    repo = make_repo({"gen.txt": "old content\n"})
    holder = _writer(repo / "gen.txt", "truncate")
    try:
        assert (repo / "gen.txt").read_bytes() == b""
        with pytest.raises(StateRefused) as e:
            snapshot.take(repo)
        assert "tree changing, retry" in e.value.message
        _let_write(holder)
        snap = snapshot.take(repo)
        assert g.file_at(repo, snap.tree, "gen.txt") == b"new content\n"
    finally:
        holder.kill()
        holder.wait()
        g.close_readers()
