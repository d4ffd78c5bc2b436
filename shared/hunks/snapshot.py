"""Snapshots of the working tree: the whole tree (tracked and untracked, not ignored) as a
tree object, read until two reads agree, through a throwaway copy of the index."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from hunkwise.shared import git
from hunkwise.shared.git import Sha
from hunkwise.shared.hunks.diff import REGULAR_MODES, FileChange, parse_raw, raw_and_patch, raw_diff


@dataclass(frozen=True)
class Snapshot:
    tree: Sha
    head: Sha | None
    head_tree: Sha


SNAPSHOT_TRIES = 5
SETTLE_S = 0.005  # how long a changed file's stat data must hold for a second read


def take(repo: Path, *, patch: bool = False,
         steady: Callable[[str], bool] | None = None,
         only: Sequence[str] | None = None) -> Snapshot:
    """Write the whole working tree (tracked and untracked, not ignored) as a tree object.

    Works through a scratch index of its own, so clean filters apply, stat data speeds up
    unchanged files, and the real index is never touched. Reads the tree until two reads
    agree: a file rewritten while git reads it gives a torn (empty, half-written) blob or
    a git error, and neither may become a report.

    The scratch index is kept between commands (`_kept_index`): its stat data is that of
    the last snapshot, so `add -A` hashes only what changed since, and writes nothing when
    nothing did; it is made afresh from the real index whenever that one or HEAD changed.

    With `patch`, the diff that checks the re-read also reads the -U0 patch of HEAD ->
    snapshot (for `diff.diff_trees`, which the caller is about to ask for): one git process.

    With `steady`, when no read of the whole tree settles, one in which the paths `steady`
    accepts read the same twice is taken: a file no task may commit (a log a check or a
    server keeps writing) cannot keep every snapshot from settling. Every read is still
    tried whole first, so a file caught once mid-write is read again.

    With `only` (paths: files or folders), a snapshot of those paths alone: what they hold
    in the work tree, and HEAD's content everywhere else. `add -A` then looks at those paths
    only (at 100,000 files a quarter of the cost); used where one task's work is recorded
    (shared/work/recovery.py, `record_now`). Where git cannot take them (a folder holding no
    file, a path beyond a symbolic link), the whole tree is read.
    """
    gd = git.git_dir(repo)
    head, htree = git.head_and_tree(repo)
    with _kept_index(repo, gd, htree) as (env, verified):
        tree = None
        if only is not None:
            from hunkwise.shared.errors import GitError

            try:
                tree = _settled_tree(repo, env, htree, patch, None, None, list(only))
            except GitError:
                tree = None  # git refused a path: the whole tree, as always
        if tree is None:
            tree = _settled_tree(repo, env, htree, patch, verified, steady)
    return Snapshot(tree=tree, head=head, head_tree=htree)


def _scoped_tree(repo: Path, env: dict[str, str], base: str, only: list[str]) -> Sha:
    """HEAD's tree (`base`) with the paths `only` as the work tree holds them, through the
    kept index: `add -A` of those paths, then their entries that differ from HEAD. A path
    the work tree does not hold is absent (whatever the kept index still has there)."""
    from hunkwise.shared.git import objects
    from hunkwise.shared.hunks.diff import parse_raw

    there = [p for p in only if os.path.lexists(os.path.join(repo, p))]
    entries: dict[str, tuple[str, str] | None] = {p: None for p in only if p not in there}
    if there:
        spec = [f":(literal){p}" for p in there]
        git.run(repo, "add", "-A", "--", *spec, env=env)
        raw = git.run(repo, "diff-index", "--cached", "-z", "--raw", "--no-renames",
                      "--full-index", base, "--", *spec, env=env)
        for c in parse_raw(raw):
            entries[c.path] = None if c.status == "D" else (c.new_mode, c.new_oid)
    if not entries:
        return Sha(base)
    return objects.build_tree(repo, base, entries)


# In the git dir of this worktree (each has its own index): the kept scratch index, kept
# apart from the throwaway `hunkwise-idx-*` folders a snapshot makes when it is taken.
KEPT = "hunkwise/snapshot"


def _filters(repo: Path, gd: Path) -> str:
    """Where the repository's own clean filters and attributes are set: changed, the kept
    index's stat data no longer says what `add -A` would hash, and it is copied afresh.

    A file git finds stat-clean is not read again, so a filter set after the last snapshot
    would never apply to a file the kept index has seen (a fresh copy of the real index
    reads it, being dirty there)."""
    common = git.common_dir(repo)
    places = [common / "config", common / "info" / "attributes"]
    if gd != common:
        places.append(gd / "config.worktree")
    return ",".join(git.stat_identity(p) for p in places)


@contextlib.contextmanager
def _kept_index(repo: Path, gd: Path, htree: str) -> Iterator[tuple[dict[str, str], list[str] | None]]:
    """The scratch index to snapshot through, and (for the kept one) a one-item list holding
    the last tree a snapshot through it read and checked, which the caller updates.

    The kept index is this process's while it holds `lock` (flock, released by the kernel
    if the process dies); a command that finds it taken, or a platform without flock, works
    through a throwaway copy instead, as every snapshot did before.
    """
    home = gd / KEPT
    release = None
    try:
        home.mkdir(parents=True, exist_ok=True)
        release = _try_lock(home / "lock")
    except OSError:
        pass
    if release is None:
        with tempfile.TemporaryDirectory(prefix="hunkwise-idx-", dir=gd) as tmp:
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            _fresh_copy(repo, gd, env, htree)
            yield env, None
        return
    try:
        idx, stamp = home / "index", home / "stamp"
        env = {"GIT_INDEX_FILE": str(idx)}
        source = f"{git.stat_identity(gd / 'index')} {htree} {_filters(repo, gd)}"
        try:
            kept, last = stamp.read_text().split("\n")[:2]
        except (OSError, ValueError):
            kept, last = "", ""
        if kept != source or not idx.exists():
            _fresh_copy(repo, gd, env, htree)
            last = ""
        verified = [last]
        yield env, verified
        stamp.write_text(f"{source}\n{verified[0]}\n")
    finally:
        release()


def _fresh_copy(repo: Path, gd: Path, env: dict[str, str], htree: str) -> None:
    """The scratch index made from the real one (or from HEAD when there is none)."""
    real = gd / "index"
    if real.exists():
        # copy2 keeps the mtime: git decides which entries are "racily clean" by comparing
        # them with the index file's own mtime, so a fresher copy would hide edits.
        shutil.copy2(real, env["GIT_INDEX_FILE"])
        # A copy may hold staged or unmerged entries; `add -A` replaces every tracked
        # entry with what the work tree holds, which is what a snapshot means.
        _clear_index_flags(repo, env)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(env["GIT_INDEX_FILE"])
        git.run(repo, "read-tree", htree, env=env)


def _try_lock(path: Path) -> Callable[[], None] | None:
    """flock `path` without waiting; how to release it, or None (held, or no flock here)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: every snapshot through a copy
        return None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return lambda: os.close(fd)


