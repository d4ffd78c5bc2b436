"""Deliver, list, read and archive reports, following the Maildir protocol.

A writer creates a uniquely named file in `tmp/`, writes and fsyncs it, then renames it
into `new/`: a reader never sees a partial report, and a writer killed before the rename
leaves only a file in `tmp/` that no reader looks at. Names are never reused, so nothing
is ever overwritten. The coordinator moves what it has read into `cur/`; what it cannot
parse goes to `quarantine/` with a `.reason` file beside it.

File names: `<time_ns>.P<pid>R<random>.<host>,task=<id>,rev=<n>`. The task and revision in
the name are hints for listing without parsing; the report inside is the truth.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from hunkwise.shared.errors import UsageError
from hunkwise.shared.state.context import hostname
from hunkwise.shared.state.models import Report, validate_report
from hunkwise.shared.state.store import fsync_dir, parse_untrusted

MAX_REPORT_BYTES = 16 * 1024 * 1024
_NAME_RE = re.compile(r"^(?P<t>\d{1,20})\.P\d+R[0-9a-f]+\.[A-Za-z0-9_.-]+,task=(?P<task>[A-Za-z0-9_.-]{1,64}),rev=(?P<rev>\d{1,9})$")
STALE_TMP_S = 36 * 3600


@dataclass(frozen=True)
class Entry:
    path: Path
    folder: str  # "new" or "cur"
    time_ns: int
    task_id: str
    revision: int

    @property
    def name(self) -> str:
        return self.path.name


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", hostname())[:64] or "host"


def write_report(inbox: Path, payload: bytes, task_id: str, revision: int) -> Path:
    """Write a report atomically into `new/` and return its final path: staged and
    published at once, for a report no state records on its way (`delivery.deliver` is
    the three steps of a worker's delivery)."""
    return publish(stage(inbox, payload, task_id, revision, lasting=False))


@dataclass(frozen=True)
class Staged:
    """A report written and fsynced in `tmp/`, not yet in `new/`. `fd` holds a lock on the
    file for as long as the process that staged it (or took it over) lives."""

    inbox: Path
    name: str
    fd: int

    @property
    def path(self) -> Path:
        return self.inbox / "tmp" / self.name


# Where flock does not exist, a staged report whose writer stopped this long ago is taken
# over (`adopt`); with flock, the lock tells whether the writer still lives.
WRITER_GONE_S = 600.0


def _lock(fd: int) -> bool | None:
    """Try the file lock of a staged report: True taken, False held by a live process,
    None when this platform has no flock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def stage(inbox: Path, payload: bytes, task_id: str, revision: int, *,
          lasting: bool = True) -> Staged:
    """Write a report into `tmp/` under a new unique name, fsync it, and keep it locked.

    `lasting`: fsync `tmp/` too, so its name survives a crash before `publish` (the state
    may record it in between; `write_report` publishes at once and needs no more)."""
    if len(payload) > MAX_REPORT_BYTES:
        raise UsageError(f"report for {task_id} is {len(payload)} bytes, over the "
                         f"{MAX_REPORT_BYTES} byte limit")
    for sub in ("tmp", "new", "cur", "quarantine"):
        (inbox / sub).mkdir(parents=True, exist_ok=True)
    name = (f"{time.time_ns():020d}.P{os.getpid()}R{os.urandom(6).hex()}.{_host()}"
            f",task={task_id},rev={revision}")
    tmp = inbox / "tmp" / name
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        if _lock(fd) is False:  # a new name: nobody else can hold it
            raise OSError(f"{tmp}: locked by another process")
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        if lasting:
            fsync_dir(inbox / "tmp")
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return Staged(inbox, name, fd)


def publish(staged: Staged) -> Path:
    """Link a staged report into `new/` (a link never overwrites a name, a rename could),
    make the link durable, drop the `tmp/` name and the lock."""
    try:
        final = link(staged)
    except BaseException:
        drop(staged)
        raise
    published(staged)
    return final


def link(staged: Staged) -> Path:
    """Link a staged report into `new/`, nothing more: cheap enough to do under the state
    lock, so the report appears with the state that records it. `published` follows."""
    final = staged.inbox / "new" / staged.name
    os.link(staged.path, final)
    return final


def published(staged: Staged) -> None:
    """After `link`: make the link durable, drop the `tmp/` name and the lock."""
    try:
        fsync_dir(staged.inbox / "new")
    finally:
        drop(staged)


def drop(staged: Staged) -> None:
    """A staged report that will not be delivered: gone from `tmp/`."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staged.path)
    os.close(staged.fd)


def adopt(inbox: Path, name: str) -> Staged | None:
    """Take over a staged report whose writer is gone (its lock is free) and that never
    reached `new/`: the caller publishes it. None when its writer is still at work, or when
    it was published already (a `tmp/` name a killed writer left behind is removed)."""
    tmp = inbox / "tmp" / name
    try:
        # O_NONBLOCK: a FIFO planted under the name must not hang the coordinator.
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        taken = _lock(fd)
        if taken is False or (taken is None
                              and time.time() - os.fstat(fd).st_mtime < WRITER_GONE_S):
            os.close(fd)
            return None
        # In the order reports move (new -> cur -> old, new -> quarantine): one on its way
        # is never missed.
        if any((inbox / folder / name).exists() for folder in ("new", "cur", "old", "quarantine")):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            os.close(fd)
            return None
    except BaseException:
        os.close(fd)
        raise
    return Staged(inbox, name, fd)


def _entry(path: Path, folder: str) -> Entry | None:
    m = _NAME_RE.match(path.name)
    if not m:
        return None
    return Entry(path, folder, int(m["t"]), m["task"], int(m["rev"]))


def entries(inbox: Path, folder: str = "new", task_id: str | None = None
            ) -> tuple[list[Entry], list[Path]]:
    """Entries of one folder, oldest first, and the files whose names are not ours.

    With `task_id`, only that task's reports, found by name: every other name costs one
    substring test, so thousands of read reports of other tasks cost next to nothing."""
    good: list[Entry] = []
    odd: list[Path] = []
    try:
        names = os.listdir(inbox / folder)
    except FileNotFoundError:
        return good, odd
    if task_id is not None:
        tag = f",task={task_id},rev="
        names = [n for n in names if tag in n]
    for n in names:
        if n.startswith("."):
            continue
        p = inbox / folder / n
        e = _entry(p, folder)
        if e is None:
            odd.append(p)
        else:
            good.append(e)
    good.sort(key=lambda e: (e.time_ns, e.name))
    return good, odd


def find_task_reports(inbox: Path, task_id: str) -> list[Entry]:
    """Every stored report of a task (pending and read), oldest revision first; a task
    archived at a thaw has its reports in `old/`, looked at only when the others hold none."""
    for folders in (("new", "cur"), ("old",)):
        found = [e for folder in folders for e in entries(inbox, folder, task_id)[0]
                 if e.task_id == task_id]
        if found:
            found.sort(key=lambda e: (e.revision, e.time_ns))
            return found
    return []


def retire(inbox: Path, task_ids: set[str]) -> int:
    """Move the read reports of these (archived) tasks from `cur/` to `old/`, so the
    reports every command lists are those of the work in flight; how many moved."""
    moved = 0
    (inbox / "old").mkdir(exist_ok=True)
    for e in entries(inbox, "cur")[0]:
        if e.task_id in task_ids:
            with contextlib.suppress(FileNotFoundError):
                os.rename(e.path, inbox / "old" / e.name)
                moved += 1
    if moved:
        fsync_dir(inbox / "old")
        fsync_dir(inbox / "cur")
    return moved


def reports_by_task(inbox: Path) -> dict[str, list[Entry]]:
    """Every stored report (pending and read) by task, oldest revision first; one listing."""
    found: dict[str, list[Entry]] = {}
    for folder in ("new", "cur"):
        es, _ = entries(inbox, folder)
        for e in es:
            found.setdefault(e.task_id, []).append(e)
    for es in found.values():
        es.sort(key=lambda e: (e.revision, e.time_ns))
    return found


def read_report(path: Path) -> Report:
    """Parse a report strictly; raise UsageError with the reason when it is not valid."""
    try:
        # O_NONBLOCK: a FIFO planted in the inbox must not hang the reader; O_NOFOLLOW: a
        # symlink must not make it read files elsewhere.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as e:
        raise UsageError(f"{path.name}: unreadable ({e.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path.name}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_REPORT_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{path.name}: unreadable ({e.strerror})") from None
    finally:
        os.close(fd)
    return parse_untrusted(data, validate_report, path.name, MAX_REPORT_BYTES, "report")


def archive(entry: Entry) -> Path:
    """Move a read report from `new/` into `cur/` (no-op when it is there already)."""
    if entry.folder == "cur":
        return entry.path
    dest = entry.path.parent.parent / "cur" / entry.name
    with contextlib.suppress(FileNotFoundError):
        os.rename(entry.path, dest)
    return dest


def take(entry: Entry) -> Path | None:
    """Move a report from `new/` into `cur/` for the caller alone: of two readers taking
    the same report, one gets its new path, the other None (rename is atomic)."""
    dest = entry.path.parent.parent / "cur" / entry.name
    try:
        os.rename(entry.path, dest)
    except FileNotFoundError:
        return None
    return dest


def quarantine(path: Path, reason: str) -> Path:
    dest_dir = path.parent.parent / "quarantine"
    dest_dir.mkdir(exist_ok=True)
    dest = dest_dir / path.name
    with contextlib.suppress(FileNotFoundError):
        os.rename(path, dest)
        (dest_dir / (path.name + ".reason")).write_text(reason + "\n", encoding="utf-8")
    return dest


def sweep_tmp(inbox: Path, older_than_s: float = STALE_TMP_S) -> int:
    """Remove files a killed writer left in `tmp/` (Maildir: after 36 hours)."""
    removed = 0
    cutoff = time.time() - older_than_s
    with contextlib.suppress(FileNotFoundError):
        for n in os.listdir(inbox / "tmp"):
            p = inbox / "tmp" / n
            with contextlib.suppress(FileNotFoundError):
                if p.stat().st_mtime < cutoff:
                    p.unlink()
                    removed += 1
    return removed
