"""Writing chosen entries back into the shared working tree, through git's filters."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from . import git


def current_oids(repo: Path, paths: list[str], write: bool = False) -> dict[str, str | None]:
    """What each path of the working tree hashes to (clean filters applied).

    `write` also stores the blobs, for callers that read them back.
    """
    result: dict[str, str | None] = {}
    existing = []
    for p in paths:
        full = repo / p
        if full.is_symlink():
            result[p] = git.run(repo, "hash-object", *(["-w"] if write else []), "--stdin",
                                input=os.fsencode(os.readlink(full))).decode().strip()
        elif full.is_file():
            existing.append(p)
        else:
            result[p] = None
    if existing:
        out = git.run(repo, "hash-object", *(["-w"] if write else []), "--stdin-paths",
                      input=("\n".join(existing) + "\n").encode())
        result.update(zip(existing, out.decode().split(), strict=True))
    return result


def write_entries(repo: Path, entries: Mapping[str, tuple[str, str] | None],
                  expect: Mapping[str, str | None] | None = None) -> None:
    """Set each path of the working tree to a blob (mode, oid), or remove it (None).

    Goes through a throwaway index and `checkout-index`, so smudge filters, line endings,
    symlinks and the executable bit come out as git would write them. Touches nothing else.
    """
    from .errors import StateRefused

    if expect is not None:
        now = current_oids(repo, list(expect))
        moved = [p for p, oid in expect.items() if now.get(p) != oid]
        if moved:
            raise StateRefused(f"{moved[0]} changed while this ran; nothing was written, try again")
    present = {p: e for p, e in entries.items() if e is not None}
    for path, e in entries.items():
        if e is None:
            full = repo / path
            if full.is_symlink() or full.exists():
                os.unlink(full)
            _prune_empty_dirs(repo, full.parent)
    if not present:
        return
    with tempfile.TemporaryDirectory(prefix="hunkwise-idx-", dir=git.git_dir(repo)) as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git.run(repo, "update-index", "-z", "--index-info", input=git.index_info(present), env=env)
        for path in present:
            full = repo / path
            if full.is_symlink() or (full.exists() and not full.is_dir()):
                os.unlink(full)
        git.run(repo, "checkout-index", "-f", "-z", "--stdin", env=env,
                input=b"".join(os.fsencode(p) + b"\0" for p in present))


def _prune_empty_dirs(repo: Path, d: Path) -> None:
    root = repo.resolve()
    while d.resolve() != root:
        try:
            d.rmdir()
        except OSError:
            return
        d = d.parent