def _settled_tree(repo: Path, env: dict[str, str], base: str, patch: bool,
                  verified: list[str] | None = None,
                  steady: Callable[[str], bool] | None = None,
                  only: list[str] | None = None) -> Sha:
    """`add -A` + `write-tree`, read again until the two reads agree. `verified` (the
    kept index's last confirmed tree) is updated only by a read confirmed whole, never by
    the `steady` fallback.

    The second read covers what differs from HEAD (a torn read shows up there: an empty or
    half-written file differs from its committed bytes): each such file is hashed again
    between two `lstat`s that must match, and must give the blob the tree holds. A file
    rewritten in between, even with the same bytes, changes its stat data, so two reads that
    both caught it empty do not pass for agreement. Unchanged files cost nothing more.
    """
    import time

    from hunkwise.shared.errors import GitError, StateRefused

    errors: list[GitError] = []
    settled: Sha | None = None
    for attempt in range(SNAPSHOT_TRIES):
        if attempt:
            time.sleep(0.01 * 3 ** min(attempt - 1, 3))  # let a writer caught mid-write finish
        try:
            if only is not None:
                tree = _scoped_tree(repo, env, base, only)
            else:
                git.run(repo, "add", "-A", "--", ".", env=env)
                tree = Sha(git.run(repo, "write-tree", env=env).decode().strip())
        except GitError as e:
            if only is not None and e.returncode == 128 and (
                    b"did not match" in e.stderr or b"beyond a symbolic link" in e.stderr
                    or b"outside repository" in e.stderr):
                raise  # not a race: git will not take these paths
            # A file truncated or replaced while git reads it: SIGBUS on the mapping (which
            # leaves the copy's lock behind), a short read, a vanished file. Read again
            # rather than show git's message.
            errors.append(e)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(env["GIT_INDEX_FILE"] + ".lock")
            continue
        if tree == base:
            return tree
        if verified is not None and tree == verified[0]:
            # A tree this index gave and the re-read confirmed before holds no torn read (a
            # torn file gives other bytes, so another tree). The patch the caller is about
            # to ask for is read as the re-read would have read it: one process.
            if patch:
                raw_and_patch(repo, base, tree)
            return tree
        if _reread_agrees(repo, base, tree, patch):
            if verified is not None:
                verified[0] = tree  # confirmed whole: the next read that gives it is too
            return tree
        if steady is not None and _reread_agrees(repo, base, tree, patch, steady):
            settled = tree  # only files no task may commit disagree: kept as a last resort
    if settled is not None:
        # Every read disagreed, but only on files under no grant (a log that a check or a
        # server keeps writing): waiting would never end, and nothing of a task is torn.
        return settled
    if len(errors) == SNAPSHOT_TRIES and errors[0].returncode > 0 and \
            len({(e.returncode, e.stderr) for e in errors}) == 1:
        raise errors[-1]  # the same failure every time: a real problem, not a race
    raise StateRefused(f"tree changing, retry: files changed during each of {SNAPSHOT_TRIES} "
                       "reads of the working tree, so no consistent snapshot could be taken")


