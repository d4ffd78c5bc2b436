"""Writing chosen entries back into the shared working tree: compare-and-swap per file.

Workers edit the tree while the coordinator restores, discards or reverts, so every write
replaces a file only if it still holds what was read: check, write a temp file beside it,
check again, rename over it, and check that nobody wrote into the old file in between
(a hard link keeps it at hand to put back). A process that opened the old file for
writing before the rename still writes into it: the replaced file is kept until no process
holds it open for writing (asked of the kernel with a read lease, which it refuses while
anyone does), then checked once more; one still held after LATE_WAIT_S counts as changed.
When any file moved, nothing is left written and the command is refused with "changed
while this ran, retry" (exit 3). Contents go through git's smudge filters
(`cat-file --filters`), as a checkout would write them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused

Key = tuple[int, int, int, int] | None  # (inode, mode, size, mtime_ns); None: absent


def _key(full: Path) -> Key:
    try:
        st = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns


def _hash_one(repo: Path, path: str, write: bool) -> str | None:
    full = repo / path
    if full.is_symlink():
        data = os.fsencode(os.readlink(full))
        return git.run(repo, "hash-object", *(["-w"] if write else []), "--stdin",
                       input=data).decode().strip()
    if not full.is_file():
        return None
    # --path applies the path's clean filters to bytes read here: a path holding a
    # newline cannot be given to --stdin-paths.
    return git.run(repo, "hash-object", *(["-w"] if write else []), "--stdin",
                   "--path", path, input=full.read_bytes()).decode().strip()


def current_oids(repo: Path, paths: list[str], write: bool = False) -> dict[str, str | None]:
    """What each path of the working tree hashes to (clean filters applied).

    `write` also stores the blobs, for callers that read them back.
    """
    result: dict[str, str | None] = {}
    batch = []
    for p in paths:
        full = repo / p
        if "\n" in p or full.is_symlink() or not full.is_file():
            result[p] = _hash_one(repo, p, write)
        else:
            batch.append(p)
    if batch:
        out = git.run(repo, "hash-object", *(["-w"] if write else []), "--stdin-paths",
                      input=b"".join(os.fsencode(p) + b"\n" for p in batch))
        result.update(zip(batch, out.decode().split(), strict=True))
    return result


def _changed(path: str) -> StateRefused:
    return StateRefused(f"{path} changed while this ran; nothing was written, retry")


def read_keys(repo: Path, expect: Mapping[str, str | None]) -> dict[str, Key]:
    """Check that each path holds `expect` (oid, None: absent) and return its stat key.

    The key is taken before and after hashing and must not move: it then stands for the
    content that was hashed, and later checks are a cheap `lstat`.
    """
    paths = list(expect)
    before = {p: _key(repo / p) for p in paths}
    now = current_oids(repo, paths)
    after = {p: _key(repo / p) for p in paths}
    for p in paths:
        if before[p] != after[p] or now.get(p) != expect[p]:
            raise _changed(p)
    return after


def _contents(repo: Path, entries: Mapping[str, tuple[str, str]]) -> dict[str, bytes]:
    """What a checkout writes for each entry: smudged file bytes, or a symlink's target."""
    links = [oid for mode, oid in entries.values() if mode == "120000"]
    raw = git.cat_blobs(repo, links) if links else {}
    out: dict[str, bytes] = {}
    for path, (mode, oid) in entries.items():
        if mode == "120000":
            out[path] = raw[oid]
        elif mode in ("100644", "100755"):
            out[path] = git.run(repo, "cat-file", "--filters", f"--path={path}", oid)
        else:
            raise StateRefused(f"{path}: cannot write an entry of mode {mode} into the tree")
    return out


def _lines(data: bytes) -> list[bytes]:
    """Lines with their endings, split on `\n` as git does."""
    out = data.split(b"\n")
    tail = out.pop()
    return [x + b"\n" for x in out] + ([tail] if tail else [])


def _same_line(raw: bytes, clean: bytes) -> bool:
    """Is `raw` what `clean` is in the working tree, up to its line ending (CRLF for LF)?"""
    return raw == clean or (clean.endswith(b"\n") and raw == clean[:-1] + b"\r\n")


