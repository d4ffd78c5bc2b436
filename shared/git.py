"""The one place that runs git.

Every call goes through `run` with an argument tuple, never a shell string, and a pinned
environment: no prompts, C locale, and no user configuration that changes what diff prints
(external drivers, textconv, colour, prefixes, algorithm). Machine formats only.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NewType

from .errors import GitError, UsageError

Sha = NewType("Sha", str)

EMPTY_TREE = Sha("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

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

# Configuration that would otherwise leak into plumbing output or trigger side effects.
_CONFIG_PINS: tuple[str, ...] = (
    "-c", "core.quotePath=false",
    "-c", "color.ui=never",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "core.fsmonitor=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    # Commit messages are UTF-8 text; a user's legacy encoding would mislabel them.
    "-c", "i18n.commitEncoding=UTF-8",
)


def _base_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_PAGER", "PAGER", "GIT_INDEX_FILE",
                "GIT_DIR", "GIT_WORK_TREE", "GIT_PREFIX"):
        env.pop(key, None)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    if extra:
        env.update(extra)
    return env


def run(
    repo: Path | str,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    ok_codes: Sequence[int] = (0,),
) -> bytes:
    """Run `git ARGS` in `repo` and return stdout as bytes; raise GitError on failure."""
    cmd = ("git", *_CONFIG_PINS, *args)
    proc = subprocess.run(
        cmd,
        cwd=str(repo),
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        env=_base_env(env),
    )
    if check and proc.returncode not in ok_codes:
        raise GitError(args, proc.returncode, proc.stderr)
    return proc.stdout


def run_rc(repo: Path | str, *args: str, env: Mapping[str, str] | None = None,
           input: bytes | None = None) -> tuple[int, bytes]:
    """Run git and return (exit code, stdout) without raising."""
    cmd = ("git", *_CONFIG_PINS, *args)
    proc = subprocess.run(cmd, cwd=str(repo), input=input,
                          stdin=None if input is not None else subprocess.DEVNULL,
                          capture_output=True, env=_base_env(env))
    return proc.returncode, proc.stdout


_DIRS: dict[str, tuple[Path, Path, Path]] = {}


def _dirs(start: Path) -> tuple[Path, Path, Path]:
    """(top level, common dir, git dir) with one rev-parse, cached per process."""
    key = str(start)
    if key not in _DIRS:
        rc, out = run_rc(start, "rev-parse", "--show-toplevel", "--git-common-dir",
                         "--absolute-git-dir")
        lines = out.split(b"\n")
        if rc != 0 or len(lines) < 3 or not lines[0]:
            raise UsageError(f"{start}: not inside a git work tree (use --repo PATH)")
        top = Path(os.fsdecode(lines[0]))
        common = Path(os.fsdecode(lines[1]))
        common = common if common.is_absolute() else (start / common).resolve()
        _DIRS[key] = (top, common, Path(os.fsdecode(lines[2])))
        _DIRS.setdefault(str(top), _DIRS[key])
    return _DIRS[key]


def toplevel(start: Path | str | None) -> Path:
    """The work-tree root that holds `start` (default: the current directory)."""
    where = Path(start) if start else Path.cwd()
    if not where.is_dir():
        raise UsageError(f"--repo {where}: no such directory")
    return _dirs(where)[0]


def common_dir(repo: Path) -> Path:
    return _dirs(repo)[1]


def git_dir(repo: Path) -> Path:
    return _dirs(repo)[2]


def head_and_tree(repo: Path) -> tuple[Sha | None, Sha]:
    """HEAD's commit and tree with one process; (None, EMPTY_TREE) on an unborn branch."""
    rc, out = run_rc(repo, "rev-parse", "HEAD^{commit}", "HEAD^{tree}")
    parts = out.decode().split()
    if rc != 0 or len(parts) != 2:
        return None, EMPTY_TREE
    return Sha(parts[0]), Sha(parts[1])


