"""Scratch checkouts of one commit, for code that must not run in the shared tree.

Verify, the accept recheck, isolated worker checks and bisect all run here (docs/checkouts.md):
a detached `git worktree` of the commit, with the ignored paths `[checkout] carry` names
copied in from the main tree and those `[checkout] link` names linked, then the project's
setup commands (the caller's `setup`, run by shared/work/checks.py: this layer knows git,
never a user's command).

Two kinds:
- *temporary*: made for one run under `<state>/scratch/`, removed afterwards. Its folder
  names the process that made it, so a run killed with SIGKILL leaves nothing a later run
  trips over: the next run removes the folders of processes that are gone.
- *cached* (`reuse`): one of a few slots under `<state>/checkouts/N/`, each held with an
  flock while in use, reset to the next commit (`checkout -f`, then `clean -ffd`, which keeps
  ignored files: the setup's outputs). The slot remembers the key of its setup (the setup
  commands, the carried and linked paths, the blobs of the input files); setup runs again
  only when the key changes, after `clean -ffdx`. The key is written once setup succeeded
  and removed before the slot is touched, so an interrupted reset or setup is redone.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hunkwise.shared import git
from hunkwise.shared.errors import CoordError, GitError, UsageError

MAX_SLOTS = 4
# Internal moves of a scratch worktree's own HEAD: the shared repo's reference-transaction
# guard (coord install-hooks) lets the coordinator's marked calls through.
_ENV = {"HUNKWISE_COORDINATOR": "1"}


class CheckoutError(CoordError):
    """A scratch checkout could not be made (disk full, a path the file system cannot
    hold, a broken repository): reported in one line, never a traceback."""

    exit_code = 2


@dataclass
class Recipe:
    """How to prepare a checkout: what to bring from the main tree, and how to set it up."""

    carry: Sequence[str] = ()
    link: Sequence[str] = ()
    setup: Callable[[Path], None] | None = None
    # The key of the setup's inputs; None: a temporary checkout, made and removed.
    key: str | None = None
    # Called with a temporary checkout's folder before it is made (a journal names it).
    made: Callable[[Path], None] | None = None
    reused: list[bool] = field(default_factory=list)


def setup_key(repo: Path, commit: str, *, setup: Sequence[str], carry: Sequence[str],
              link: Sequence[str], inputs: Sequence[str]) -> str:
    """The key of a cached checkout: the setup commands, the carried and linked paths, and
    the blob ids of the tracked files matching `inputs` at `commit` (a pattern without a
    slash matches a file name at any depth, one with a slash the path from the root)."""
    raw = git.run(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    found = []
    for rec in raw.split(b"\0"):
        if not rec:
            continue
        meta, _, name = rec.partition(b"\t")
        path = os.fsdecode(name)
        base = path.rsplit("/", 1)[-1]
        if any(fnmatch.fnmatchcase(path if "/" in p else base, p.strip("/")) for p in inputs):
            found.append((path, meta.decode().split(" ")[2]))
    doc = {"setup": list(setup), "carry": list(carry), "link": list(link), "inputs": sorted(found)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@contextlib.contextmanager
def scratch(repo: Path, commit: str, root: Path, recipe: Recipe) -> Iterator[Path]:
    """A checkout of `commit`, prepared by `recipe`, under the state folder `root`."""
    _check_carry(repo, commit, recipe)
    sweep(repo, root)
    if recipe.key is not None:
        slot = _take_slot(root)
        if slot is not None:
            lock_fd, where = slot
            try:
                yield _reset_slot(repo, commit, where, recipe)
            finally:
                os.close(lock_fd)
            return
    with _temporary(repo, commit, root, recipe) as where:
        yield where


# ---- temporary checkouts ----------------------------------------------------------------------

def _owner_alive(folder: Path) -> bool:
    try:
        pid = int((folder / "owner").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(repo: Path, root: Path) -> list[str]:
    """Remove the temporary checkouts whose process is gone; the folders removed."""
    scratch_dir = root / "scratch"
    gone: list[str] = []
    try:
        folders = list(scratch_dir.iterdir())
    except OSError:
        return gone
    for folder in folders:
        if folder.is_dir() and (folder / "owner").exists() and not _owner_alive(folder):
            drop(repo, folder)
            gone.append(str(folder))
    return gone


def drop(repo: Path, folder: Path) -> None:
    """Remove a temporary checkout (its worktree registration too)."""
    git.run_rc(repo, "worktree", "remove", "--force", str(folder / "tree"))
    shutil.rmtree(folder, ignore_errors=True)
    git.run_rc(repo, "worktree", "prune")


@contextlib.contextmanager
def _temporary(repo: Path, commit: str, root: Path, recipe: Recipe) -> Iterator[Path]:
    scratch_dir = root / "scratch"
    try:
        scratch_dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="checkout-", dir=scratch_dir))
        (folder / "owner").write_text(f"{os.getpid()}\n")
    except OSError as e:
        raise CheckoutError(f"cannot make a scratch checkout in {scratch_dir}: "
                            f"{e.strerror or e}") from None
    try:
        if recipe.made is not None:
            recipe.made(folder)
        where = folder / "tree"
        _add_worktree(repo, commit, where)
        _bring(repo, where, recipe)
        if recipe.setup is not None:
            recipe.setup(where)
        recipe.reused.append(False)
        yield where
    finally:
        drop(repo, folder)


def _add_worktree(repo: Path, commit: str, where: Path) -> None:
    try:
        git.run(repo, "worktree", "add", "--detach", "--force", "-q", str(where), commit, env=_ENV)
    except GitError as e:
        raise CheckoutError(f"cannot make a scratch checkout of {commit[:12]}: "
                            f"{_last_line(e.stderr)}") from None
    _check_complete(where)


def _last_line(stderr: bytes) -> str:
    lines = [ln for ln in stderr.decode("utf-8", "replace").strip().split("\n") if ln.strip()]
    return lines[-1].removeprefix("error: ").removeprefix("fatal: ") if lines else "(no output)"


def _check_complete(where: Path) -> None:
    """`git worktree add` and `checkout` report a file they could not write (a name too
    long for the file system, a disk that filled up) and may still exit 0: the checkout
    must hold every tracked file, or the checks would run on a partial tree."""
    rc, out = git.run_rc(where, "ls-files", "-z", "--deleted")
    if rc != 0:
        raise CheckoutError(f"cannot read the scratch checkout at {where}")
    missing = [os.fsdecode(p) for p in out.split(b"\0") if p]
    if missing:
        raise CheckoutError(f"the scratch checkout cannot hold {len(missing)} tracked path(s) "
                            f"(the file system refused them): {missing[0]}")


# ---- cached checkouts -------------------------------------------------------------------------

def _take_slot(root: Path) -> tuple[int, Path] | None:
    """A free cached slot, held by an flock (a dead holder frees it); None when all are busy."""
    base = root / "checkouts"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CheckoutError(f"cannot make {base}: {e.strerror or e}") from None
    for n in range(MAX_SLOTS):
        fd = os.open(base / f"{n}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                continue
            raise
        return fd, base / str(n)
    return None


def _read_ready(slot: Path) -> tuple[str | None, list[str]]:
    """The slot's setup key and the untracked (not ignored) paths its setup made."""
    try:
        doc = json.loads((slot / "ready").read_text())
        return str(doc["key"]), [str(p) for p in doc.get("made", [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, []


def _untracked(where: Path) -> list[str]:
    out = git.run(where, "ls-files", "-z", "-o", "--exclude-standard", "--directory")
    return [os.fsdecode(p).rstrip("/") for p in out.split(b"\0") if p]


def _reset_slot(repo: Path, commit: str, slot: Path, recipe: Recipe) -> Path:
    where = slot / "tree"
    old_key, made = _read_ready(slot)
    with contextlib.suppress(FileNotFoundError):
        (slot / "ready").unlink()  # from here until setup succeeded the slot is not ready
    keep = [a for p in (*recipe.carry, *recipe.link) for a in ("-e", f"/{p}")]
    if _is_worktree(where) and git.run_rc(where, "checkout", "-f", "-q", "--detach", commit,
                                          env=_ENV)[0] == 0:
        _check_complete(where)
        same = old_key == recipe.key
        # Same setup: keep the ignored files and what the setup made (its outputs); another:
        # back to a fresh tree.
        keep += [a for p in made for a in ("-e", f"/{p}")] if same else []
        git.run(where, "clean", "-ffdq" if same else "-ffdxq", *keep)
    else:
        same = False
        shutil.rmtree(slot, ignore_errors=True)
        git.run_rc(repo, "worktree", "prune")
        try:
            slot.mkdir(parents=True)
        except OSError as e:
            raise CheckoutError(f"cannot make {slot}: {e.strerror or e}") from None
        _add_worktree(repo, commit, where)
    _bring(repo, where, recipe)
    if not same and recipe.setup is not None:
        recipe.setup(where)
        made = [p for p in _untracked(where) if p not in (*recipe.carry, *recipe.link)]
    elif not same:
        made = []
    tmp = slot / "ready.tmp"
    tmp.write_text(json.dumps({"key": recipe.key, "commit": commit, "made": made[:10000]}))
    os.replace(tmp, slot / "ready")
    recipe.reused.append(same)
    return where


def _is_worktree(where: Path) -> bool:
    dotgit = where / ".git"
    try:
        text = dotgit.read_text()
    except OSError:
        return False
    gitdir = Path(text.removeprefix("gitdir:").strip())
    return gitdir.is_dir()


# ---- carried and linked paths -----------------------------------------------------------------

def _check_carry(repo: Path, commit: str, recipe: Recipe) -> None:
    both = set(recipe.carry) & set(recipe.link)
    if both:
        raise UsageError(f"[checkout] {sorted(both)[0]!r} is both carried and linked; name it once")
    paths = [*recipe.carry, *recipe.link]
    for p in paths:
        if not os.path.lexists(repo / p):
            what = "carry" if p in recipe.carry else "link"
            raise UsageError(f"[checkout] {what}: {p} does not exist in the main tree "
                             f"({repo / p}); nothing ran")
        real = os.path.realpath(repo / p)
        if os.path.commonpath([real, os.path.realpath(repo)]) != os.path.realpath(repo):
            raise UsageError(f"[checkout] {p} leads outside the repository ({real})")
    if paths:
        tracked = git.run(repo, "ls-tree", "-z", "--name-only", "--full-tree", commit, "--",
                          *paths, env={"GIT_LITERAL_PATHSPECS": "1"})
        names = [os.fsdecode(n) for n in tracked.split(b"\0") if n]
        if names:
            raise UsageError(f"[checkout] {names[0]} is tracked at {commit[:12]}: only ignored "
                             "paths are carried or linked (the checkout has the committed ones)")


def _bring(repo: Path, where: Path, recipe: Recipe) -> None:
    try:
        for p in recipe.carry:
            _sync(repo / p, where / p)
        for p in recipe.link:
            dst = where / p
            target = str(repo / p)
            if dst.is_symlink() and os.readlink(dst) == target:
                continue
            _remove(dst)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, dst)
    except OSError as e:
        raise CheckoutError(f"cannot bring {e.filename or '?'} into the scratch checkout: "
                            f"{e.strerror or e}") from None


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _sync(src: Path, dst: Path) -> None:
    """Make `dst` a copy of `src`, copying only files whose size or mtime differ (a
    reused checkout keeps the copy of the last run) and removing what `src` lacks."""
    st = os.lstat(src)
    if not stat.S_ISDIR(st.st_mode):
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        _copy_file(src, dst, st)
        return
    if dst.is_symlink() or (dst.exists() and not dst.is_dir()):
        dst.unlink()
    dst.mkdir(parents=True, exist_ok=True)
    with os.scandir(src) as entries:
        names = {e.name for e in entries}
    for name in names:
        _sync(src / name, dst / name)
    for extra in set(os.listdir(dst)) - names:
        _remove(dst / extra)


def _copy_file(src: Path, dst: Path, st: os.stat_result) -> None:
    try:
        have = os.lstat(dst)
    except FileNotFoundError:
        have = None
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(src)
        if have is not None and stat.S_ISLNK(have.st_mode) and os.readlink(dst) == target:
            return
        if have is not None:
            _remove(dst)
        os.symlink(target, dst)
        return
    if (have is not None and stat.S_ISREG(have.st_mode) and have.st_size == st.st_size
            and have.st_mtime_ns == st.st_mtime_ns):
        return
    if have is not None:
        _remove(dst)
    _clone_or_copy(src, dst)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    os.chmod(dst, stat.S_IMODE(st.st_mode))


_FICLONE = 0x40049409  # linux/fs.h: share the blocks (btrfs, XFS); else a plain copy


def _clone_or_copy(src: Path, dst: Path) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
            return
        except OSError:
            pass
        shutil.copyfileobj(fin, fout, 1 << 20)