def _keep_unchanged_lines(repo: Path, path: str, was: str, oid: str, smudged: bytes) -> bytes:
    """The bytes to write for `path` (now holding blob `was` through the clean filters,
    to hold blob `oid`): the lines the change leaves alone keep the bytes they have on disk;
    only the changed lines take what a checkout writes (`smudged`).

    A checkout's eol conversion (core.autocrlf, `eol` attributes) applies to the whole
    file: writing it whole would turn another task's LF line into CRLF. Where the file on
    disk and its clean form do not correspond line for line (another filter), the whole
    checkout form is written, as before.
    """
    blobs = git.cat_blobs(repo, [was, oid])
    cur_clean, new_clean = blobs[was], blobs[oid]
    try:
        cur_raw = (repo / path).read_bytes()
    except OSError:
        return smudged
    if cur_raw == cur_clean and smudged == new_clean:
        return smudged  # no filter at work: nothing to keep
    cr, cc = _lines(cur_raw), _lines(cur_clean)
    ns, nc = _lines(smudged), _lines(new_clean)
    if len(cr) != len(cc) or len(ns) != len(nc) or not all(map(_same_line, cr, cc)) \
            or not all(map(_same_line, ns, nc)):
        return smudged
    spans = _hunk_spans(repo, was, oid)
    if not spans and cur_clean != new_clean:
        return smudged  # (no line-wise diff to follow: the whole checkout form)
    out: list[bytes] = []
    at = 0  # lines of the old file copied or skipped so far
    for old_start, old_len, new_start, new_len in spans:
        keep_to = old_start if old_len == 0 else old_start - 1
        out += cr[at:keep_to]
        first_new = new_start if new_len == 0 else new_start - 1
        out += ns[first_new:first_new + new_len]
        at = keep_to + old_len
    out += cr[at:]
    return b"".join(out)


