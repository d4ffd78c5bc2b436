"""`coord accept`: commit exactly one task's changes out of a shared dirty tree.

The algorithm (shared/STYLE.md, "Staging exactly one task's hunks"): snapshot the tree
through a throwaway index; attribute its -U0 hunks to grants; splice each file's new blob
from HEAD's bytes and the task's hunks; write a tree in a second throwaway index; prove
that HEAD -> tree is exactly the task's changes and tree -> snapshot exactly the rest;
`commit-tree`; move HEAD with a compare-and-swap; reset only the committed paths of the
real index. Hooks never run: a stashing pre-commit hook would yank others' edits.
`git apply --cached` on a subset of -U0 hunks is not used: it can place a hunk on the
wrong line and still exit 0.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any

from hunkwise import inbox
from hunkwise.coordinator.review import newest_report, validate
from hunkwise.shared import diff, git, store
from hunkwise.shared.checks import failure_text, run_checks
from hunkwise.shared.context import Ctx, get_task, iso
from hunkwise.shared.diff import FileChange
from hunkwise.shared.errors import CheckFailed, StateRefused
from hunkwise.shared.models import Report, Task, TaskState
from hunkwise.shared.tree import TreeView, active_tasks, sync_ranges, view
from hunkwise.shared.workspace import clean_checkout

MAX_ATTEMPTS = 5
_TRAILER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*: \S")
COMMIT_LOCK_WAIT_S = 600.0


@dataclass
class Plan:
    tree: str
    entries: dict[str, tuple[str, str] | None]
    paths: list[str]


def _whole_entry(ch: FileChange) -> tuple[str, str] | None:
    return None if ch.status == "D" else (ch.new_mode, ch.new_oid)


def plan_commit(ctx: Ctx, tv: TreeView, task_id: str,
                mine: list[FileChange] | None = None) -> Plan:
    """The tree HEAD + exactly the task's changes, proven against the snapshot."""
    if mine is None:
        mine = tv.task_changes(task_id)
    by_path = {c.path: c for c in tv.changes}
    split = [c for c in mine if c.splittable and c.hunks]
    split_paths = {c.path for c in split}
    # Old texts of range-granted files were read for attribution already.
    known = {c.old_oid: tv.old_texts[c.path] for c in split if c.path in tv.old_texts}
    blobs = git.cat_blobs(ctx.repo, [c.old_oid for c in split if c.old_oid not in known]
                          + [c.new_oid for c in split])
    blobs.update(known)
    entries: dict[str, tuple[str, str] | None] = {}
    new_contents: list[bytes] = []
    for c in mine:
        if c.path in split_paths:
            continue
        entries[c.path] = _whole_entry(c)
    for c in split:
        full = by_path[c.path]
        ids = {id(h) for h in c.hunks}
        others = [h for h in full.hunks if id(h) not in ids]
        try:
            new = diff.splice(blobs[c.old_oid], c.hunks)
            rest = diff.splice(new, diff.shift_hunks(others, c.hunks))
        except ValueError as e:
            raise CheckFailed(f"{c.path}: cannot separate {task_id}'s hunks ({e}); nothing committed") from None
        if rest != blobs[c.new_oid]:
            raise CheckFailed(f"{c.path}: HEAD + {task_id}'s hunks + the others' hunks does not "
                              "give the working tree's bytes; nothing committed")
        new_contents.append(new)
    for c, oid in zip(split, git.hash_blobs(ctx.repo, new_contents), strict=True):
        entries[c.path] = (c.new_mode, oid)
    tree = git.build_tree(ctx.repo, tv.snap.head_tree, entries)
    got = set(diff.changed_paths(ctx.repo, tv.snap.head_tree, tree))
    want = {c.path for c in mine}
    if got != want:
        raise CheckFailed(f"self-check failed: the commit would touch {sorted(got ^ want)[:5]} "
                          "beyond the task's changes; nothing committed")
    return Plan(tree=tree, entries=entries, paths=sorted(entries))


def commit_message(task: Task, report: Report, message: str | None) -> bytes:
    if message and message.strip():
        subject, _, body = message.strip().partition("\n")
    else:
        subject, body = report.proposed_commit.subject, report.proposed_commit.body
    text = subject.strip()
    body = body.strip()
    if body:
        text += "\n\n" + body
    last = body.split("\n\n")[-1] if body else ""
    # Join an existing trailer block (Signed-off-by, Co-authored-by...) rather than
    # starting a paragraph after it, which would stop git from reading it as trailers.
    joins = bool(last) and all(_TRAILER.match(line) for line in last.split("\n"))
    text += ("\n" if joins else "\n\n") + f"Coord-Task: {task.id}\n"
    return text.encode()


def reset_index_paths(ctx: Ctx, entries: dict[str, tuple[str, str] | None]) -> str | None:
    """Make the real index hold HEAD's entries for exactly the committed paths.

    Waits while someone holds index.lock; returns a warning instead of failing, since the
    commit has landed by then and must be recorded either way.
    """
    wait = float(os.environ.get("COORD_INDEX_LOCK_WAIT", "10"))
    deadline = time.monotonic() + wait
    info = git.index_info(entries)
    while True:
        rc, _ = git.run_rc(ctx.repo, "update-index", "-z", "--index-info", input=info)
        if rc == 0:
            return None
        if time.monotonic() > deadline:
            return ("committed, but the index stayed locked (index.lock) for "
                    f"{wait:g}s; once it is free run: git reset -q -- "
                    + " ".join(list(entries)[:5]))
        time.sleep(0.05)