def _stat_key(path: str) -> tuple[int, ...] | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _reread_agrees(repo: Path, base: str, tree: str, patch: bool = False,
                   steady: Callable[[str], bool] | None = None) -> bool:
    """Do the paths that differ between `base` and `tree` (those `steady` accepts) still
    hold what `tree` says, read again while their stat data stays the same?"""
    import time

    changes = parse_raw((raw_and_patch if patch else raw_diff)(repo, base, tree))
    if steady is not None:
        changes = [c for c in changes if steady(c.path)]
    full = {c.path: os.path.join(repo, c.path) for c in changes}
    fmt = git.object_format(repo)
    since = time.monotonic()
    before = {p: _stat_key(f) for p, f in full.items()}
    hashed: list[FileChange] = []
    for c in changes:
        st = before[c.path]
        if c.status == "D":
            if st is not None and not stat.S_ISDIR(st[1]):
                return False  # back again: the deletion was read mid-replacement
        elif c.new_mode in REGULAR_MODES:
            if st is None or not stat.S_ISREG(st[1]):
                return False
            found = _blob_id(full[c.path], fmt)
            if found is None:
                return False  # changed or gone while being read
            if found == c.new_oid:
                continue  # the file holds exactly the blob's bytes
            # Filters (eol conversion, a clean filter) make the blob differ from the bytes
            # on disk: git hashes such a file as `add` did.
            if "\n" in c.path or c.path.startswith('"'):
                continue  # not expressible to --stdin-paths; the stat check still holds
            hashed.append(c)
        elif c.new_mode == "120000":
            target = os.fsencode(os.readlink(full[c.path])) if st is not None else None
            if target is None or hashlib.new(fmt, b"blob %d\0" % len(target) + target
                                             ).hexdigest() != c.new_oid:
                return False
    if hashed:
        rc, out = git.run_rc(repo, "hash-object", "--stdin-paths",
                             input=b"".join(os.fsencode(c.path) + b"\n" for c in hashed))
        if rc != 0 or out.decode().split() != [c.new_oid for c in hashed]:
            return False
    # A writer between truncating a file and writing it leaves it empty for a while: the
    # stat data must hold for longer than such a gap, not just for one quick hash; and an
    # empty file that some process holds open for writing is such a gap however long it
    # lasts (a writer descheduled on a loaded machine), where the kernel can tell.
    time.sleep(max(0.0, SETTLE_S - (time.monotonic() - since)))
    if not all(_stat_key(f) == before[p] for p, f in full.items()):
        return False
    empty = [f for p, f in full.items()
             if (k := before[p]) is not None and k[2] == 0 and stat.S_ISREG(k[1])]
    if empty:
        from hunkwise.shared.git.worktree import held_for_writing

        return not any(held_for_writing(Path(f)) for f in empty)
    return True