def _hunk_spans(repo: Path, old: str, new: str) -> list[tuple[int, int, int, int]]:
    """(old start, old count, new start, new count) of each hunk between two blobs."""
    import re

    # --text: a file git takes for binary (a NUL byte) still gets its hunks.
    out = git.run(repo, "diff", "-U0", "--text", *git.DIFF_PINS, old, new, ok_codes=(0, 1))
    spans = []
    for m in re.finditer(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", out, re.M):
        spans.append((int(m[1]), int(m[2] if m[2] is not None else 1),
                      int(m[3]), int(m[4] if m[4] is not None else 1)))
    return spans


@dataclass
class _Done:
    path: str
    full: Path
    bak: Path | None  # the file it replaced, kept by a hard link until the end
    key: Key  # what it holds now: ours


SETTLE_S = 0.01  # where the kernel cannot say who holds a file open: wait this long
LATE_WAIT_S = 2.0  # longest wait for a writer of a replaced file to close it


def held_for_writing(path: Path) -> bool | None:
    """Does some process hold this file open for writing? None where the kernel cannot
    tell us (no leases: not Linux, a file system without them, a file not ours).

    A read lease is granted only while no one has the file open for writing; taken and
    given back at once, it answers the question without blocking anyone (readers, such
    as `tail -f`, do not count: they cannot write into it)."""
    import fcntl

    setlease = getattr(fcntl, "F_SETLEASE", None)
    if setlease is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        fcntl.fcntl(fd, setlease, fcntl.F_RDLCK)
    except OSError as e:
        return True if e.errno == errno.EAGAIN else None
    else:
        fcntl.fcntl(fd, setlease, fcntl.F_UNLCK)
        return False
    finally:
        os.close(fd)


def _wait_for_writers(baks: list[Path]) -> bool:
    """Wait until no process holds any of these replaced files open for writing; False
    if one still does after LATE_WAIT_S (its next write would be lost: count it as
    changed)."""
    deadline = time.monotonic() + LATE_WAIT_S
    unknown = False
    for bak in baks:
        while True:
            held = held_for_writing(bak)
            if held is None:
                unknown = True
                break
            if not held:
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
    if unknown:
        time.sleep(SETTLE_S)
    return True


def write_entries(repo: Path, entries: Mapping[str, tuple[str, str] | None],
                  expect: Mapping[str, str | None] | None = None) -> None:
    """Set each path of the working tree to a blob (mode, oid), or remove it (None).

    `expect` gives what each path held when the caller read it (oid through clean filters,
    None for absent); a path it leaves out is read now. Touches nothing else; writes all
    of it or nothing.
    """
    want = dict(expect or {})
    missing = [p for p in entries if p not in want]
    if missing:
        want.update(current_oids(repo, missing))
    want = {p: want[p] for p in entries}
    keys = read_keys(repo, want)
    for p, k in keys.items():
        if k is not None and (k[1] & 0o170000) == 0o040000:
            raise StateRefused(f"{p} is a directory in the working tree; nothing was written")
    present = {p: e for p, e in entries.items() if e is not None}
    data = _contents(repo, present)
    for path, (mode, oid) in present.items():
        was = want.get(path)
        if mode in ("100644", "100755") and was is not None and keys.get(path) is not None:
            data[path] = _keep_unchanged_lines(repo, path, was, oid, data[path])
    token = os.urandom(6).hex()
    made_dirs: list[Path] = []
    temps: dict[str, Path] = {}
    done: list[_Done] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for path, (mode, _oid) in present.items():
            full = repo / path
            _make_dirs(repo, full.parent, made_dirs)
            tmp = full.parent / f".hunkwise-{token}.{len(temps)}.tmp"
            if mode == "120000":
                os.symlink(os.fsdecode(data[path]), tmp)
            else:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             (0o777 if mode == "100755" else 0o666) & ~umask)
                with os.fdopen(fd, "wb") as f:
                    f.write(data[path])
                    f.flush()
                    os.fsync(f.fileno())
            temps[path] = tmp
        for i, path in enumerate(entries):
            done.append(_swap(repo, path, keys[path], temps.get(path), f"{token}.{i}"))
    except BaseException:
        _roll_back(done)
        for tmp in temps.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        for d in reversed(made_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    # A writer that opened a file before it was replaced writes into the old file (kept
    # as the .bak link) after it: wait until no one holds the old file open for writing,
    # look once more, and put the old file back rather than lose such a write.
    baks = [d_ for d_ in done if d_.bak is not None]
    if baks:
        closed = _wait_for_writers([d_.bak for d_ in baks if d_.bak is not None])
        late = [d_ for d_ in baks
                if not closed or d_.bak is None or _key(d_.bak) != keys[d_.path]]
        if late:
            _roll_back(done)
            raise _changed(late[0].path)
    for d_ in done:
        if d_.bak is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(d_.bak)
        if d_.key is None:
            _prune_empty_dirs(repo, d_.full.parent)


def _swap(repo: Path, path: str, key: Key, tmp: Path | None, token: str) -> _Done:
    """Replace (or remove) one file if it still holds what was read."""
    full = repo / path
    bak = None
    if key is None and tmp is None:
        if _key(full) is not None:
            raise _changed(path)
        return _Done(path, full, None, None)  # to remove, and absent already
    if key is not None:
        bak = full.parent / f".hunkwise-{token}.bak"
        os.link(full, bak, follow_symlinks=False)
        if _key(full) != key:
            os.unlink(bak)
            raise _changed(path)
    elif _key(full) is not None:
        raise _changed(path)
    if tmp is not None:
        if key is None:
            # link() never replaces: a file created since the check makes it fail.
            try:
                os.link(tmp, full, follow_symlinks=False)
            except FileExistsError:
                raise _changed(path) from None
            os.unlink(tmp)
        else:
            os.rename(tmp, full)
        new_key = _key(full)
    else:
        os.unlink(full)
        new_key = None
    done = _Done(path, full, bak, new_key)
    # A write into the old file after the check above landed in the file we just
    # replaced: put it back (and undo the rest) rather than lose that write.
    if bak is not None and _key(bak) != key:
        _roll_back([done])
        raise _changed(path)
    return done


def _roll_back(done: list[_Done]) -> None:
    for d in reversed(done):
        if _key(d.full) != d.key:
            continue  # written again since: leave what is there
        with contextlib.suppress(FileNotFoundError):
            if d.bak is not None:
                os.rename(d.bak, d.full)
            elif d.key is not None:
                os.unlink(d.full)
        d.bak = None


def _make_dirs(repo: Path, d: Path, made: list[Path]) -> None:
    todo = []
    while not d.is_dir():
        if d.exists() or d.is_symlink():
            raise StateRefused(f"{d.relative_to(repo)} is not a directory; nothing was written")
        todo.append(d)
        d = d.parent
    for x in reversed(todo):
        x.mkdir()
        made.append(x)


def _prune_empty_dirs(repo: Path, d: Path) -> None:
    root = repo.resolve()
    while d.resolve() != root:
        try:
            d.rmdir()
        except OSError:
            return
        d = d.parent
