"""`coord commit PATH... -m MSG`: the coordinator commits its own files.

`coord.toml`, a CI file, the team's notes: files no task holds. With the git hooks
installed nobody else may move HEAD, so this is the sanctioned way. Whole files, exactly
as they are in the working tree, through the same plumbing as accept (a throwaway index,
`commit-tree`, a compare-and-swap of HEAD, then only those paths of the real index reset);
a path any active task holds is refused, naming the task.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.errors import CheckFailed, StateRefused, UsageError
from hunkwise.shared.git import objects
from hunkwise.shared.hunks import diff, snapshot
from hunkwise.shared.hunks.globs import grant_covers
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, refuse_if_frozen
from hunkwise.shared.state.models import check_rel_path

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import CommitResult


def _rel(ctx: Ctx, path: str) -> str:
    """A path given on the command line, relative to the current directory, as a
    repository path."""
    full = Path(path) if os.path.isabs(path) else Path.cwd() / path
    top = ctx.repo.resolve()
    real = full.parent.resolve() / full.name
    if os.path.commonpath([top, real]) != str(top) or real == top:
        raise UsageError(f"{path}: not inside the repository {top}")
    return check_rel_path(real.relative_to(top).as_posix(), "path")


def _check_settings(ctx: Ctx, entries: dict[str, tuple[str, str] | None]) -> None:
    """A `coord.toml` about to be committed must load (SPEC: `coord commit` refuses a
    malformed one): every command reads its settings from HEAD, so a bad one committed
    would stop them all. The check reads the bytes that would be committed."""
    from hunkwise.shared.state import config

    entry = entries.get("coord.toml")
    if entry is None:
        return
    data = git.cat_blobs(ctx.repo, [entry[1]])[entry[1]]
    try:
        config.parse(data.decode("utf-8"), "coord.toml")
    except UnicodeDecodeError:
        raise UsageError("coord.toml: not UTF-8 text; nothing committed") from None
    except UsageError as e:
        raise UsageError(f"{e.message}; nothing committed") from None


def commit_own(ctx: Ctx, paths: list[str], message: str) -> CommitResult:
    from hunkwise.coordinator.journal import COMMIT_LOCK_WAIT_S, reset_index_paths

    if not message.strip():
        raise UsageError("-m must give a commit message")
    if not paths:
        raise UsageError("name the files to commit")
    rel = sorted({_rel(ctx, p) for p in paths})
    with store.locked(ctx.lay, timeout=COMMIT_LOCK_WAIT_S, name="commit"):
        state = store.load(ctx.lay)
        refuse_if_frozen(state, "coord commit")
        for t in state.tasks.values():
            if not t.active:
                continue
            for g in t.grants:
                for p in rel:
                    if grant_covers(g, p):
                        raise StateRefused(f"{p} is held by {t.id} ({g}); its changes are "
                                           f"committed by coord accept {t.id}")
        snap = snapshot.take(ctx.repo)
        changes = diff.diff_trees(ctx.repo, snap.head_tree, snap.tree, rel)
        if not changes:
            raise CheckFailed(f"nothing to commit: {', '.join(rel)} as in HEAD")
        entries = {c.path: (None if c.status == "D" else (c.new_mode, c.new_oid))
                   for c in changes}
        _check_settings(ctx, entries)
        tree = objects.build_tree(ctx.repo, snap.head_tree, entries)
        parents = ("-p", snap.head) if snap.head else ()
        text = message.strip() + "\n"
        commit = git.run(ctx.repo, "commit-tree", tree, *parents,
                         input=text.encode()).decode().strip()
        rc, _ = git.run_rc(ctx.repo, "update-ref", "-m", "coord commit", "HEAD", commit,
                           snap.head or git.null_oid(ctx.repo),
                           env={"HUNKWISE_COORDINATOR": "1"})
        if rc != 0:
            raise StateRefused("HEAD moved while committing (or a hook refused); nothing "
                               "committed, try again")
        warning = reset_index_paths(ctx, entries)
    return {"commit": commit, "paths": sorted(entries), "warnings": [warning] if warning else []}