def head(repo: Path) -> Sha | None:
    """The commit HEAD points at, or None on an unborn branch."""
    rc, out = run_rc(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    return Sha(out.decode().strip()) if rc == 0 else None


def head_tree(repo: Path) -> Sha:
    rc, out = run_rc(repo, "rev-parse", "--verify", "-q", "HEAD^{tree}")
    return Sha(out.decode().strip()) if rc == 0 else EMPTY_TREE


def cat_blobs(repo: Path, oids: Sequence[str]) -> dict[str, bytes]:
    """Read many blobs with one `cat-file --batch` process."""
    if not oids:
        return {}
    unique = list(dict.fromkeys(oids))
    out = run(repo, "cat-file", "--batch", input=("\n".join(unique) + "\n").encode())
    blobs: dict[str, bytes] = {}
    pos = 0
    for oid in unique:
        nl = out.index(b"\n", pos)
        header = out[pos:nl].split(b" ")
        if len(header) < 3 or header[1] == b"missing":
            raise UsageError(f"object {oid} is missing from the repository")
        size = int(header[2])
        start = nl + 1
        blobs[oid] = out[start:start + size]
        pos = start + size + 1
    return blobs


def hash_blobs(repo: Path, contents: Sequence[bytes]) -> list[Sha]:
    """Write blobs exactly as given (no filters) with one process.

    `fast-import` streams them from memory into one pack: for hundreds of blobs an order
    of magnitude faster than temp files for `hash-object --stdin-paths`.
    """
    if not contents:
        return []
    if len(contents) == 1:
        return [Sha(run(repo, "hash-object", "-w", "--no-filters", "--stdin",
                        input=contents[0]).decode().strip())]
    import tempfile

    stream = b"".join(b"blob\nmark :%d\ndata %d\n" % (i + 1, len(d)) + d + b"\n"
                      for i, d in enumerate(contents))
    with tempfile.TemporaryDirectory(prefix="hunkwise-marks-", dir=git_dir(repo)) as tmp:
        marks = os.path.join(tmp, "marks")
        run(repo, "fast-import", "--quiet", f"--export-marks={marks}", input=stream)
        with open(marks, "rb") as f:
            table = dict(line.split(b" ", 1) for line in f.read().split(b"\n") if line)
    return [Sha(table[b":%d" % (i + 1)].decode().strip()) for i in range(len(contents))]


def build_tree(repo: Path, base: str, entries: Mapping[str, tuple[str, str] | None]) -> Sha:
    """The tree `base` with `entries` ({path: (mode, oid)} or None to delete) applied.

    Works in a throwaway index, never the real one.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hunkwise-idx-", dir=git_dir(repo)) as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        run(repo, "read-tree", base, env=env)
        run(repo, "update-index", "-z", "--index-info", input=index_info(entries), env=env)
        return Sha(run(repo, "write-tree", env=env).decode().strip())


def index_info(entries: Mapping[str, tuple[str, str] | None]) -> bytes:
    """`update-index -z --index-info` input; mode 0 removes a path."""
    lines = []
    for path, entry in entries.items():
        mode, oid = entry if entry is not None else ("0", "0" * 40)
        lines.append(f"{mode} {oid}\t".encode() + os.fsencode(path) + b"\0")
    return b"".join(lines)


def index_dirty(repo: Path) -> list[str]:
    """Paths whose index entry differs from HEAD (staged by someone, or unmerged)."""
    base = head_tree(repo)
    out = run(repo, "diff-index", "--cached", "-z", "--name-only", "--no-renames", base)
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


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


def delete_refs(repo: Path, prefix: str) -> int:
    """Delete every ref under `prefix` (our own bookkeeping refs only)."""
    out = run(repo, "for-each-ref", "--format=%(refname)", prefix)
    refs = [r for r in out.decode().split("\n") if r]
    if refs:
        run(repo, "update-ref", "--stdin", input="".join(f"delete {r}\n" for r in refs).encode())
    return len(refs)
