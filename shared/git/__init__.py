"""The one place that runs git.

Every call goes through `run` with an argument tuple, never a shell string, and a pinned
environment: no prompts, C locale, and no user configuration that changes what diff prints
(external drivers, textconv, colour, prefixes, algorithm). Machine formats only.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, NewType

from hunkwise.shared.errors import GitError, UsageError
from hunkwise.shared.gitspawn import CONFIG_PINS, base_env

Sha = NewType("Sha", str)

EMPTY_TREE = Sha("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
# The empty tree and the null object id of each object format git knows (`extensions.objectFormat`).
EMPTY_TREES = {"sha1": EMPTY_TREE,
               "sha256": Sha("6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321")}
HEX_LENGTHS = {"sha1": 40, "sha256": 64}

# Options that make diff output independent of user and system configuration. Position
# and shape of -U0 hunks depend on the algorithm and the indent heuristic, so both are fixed.
DIFF_PINS: tuple[str, ...] = (
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--no-renames",
    "--diff-algorithm=myers",
    "--no-indent-heuristic",
    "--inter-hunk-context=0",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--no-relative",
    "--full-index",
)


# `diff-tree` reads the whole index (git 2.39) for attribute lookups that the work tree's
# .gitattributes answer first (git reads them before the index's when diffing): at 100,000
# files that is 15-20 ms a call. It is given an index that cannot exist, which git reads as
# empty. (Nothing under /proc/self can be created; where there is no /proc, neither.)
_NEEDS_NO_INDEX = frozenset({"diff-tree"})
ABSENT_INDEX = "/proc/self/hunkwise-no-index"


def _env(args: Sequence[str], env: Mapping[str, str] | None) -> dict[str, str]:
    if args and args[0] in _NEEDS_NO_INDEX and not (env and "GIT_INDEX_FILE" in env):
        return base_env({**(env or {}), "GIT_INDEX_FILE": ABSENT_INDEX})
    return base_env(env)


def run(
    repo: Path | str,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    ok_codes: Sequence[int] = (0,),
) -> bytes:
    """Run `git ARGS` in `repo` and return stdout as bytes; raise GitError on failure."""
    cmd = ("git", *CONFIG_PINS, *args)
    proc = subprocess.run(
        cmd,
        cwd=str(repo),
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        env=_env(args, env),
    )
    if check and proc.returncode not in ok_codes:
        raise GitError(args, proc.returncode, proc.stderr)
    return proc.stdout


def run_rc(repo: Path | str, *args: str, env: Mapping[str, str] | None = None,
           input: bytes | None = None) -> tuple[int, bytes]:
    """Run git and return (exit code, stdout) without raising."""
    cmd = ("git", *CONFIG_PINS, *args)
    proc = subprocess.run(cmd, cwd=str(repo), input=input,
                          stdin=None if input is not None else subprocess.DEVNULL,
                          capture_output=True, env=_env(args, env))
    return proc.returncode, proc.stdout


class _Dirs(NamedTuple):
    top: Path
    common: Path
    git_dir: Path
    object_format: str


_DIRS: dict[str, _Dirs] = {}
# The object format of the repository this process opened last: the default of helpers
# that build git input without a repository at hand (`index_info`).
_LAST_FORMAT = ["sha1"]


def _plain_repo(start: Path) -> _Dirs | None:
    """The repository holding `start` found without a git process, where that is sure to
    find what `git rev-parse` would: a main working tree with a `.git` directory this user
    owns, whose config (no includes) sets no `core.worktree` or `core.bare`. Anything else
    (a linked worktree or submodule's `.git` file, GIT_CEILING_DIRECTORIES, a repository
    another user owns, which git's safe.directory rule judges) is left to git."""
    if any(os.environ.get(k) for k in ("GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
                                       "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")):
        return None  # discovery bounded, or settings given on the command line: git decides
    here = Path(os.path.realpath(start))
    for top in (here, *here.parents):
        dot = top / ".git"
        try:
            st = os.lstat(dot)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or \
                not (dot / "HEAD").is_file() or not (dot / "objects").is_dir() or \
                not (dot / "refs").is_dir() or (dot / "commondir").exists():
            return None
        fmt = _object_format_of(dot / "config")
        return None if fmt is None else _Dirs(top, dot, dot, fmt)
    return None


def _object_format_of(config: Path) -> str | None:
    """`extensions.objectFormat` of a repository's own config (sha1 when unset); None when
    the config may say more than this reads: an include, a work tree set elsewhere, bare,
    or a line shaped otherwise than `[section]` / `key = value`."""
    try:
        text = config.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    fmt, section = "sha1", ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            return None  # a continued value
        if line.startswith("["):
            if not line.endswith("]"):
                return None  # a key on the header's line
            section = line[1:-1].strip().lower()
            if section.startswith("include"):
                return None
            continue
        key, eq, value = line.partition("=")
        key = key.strip().lower()
        value = value.split("#")[0].split(";")[0].strip().strip('"').lower()
        if section == "core" and (key == "worktree" or key == "bare" and
                                  (not eq or value not in ("false", "no", "off", "0"))):
            return None
        if section == "extensions":
            if key != "objectformat":
                return None  # worktreeConfig, refStorage...: git knows what they imply
            fmt = value
    return fmt if fmt in HEX_LENGTHS else None


def _asked(start: Path) -> _Dirs:
    """What `git rev-parse` says of the repository holding `start`."""
    rc, out = run_rc(start, "rev-parse", "--show-toplevel", "--git-common-dir",
                     "--absolute-git-dir", "--show-object-format")
    lines = out.split(b"\n")
    if rc != 0 or len(lines) < 4 or not lines[0]:
        raise UsageError(f"{start}: not inside a git work tree (use --repo PATH)")
    top = Path(os.fsdecode(lines[0]))
    common = Path(os.fsdecode(lines[1]))
    common = common if common.is_absolute() else (start / common).resolve()
    fmt = lines[3].decode().strip()
    if fmt not in HEX_LENGTHS:
        raise UsageError(f"{top}: object format {fmt!r} is not supported (sha1, sha256)")
    return _Dirs(top, common, Path(os.fsdecode(lines[2])), fmt)


def _dirs(start: Path) -> _Dirs:
    """Top level, common dir, git dir and object format, cached per process: found by
    `_plain_repo` where it can, else with one rev-parse."""
    key = str(start)
    if key not in _DIRS:
        _DIRS[key] = _plain_repo(start) or _asked(start)
        _DIRS.setdefault(str(_DIRS[key].top), _DIRS[key])
    _LAST_FORMAT[0] = _DIRS[key].object_format
    return _DIRS[key]


def resolve(repo: Path, name: str) -> Sha:
    """The object id a revision names, through the command's reader; git's own error (from
    `rev-parse`) when it names none."""
    found = read_objects(repo, [name])[0]
    return Sha(found[0]) if found is not None else \
        Sha(run(repo, "rev-parse", name).decode().strip())


def ref_component(name: str) -> str:
    """A task id as one component of a ref name. git refuses a component that ends in
    `.lock` (git-check-ref-format(1)); such an id gets a `+`, a character no task id holds,
    so the names of two tasks never meet. Every refs/hunkwise/ name built from a task id
    goes through here."""
    return name + "+" if name.endswith(".lock") else name


def list_refs(repo: Path, *prefixes: str) -> dict[str, str]:
    """{ref: object id} of the refs under `prefixes`, with one `for-each-ref`."""
    out = run(repo, "for-each-ref", "--format=%(refname) %(objectname)", *prefixes)
    return dict(line.partition(" ")[::2] for line in out.decode().split("\n") if line)


def toplevel(start: Path | str | None) -> Path:
    """The work-tree root that holds `start` (default: the current directory)."""
    where = Path(start) if start else Path.cwd()
    if not where.is_dir():
        raise UsageError(f"--repo {where}: no such directory")
    return _dirs(where).top


def common_dir(repo: Path) -> Path:
    return _dirs(repo).common


def git_dir(repo: Path) -> Path:
    return _dirs(repo).git_dir


def object_format(repo: Path) -> str:
    """`sha1` or `sha256`: read from the repository, never assumed."""
    return _dirs(repo).object_format


def null_oid(repo: Path | None = None) -> Sha:
    """The all-zero object id of the repository's format (git's "no object")."""
    fmt = object_format(repo) if repo is not None else _LAST_FORMAT[0]
    return Sha("0" * HEX_LENGTHS[fmt])


def is_null_oid(oid: str) -> bool:
    return len(oid) in (40, 64) and not oid.strip("0")


def empty_tree(repo: Path) -> Sha:
    return EMPTY_TREES[object_format(repo)]


def linked_worktree_of(repo: Path) -> Path | None:
    """The main working tree when `repo` is a linked worktree (None in the main one).

    A linked worktree has its own HEAD and index: acting there on state shared through the
    common directory would map every task's ranges through another commit.
    """
    d = _dirs(repo)
    if os.path.realpath(d.git_dir) == os.path.realpath(d.common):
        return None
    out = run(repo, "worktree", "list", "--porcelain", "-z")
    for record in out.split(b"\0"):
        if record.startswith(b"worktree "):
            return Path(os.fsdecode(record[len(b"worktree "):]))
    return d.common.parent


class _Reader:
    """One `git cat-file --batch` process kept open for the whole command (as git-revise
    does): every object and revision this command reads goes through it, instead of a
    process per lookup. Requests go out in chunks that fit a pipe's buffer, each chunk's
    answers read before the next goes out, so neither side can block the other. Each
    request is resolved when git reads it: a ref moved meanwhile is seen moved, an
    object written meanwhile is found."""

    CHUNK = 128

    def __init__(self, repo: Path) -> None:
        import threading

        self.lock = threading.Lock()
        self.proc = subprocess.Popen(("git", *CONFIG_PINS, "cat-file", "--batch"),
                                     cwd=str(repo), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=base_env(None))

    def read(self, names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
        """(oid, type, content) of each name, or None where git has no such object."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        out: list[tuple[str, str, bytes] | None] = []
        with self.lock:
            for i in range(0, len(names), self.CHUNK):
                chunk = names[i:i + self.CHUNK]
                self.proc.stdin.write("".join(f"{n}\n" for n in chunk).encode())
                self.proc.stdin.flush()
                for _ in chunk:
                    header = self.proc.stdout.readline()
                    parts = header.split(b" ")
                    if not header.endswith(b"\n"):
                        raise GitError(("cat-file", "--batch"), self.proc.poll() or -1, b"ended early")
                    if len(parts) != 3:  # "<name> missing" / "<name> ambiguous"
                        out.append(None)
                        continue
                    size = int(parts[2])
                    data = self.proc.stdout.read(size + 1)
                    if len(data) != size + 1:
                        raise GitError(("cat-file", "--batch"), self.proc.poll() or -1, b"ended early")
                    out.append((parts[0].decode(), parts[1].decode(), data[:size]))
        return out

    def close(self) -> None:
        with self.lock:  # never under a read in flight
            if self.proc.stdin:
                self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


_READERS: dict[str, _Reader] = {}


def read_objects(repo: Path, names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
    """Objects (or revisions: `HEAD`, `REV:path`) read through this command's one reader."""
    for name in names:
        if "\n" in name or not name:
            raise UsageError(f"unreadable object name {name!r}")
    key = str(repo)
    reader = _READERS.get(key)
    if reader is None or reader.proc.poll() is not None:
        reader = _READERS[key] = _Reader(repo)
    try:
        return reader.read(names)
    except (OSError, ValueError):
        # The reader died (killed, or closed by another thread's close_readers): once more
        # with a fresh one, which is then this command's reader.
        reader = _READERS[key] = _Reader(repo)
        return reader.read(names)


def close_readers() -> None:
    """End this process's readers (at the end of every command, so a long-lived process
    that runs many commands in turn never keeps one per repository it has seen)."""
    while _READERS:
        _key, reader = _READERS.popitem()
        reader.close()


TreeEntries = Mapping[str, tuple[str, str]]  # {name: (mode, oid)} of one tree level


def read_tree(repo: Path, treeish: str) -> dict[str, tuple[str, str]] | None:
    """{name: (mode, oid)} of one tree level, as `ls-tree` lists it (modes six digits),
    read through the command's reader; None when `treeish` names no tree.

    `REV:PATH` is read as it is (the object at PATH); anything else is peeled to its tree,
    so a commit gives its root tree.
    """
    name = treeish if ":" in treeish else f"{treeish}^{{tree}}"
    found = read_objects(repo, [name])[0]
    if found is None or found[1] != "tree":
        return None
    raw, size = found[2], HEX_LENGTHS[object_format(repo)] // 2
    entries: dict[str, tuple[str, str]] = {}
    at = 0
    while at < len(raw):
        space = raw.index(b" ", at)
        nul = raw.index(b"\0", space)
        mode = raw[at:space].decode().rjust(6, "0")
        entries[raw[space + 1:nul].decode("utf-8", "surrogateescape")] = \
            (mode, raw[nul + 1:nul + 1 + size].hex())
        at = nul + 1 + size
    return entries


def head_and_tree(repo: Path) -> tuple[Sha | None, Sha]:
    """HEAD's commit and tree; (None, the empty tree) on an unborn branch."""
    found = read_objects(repo, ["HEAD"])[0]
    if found is None or found[1] != "commit" or not found[2].startswith(b"tree "):
        return None, empty_tree(repo)
    return Sha(found[0]), Sha(found[2][5:found[2].index(b"\n")].decode())


def tree_of(repo: Path, commit: str) -> Sha | None:
    """The tree of a commit (None when there is no such commit)."""
    found = read_objects(repo, [commit])[0]
    if found is None or found[1] != "commit" or not found[2].startswith(b"tree "):
        return None
    return Sha(found[2][5:found[2].index(b"\n")].decode())


def head(repo: Path) -> Sha | None:
    """The commit HEAD points at, or None on an unborn branch."""
    return head_and_tree(repo)[0]


def head_tree(repo: Path) -> Sha:
    return head_and_tree(repo)[1]


def cat_blobs(repo: Path, oids: Sequence[str]) -> dict[str, bytes]:
    """Read many blobs through the command's one `cat-file --batch`."""
    if not oids:
        return {}
    unique = list(dict.fromkeys(oids))
    blobs: dict[str, bytes] = {}
    for oid, found in zip(unique, read_objects(repo, unique), strict=True):
        if found is None:
            raise UsageError(f"object {oid} is missing from the repository")
        blobs[oid] = found[2]
    return blobs


def index_info(entries: Mapping[str, tuple[str, str] | None], repo: Path | None = None) -> bytes:
    """`update-index -z --index-info` input; mode 0 removes a path.

    git parses the id of a removal too, at the length of the repository's format.
    """
    null = null_oid(repo)
    lines = []
    for path, entry in entries.items():
        mode, oid = entry if entry is not None else ("0", null)
        lines.append(f"{mode} {oid}\t".encode() + os.fsencode(path) + b"\0")
    return b"".join(lines)


def stat_identity(path: Path) -> str:
    """A file's stat data as a stamp compares it ("none" when it is not there): any write
    changes it, and a file replaced by a rename (as git writes its index) has another inode."""
    try:
        st = os.stat(path)
    except OSError:
        return "none"
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def index_dirty(repo: Path, *, remembered: bool = False) -> list[str]:
    """Paths whose index entry differs from HEAD (staged by someone, or unmerged).

    `remembered`: for a warning or a listing, never a gate. An index found clean is
    remembered with its stat data and HEAD's tree; while neither changed it is clean
    without reading it again (a 10 MB index at 100,000 files: 15-25 ms). git replaces the
    index by a rename, so every write gives it another inode."""
    base = head_tree(repo)
    gd = git_dir(repo)
    stamp = gd / "hunkwise" / "index-clean"
    now = ""
    if remembered:
        seen = stat_identity(gd / "index")
        now = f"{seen} {base}" if seen != "none" else ""
        try:
            if now and stamp.read_text() == now:
                return []
        except OSError:
            pass
    out = run(repo, "diff-index", "--cached", "-z", "--name-only", "--no-renames", base)
    staged = [os.fsdecode(p) for p in out.split(b"\0") if p]
    if now and not staged:
        try:
            stamp.parent.mkdir(exist_ok=True)
            tmp = stamp.with_name(f"index-clean.{os.getpid()}")
            tmp.write_text(now)
            os.replace(tmp, stamp)
        except OSError:
            pass  # (only a cost: read again next time)
    return staged


def tracked_and_untracked(repo: Path) -> list[str]:
    out = run(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted({os.fsdecode(p) for p in out.split(b"\0") if p})


def blob_at(repo: Path, rev: str, path: str) -> tuple[str, bytes] | None:
    """(mode, bytes) of PATH in REV, or None when absent."""
    rc, out = run_rc(repo, "ls-tree", "-z", rev, "--", path, env={"GIT_LITERAL_PATHSPECS": "1"})
    if rc != 0 or not out:
        return None
    meta, _, _name = out.rstrip(b"\0").partition(b"\t")
    mode, otype, oid = meta.decode().split(" ")
    if otype != "blob":
        return None
    return mode, cat_blobs(repo, [oid])[oid]


def file_at(repo: Path, rev: str, path: str) -> bytes | None:
    """The bytes of a regular file PATH in REV, or None when absent (or not a blob, or REV
    unborn)."""
    if "\n" in rev or "\n" in path:
        raise UsageError(f"unreadable name {rev}:{path}")
    found = read_objects(repo, [f"{rev}:{path}"])[0]
    return found[2] if found is not None and found[1] == "blob" else None


def delete_refs(repo: Path, *prefixes: str) -> int:
    """Delete every ref under the `prefixes` (our own bookkeeping refs only)."""
    refs = list(list_refs(repo, *prefixes))
    if refs:
        run(repo, "update-ref", "--stdin", input="".join(f"delete {r}\n" for r in refs).encode())
    return len(refs)