def _blob_id(path: str, fmt: str) -> str | None:
    """The object id of the file's bytes as a blob, unfiltered (None when it cannot be read
    whole: gone, replaced by a symlink, or its size changing under the read)."""
    h = hashlib.new(fmt)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            size = os.fstat(fd).st_size
            h.update(b"blob %d\0" % size)
            seen = 0
            while chunk := f.read(1 << 20):
                seen += len(chunk)
                h.update(chunk)
        except OSError:
            return None
    return h.hexdigest() if seen == size else None


def _clear_index_flags(repo: Path, env: dict[str, str]) -> None:
    """Let `add -A` see assume-unchanged and skip-worktree paths as they are on disk.

    git skips such entries when it compares the index with the work tree, so an edit of
    one would be left out of the snapshot, the report and the commit. Only the throwaway
    copy loses the flags. A skip-worktree path absent from disk is a sparse checkout's,
    not a deletion: it keeps its flag.
    """
    if not _any_flagged(env["GIT_INDEX_FILE"], git.HEX_LENGTHS[git.object_format(repo)] // 2):
        return  # the index file says so itself: no process needed
    out = git.run(repo, "ls-files", "-v", "-z", env=env)
    assumed: list[bytes] = []
    skipped: list[bytes] = []
    for rec in out.split(b"\0"):
        # `ls-files -v`: "S " marks skip-worktree, a lower-case tag assume-unchanged.
        if len(rec) < 3 or rec[:1] == b"H":
            continue
        tag, path = rec[:1], rec[2:]
        if tag.islower():
            assumed.append(path)
        if tag in (b"S", b"s"):
            if os.path.lexists(os.path.join(repo, os.fsdecode(path))):
                skipped.append(path)
    for flag, paths in (("--no-assume-unchanged", assumed), ("--no-skip-worktree", skipped)):
        if paths:
            git.run(repo, "update-index", flag, "-z", "--stdin", env=env,
                    input=b"".join(p + b"\0" for p in paths))


_ASSUME_VALID, _EXTENDED, _SKIP_WORKTREE = 0x8000, 0x4000, 0x4000


def _any_flagged(index: str, oid_size: int) -> bool:
    """Does any entry of this index file carry the assume-unchanged or skip-worktree flag?
    Read from the file itself (git's index format, versions 2 to 4); True whenever the
    file holds anything this reading is not sure of (another version, a split or sparse
    index, a malformed entry), so that git is asked."""
    import struct

    try:
        with open(index, "rb") as f:
            data = f.read()
    except OSError:
        return True
    if len(data) < 12 + oid_size or data[:4] != b"DIRC":
        return True
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        return True
    at, end = 12, len(data) - oid_size
    flags_at = 40 + oid_size  # ctime, mtime, dev, ino, mode, uid, gid, size; the object id
    for _ in range(count):
        if at + flags_at + 2 > end:
            return True
        (flags,) = struct.unpack_from(">H", data, at + flags_at)
        name = at + flags_at + 2
        if flags & _ASSUME_VALID:
            return True
        if flags & _EXTENDED:
            if version == 2 or name + 2 > end:
                return True
            (extended,) = struct.unpack_from(">H", data, name)
            if extended & _SKIP_WORKTREE:
                return True
            name += 2
        if version == 4:
            while data[name] & 0x80:  # the varint of how much of the last name to drop
                name += 1
                if name >= end:
                    return True
            nul = data.find(b"\0", name + 1)
            if nul < 0 or nul >= end:
                return True
            at = nul + 1
        else:
            length = flags & 0xFFF
            if length == 0xFFF:
                length = data.find(b"\0", name) - name
                if length < 0:
                    return True
            # The entry is padded with 1 to 8 NULs to a multiple of 8 bytes.
            at += (name - at + length + 8) & ~7
    # Extensions: a split index keeps its entries elsewhere, a sparse one holds directories.
    while at + 8 <= end:
        sig = data[at:at + 4]
        if sig in (b"link", b"sdir"):
            return True
        (size,) = struct.unpack_from(">I", data, at + 4)
        at += 8 + size
    return at != end
