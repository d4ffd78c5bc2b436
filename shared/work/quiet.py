"""Is a task's unreported work due to be recorded again? Judged by stat data, without git.

A worker command records its task's unreported work (shared/work/recovery.py). Reading the
whole tree for that costs what `git status` costs (100,000 files: ~100 ms) on every
heartbeat, while the record can only change when a file the task's grants can hold
changed, or HEAD moved. So each record leaves, in this worktree's git dir, a stamp: a digest
of the stat data (inode, mode, size, mtime, ctime) of every path under the task's grants,
taken before the snapshot it was recorded from, with that record's tree and base. While
the stamp, the task's record and HEAD all still agree, nothing is due: no snapshot.

The digest is taken before the snapshot, so a file written meanwhile differs from it next
time (the record is then taken again: the judgement errs only toward recording). As git
does with its index, a digest holding a file modified in the last `RACY_S` seconds is not
trusted: rewritten again within one tick of the clock, with the same size, a file would
keep the same stat data. Grants that reach more than `MOST` paths, or whose walk visits
more than four times that many entries, are not judged (a snapshot is as cheap as looking).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hunkwise.shared import git
from hunkwise.shared.hunks.globs import glob_matches
from hunkwise.shared.state.models import Task

MOST = 4096
RACY_S = 2.0
HOME = "hunkwise/quiet"  # in the git dir of this worktree, beside the kept snapshot index


# What makes a glob grant's text other than its path: wildcards, and the backslash that
# escapes a character (a name ending in a space is kept as `name\ `).
_MAGIC = "*?[\\"


def _literal_dir(pattern: str) -> str:
    """The directory a glob's matches all lie under ("" for the top)."""
    p = pattern.lstrip("/")
    cut = min((i for i, ch in enumerate(p) if ch in _MAGIC), default=len(p))
    return p[:cut].rpartition("/")[0]


def grant_stat(repo: Path, task: Task) -> str | None:
    """A digest of the stat data of every path the task's grants can hold (None when they
    reach more than MOST paths, or one was modified in the last RACY_S seconds)."""
    import time

    seen: dict[str, tuple[int, ...] | None] = {}
    racy = time.time_ns() - int(RACY_S * 1e9)

    def note(rel: str, st: os.stat_result | None) -> None:
        seen[rel] = None if st is None else (st.st_ino, st.st_mode, st.st_size,
                                             st.st_mtime_ns, st.st_ctime_ns)

    visited = 0
    for g in task.grants:
        line = g.kind != "glob"  # a range or a point: one file
        if line or not any(ch in g.path for ch in _MAGIC):
            rel = g.path.lstrip("/")
            try:
                note(rel, os.lstat(repo / rel))
            except (FileNotFoundError, NotADirectoryError):
                note(rel, None)
            if line or not (repo / rel).is_dir():
                continue
            top = rel
        else:
            top = _literal_dir(g.path)
        stack = [top]
        while stack:
            d = stack.pop()
            try:
                entries = list(os.scandir(repo / d if d else repo))
            except (FileNotFoundError, NotADirectoryError):
                continue
            visited += len(entries)
            if visited > 4 * MOST:
                return None  # a glob at the top of a large tree (node_modules...): snapshot
            for ent in entries:
                if ent.name == ".git" and not d:
                    continue
                rel = f"{d}/{ent.name}" if d else ent.name
                if ent.is_dir(follow_symlinks=False):
                    stack.append(rel)
                    continue
                if glob_matches(g.path, rel) or rel == g.path.lstrip("/") or \
                        rel.startswith(g.path.strip("/") + "/"):
                    note(rel, ent.stat(follow_symlinks=False))
            if len(seen) > MOST:
                return None
    if any(st is not None and st[3] >= racy for st in seen.values()):
        return None
    h = hashlib.sha256()
    # The grants too: a range widened over the same file holds other lines.
    h.update(repr([str(g) for g in task.grants]).encode("utf-8", "surrogateescape"))
    for rel in sorted(seen):
        h.update(repr((rel, seen[rel])).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def scope(tasks: list[Task]) -> list[str] | None:
    """The paths a snapshot of these tasks' work must read: each grant's file, folder, or
    the folder a glob's matches lie under, and each path the tasks' records hold. None when
    that is the whole tree (a glob at the top) or a path is not plain (quoted in records)."""
    out: set[str] = set()
    for task in tasks:
        for g in task.grants:
            magic = g.kind == "glob" and any(ch in g.path for ch in _MAGIC)
            path = _literal_dir(g.path) if magic else g.path.strip("/")
            if not path:
                return None
            out.add(path)
        saved = task.saved
        for rp in (*saved.hunks, *saved.whole) if saved is not None else ():
            if "\\" in rp or rp.startswith('"'):
                return None
            out.add(rp)
    # A path inside another is read with it.
    return sorted(p for p in out if not any(p.startswith(q + "/") for q in out))


def _stamp_file(repo: Path, task_id: str) -> Path:
    return git.git_dir(repo) / HOME / task_id.replace("/", "%")


def is_quiet(repo: Path, task: Task, digest: str | None, head: str | None) -> bool:
    """Nothing due: the stamp's digest is this one, and its record the task's, on HEAD."""
    saved = task.saved
    if digest is None or saved is None or saved.base != head:
        return False
    try:
        stamp = _stamp_file(repo, task.id).read_text().split(" ")
    except OSError:
        return False
    return stamp == [digest, saved.tree, str(saved.base)]


def stamp(repo: Path, task: Task, digest: str | None) -> None:
    """Leave the stamp of a record just made or found current (digest taken before it)."""
    saved = task.saved
    path = _stamp_file(repo, task.id)
    try:
        if digest is None or saved is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(" ".join([digest, saved.tree, str(saved.base)]))
        os.replace(tmp, path)
    except OSError:
        pass  # a stamp only spares work: without one, the next command records