def accept(ctx: Ctx, task_id: str, *, message: str | None, recheck: bool | None) -> dict[str, Any]:
    with store.locked(ctx.lay, timeout=COMMIT_LOCK_WAIT_S, name="commit"):
        return _accept(ctx, task_id, message=message, recheck=recheck)


def _accept(ctx: Ctx, task_id: str, *, message: str | None, recheck: bool | None) -> dict[str, Any]:
    do_recheck = ctx.config.accept.recheck if recheck is None else recheck
    for _attempt in range(MAX_ATTEMPTS):
        with store.locked(ctx.lay):
            state = store.load(ctx.lay)
            task = get_task(state, task_id)
            if state.freeze is not None:
                fz = state.freeze
                raise StateRefused(f"coord accept {task_id} refused: release freeze of batch "
                                   f"{fz.batch} in force since {iso(fz.at)} by {fz.by}; "
                                   "coord thaw first")
            if task.state == TaskState.ACCEPTED:
                raise StateRefused(f"{task_id} is accepted already (commit {task.commit}); "
                                   "nothing new to commit")
            if task.state != TaskState.REPORTED:
                raise StateRefused(f"{task_id} is {task.state}; only reported tasks can be accepted")
            if sync_ranges(ctx.repo, state):
                store.save(ctx.lay, state)
        entry, report = newest_report(ctx, task_id)
        tv = view(ctx.repo, active_tasks(state))
        verdict = validate(ctx, state, task, report, tv)
        findings = verdict.findings
        if do_recheck and task.checks:
            # The checks the worker skipped run here, on HEAD + exactly the task's changes.
            findings = [f for f in findings if f.code != "checks-skipped"]
        if findings:
            codes = ", ".join(sorted({f.code for f in findings}))
            first = findings[0]
            raise CheckFailed(f"{task_id} is not valid ({codes}): "
                              f"{first.path + ': ' if first.path else ''}{first.detail}; nothing staged")
        assert verdict.selection is not None
        mine = verdict.selection.changes
        if not mine:
            raise CheckFailed(f"{task_id} has no changes in the tree; nothing to commit")
        plan = plan_commit(ctx, tv, task_id, mine)
        head = tv.snap.head
        parents = ("-p", head) if head else ()
        commit = git.run(ctx.repo, "commit-tree", plan.tree, *parents,
                         input=commit_message(task, report, message)).decode().strip()
        if do_recheck and task.checks:
            with clean_checkout(ctx.repo, commit) as where:
                results = run_checks(where, task.checks, ctx.config.checks.timeout_seconds)
            bad = [r for r in results if not r.passed]
            if bad:
                raise CheckFailed(f"{task_id}: recheck on HEAD + the task's changes failed: "
                                  + ", ".join(f"{r.command!r} (exit {r.exit_code})" for r in bad)
                                  + "; nothing committed", details=failure_text(bad))
        with store.locked(ctx.lay):
            state = store.load(ctx.lay)
            if state.freeze is not None:
                raise StateRefused(f"coord accept {task_id} refused: a freeze began meanwhile")
            now_task = state.tasks[task_id]
            if now_task.state != TaskState.REPORTED or now_task.revision != report.revision:
                raise StateRefused(f"{task_id} changed while it was being accepted (now "
                                   f"{now_task.state}, revision {now_task.revision}); nothing "
                                   "committed")
            rc, _ = git.run_rc(ctx.repo, "update-ref", "-m", f"coord accept {task_id}", "HEAD",
                               commit, head or git.null_oid(ctx.repo),
                               env={"HUNKWISE_COORDINATOR": "1"})
            if rc != 0:
                if git.head(ctx.repo) == head:
                    raise StateRefused(f"git refused to move HEAD for {task_id} (a "
                                       "reference-transaction hook?); nothing committed")
                continue  # HEAD moved since the snapshot: start over
            task = state.tasks[task_id]
            task.state = TaskState.ACCEPTED
            task.commit = commit
            task.claim = None
            task.updated_at = store.now()
            sync_ranges(ctx.repo, state)
            store.save(ctx.lay, state)
        warning = reset_index_paths(ctx, plan.entries)
        git.delete_refs(ctx.repo, f"refs/hunkwise/snapshots/{task_id}/")
        for e in inbox.find_task_reports(ctx.lay.inbox, task_id):
            inbox.archive(e)
        notes = [f"{w.code}: {w.path + ': ' if w.path else ''}{w.detail}" for w in verdict.warnings]
        doc: dict[str, Any] = {"commit": commit, "task": task_id, "paths": plan.paths,
                               "revision": report.revision,
                               "warnings": notes + ([warning] if warning else [])}
        return doc
    raise StateRefused(f"HEAD kept moving while accepting {task_id} ({MAX_ATTEMPTS} tries); try again")
