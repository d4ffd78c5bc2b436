"""The accept journal, and the reset of exactly the committed paths of the real index.

`coord accept` writes the journal (`accept.json` in the state) before HEAD moves and
removes it when everything after is done. If it is still there, HEAD tells whether the
commit landed: then the task is marked accepted and the committed paths of the index
reset; either way its temporary checkout goes. The next `coord accept`, `next`, `status`
or `revert` settles it (docs/design.md, "Crash safety"). Accept, revert and `coord commit`
share the index reset and the commit lock's wait.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise import inbox
from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused
from hunkwise.shared.hunks.taskview import sync_ranges
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx
from hunkwise.shared.state.models import State, TaskState
from hunkwise.shared.work import recovery

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import AcceptJournal, Repaired

# How long a command that commits waits for another to finish committing.
COMMIT_LOCK_WAIT_S = 600.0
FILE = "accept.json"


def reset_index_paths(ctx: Ctx, entries: dict[str, tuple[str, str] | None]) -> str | None:
    """Make the real index hold HEAD's entries for exactly the committed paths.

    Waits while someone holds index.lock; returns a warning instead of failing, since the
    commit has landed by then and must be recorded either way.
    """
    wait = float(os.environ.get("COORD_INDEX_LOCK_WAIT", "10"))
    deadline = time.monotonic() + wait
    info = git.index_info(entries, ctx.repo)
    while True:
        rc, _ = git.run_rc(ctx.repo, "update-index", "-z", "--index-info", input=info)
        if rc == 0:
            return None
        if time.monotonic() > deadline:
            return ("committed, but the index stayed locked (index.lock) for "
                    f"{wait:g}s; once it is free run: git reset -q -- "
                    + " ".join(list(entries)[:5]))
        time.sleep(0.05)


def path(ctx: Ctx) -> Path:
    return ctx.lay.root / FILE


def write(ctx: Ctx, doc: AcceptJournal) -> None:
    store.ensure(ctx.lay)
    store.atomic_write(path(ctx), json.dumps(doc).encode())


def repair(ctx: Ctx) -> Repaired | None:
    """Finish or undo what a crashed `coord accept` left; None when nothing was left.

    Skipped while an accept runs (it holds the commit lock, and repairs first itself).
    """
    if not path(ctx).exists():
        return None
    try:
        with store.locked(ctx.lay, timeout=0, name="commit"):
            return settle(ctx)
    except StateRefused:
        return None


def settle(ctx: Ctx) -> Repaired | None:
    """Under the commit lock: finish what the journal names if its commit landed, drop its
    scratch checkout either way, then the journal itself."""
    where = path(ctx)
    try:
        doc = store.strict_json_loads(where.read_bytes())
        task_id, commit, paths = str(doc["task"]), str(doc["commit"]), list(doc["paths"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        where.unlink()  # torn before its rename cannot be: atomic_write; unreadable: drop it
        return None
    head = git.head(ctx.repo)
    landed = head is not None and (head == commit or git.run_rc(
        ctx.repo, "merge-base", "--is-ancestor", commit, head)[0] == 0)
    if landed:
        with store.locked(ctx.lay):
            state = store.load(ctx.lay)
            task = state.tasks.get(task_id)
            if task is not None and task.state != TaskState.ACCEPTED:
                mark_accepted(ctx, state, task_id, commit)
                store.save(ctx.lay, state)
        assert head is not None
        reset_index_paths(ctx, _entries_at(ctx, head, paths))
        _finish(ctx, task_id)
    if doc.get("recheck"):
        from hunkwise.shared.git import checkout as git_checkout

        git_checkout.drop(ctx.repo, Path(doc["recheck"]))
    where.unlink()
    return {"task": task_id, "commit": commit, "landed": landed}


def _entries_at(ctx: Ctx, rev: str, paths: list[str]) -> dict[str, tuple[str, str] | None]:
    """{path: (mode, oid) in REV, or None when absent} for exactly these paths."""
    out: dict[str, tuple[str, str] | None] = dict.fromkeys(paths)
    if not paths:
        return out
    raw = git.run(ctx.repo, "ls-tree", "-r", "-z", "--full-tree", rev, "--", *paths,
                  env={"GIT_LITERAL_PATHSPECS": "1"})
    for rec in raw.split(b"\0"):
        if not rec:
            continue
        meta, _, name = rec.partition(b"\t")
        mode, _kind, oid = meta.decode().split(" ")
        p = os.fsdecode(name)
        if p in out:
            out[p] = (mode, oid)
    return out


def mark_accepted(ctx: Ctx, state: State, task_id: str, commit: str) -> None:
    task = state.tasks[task_id]
    task.state = TaskState.ACCEPTED
    task.commit = commit
    task.claim = None
    task.saved = None
    task.updated_at = store.now()
    sync_ranges(ctx.repo, state)


def _finish(ctx: Ctx, task_id: str) -> None:
    recovery.forget(ctx.repo, task_id)
    archive_reports(ctx, task_id)
    prune_provenance(ctx)


def prune_provenance(ctx: Ctx) -> None:
    """The hooks' record only grows: once it is large, the records of sessions that hold
    no active task any more go (an accept is when sessions finish)."""
    from hunkwise.shared.state import provenance

    root = provenance.root_of(ctx.repo)
    try:
        if (root / provenance.FILE).stat().st_size <= provenance.PRUNE_AT:
            return
    except OSError:
        return
    state = store.load(ctx.lay)
    live = {s for t in state.tasks.values() if t.active
            for s in (t.session, t.claim.session if t.claim else None) if s}
    provenance.prune(root, live, provenance.PRUNE_AT)


def archive_reports(ctx: Ctx, task_id: str) -> None:
    for e in inbox.find_task_reports(ctx.lay.inbox, task_id):
        inbox.archive(e)
