"""`coord accept`: commit exactly one task's changes out of a shared dirty tree.

The algorithm (shared/STYLE.md, "Staging exactly one task's hunks"): snapshot the tree
through a throwaway index; attribute its -U0 hunks to grants; splice each file's new blob
from HEAD's bytes and the task's hunks; write a tree in a second throwaway index; prove
that HEAD -> tree is exactly the task's changes and tree -> snapshot exactly the rest;
`commit-tree`; move HEAD with a compare-and-swap, in the same ref transaction that drops
the task's snapshot refs; reset only the committed paths of the real index. Hooks never run: a stashing pre-commit hook would yank others' edits.
`git apply --cached` on a subset of -U0 hunks is not used: it can place a hunk on the
wrong line and still exit 0.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise import inbox
from hunkwise.coordinator import journal
from hunkwise.coordinator.validation import Assessment, newest_report, validate
from hunkwise.shared import git
from hunkwise.shared.errors import CheckFailed, StateRefused
from hunkwise.shared.hunks.commitplan import Plan, plan_commit  # noqa: F401 - re-exported
from hunkwise.shared.hunks.taskview import TreeView, active_tasks, sync_ranges, view
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, get_task, iso
from hunkwise.shared.state.models import (
    AuditState,
    AuditVerdict,
    CheckResult,
    Recheck,
    State,
    Task,
    TaskState,
    WorkReport,
)
from hunkwise.shared.work import recovery
from hunkwise.shared.work.recovery import kill_point

MAX_ATTEMPTS = 5
_TRAILER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*: \S")

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        AcceptJournal,
        AcceptResult,
        CommandResult,
        RecheckDoc,
    )


def commit_message(task: Task, report: WorkReport, message: str | None,
                   reviewers: list[str] | None = None) -> bytes:
    """The message, then the trailers: `Coord-Task`, `Coord-Session` (the worker's session)
    and one `Reviewed-by` per session whose approval the audit counted."""
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
    worker = report.session or task.session
    if worker:
        text += f"Coord-Session: {worker}\n"
    text += "".join(f"Reviewed-by: {s}\n" for s in reviewers or [])
    return text.encode()


def approving_sessions(ctx: Ctx, task: Task, revision: int) -> list[str]:
    """The sessions whose newest verdict on this revision approves, for the roles the
    audit counts as approved (verdicts are inbox reports, remote ones included)."""
    from hunkwise.shared.errors import CoordError
    from hunkwise.shared.state.context import session_role

    if AuditState.APPROVED not in task.audit.values():
        return []  # no role approved: no verdict can count, and no report is read for one
    newest: dict[str, str] = {}
    for e in inbox.find_task_reports(ctx.lay.inbox, task.id):
        try:
            r = inbox.read_report(e.path)
        except CoordError:
            continue
        if (not isinstance(r, AuditVerdict) or r.revision != revision or not r.session or not r.role
                or session_role(r.session) != r.role or task.audit.get(r.role) != AuditState.APPROVED):
            continue
        newest.pop(r.session, None)  # keeps the order of the newest verdicts
        newest[r.session] = r.verdict or ""
    return [s for s, v in newest.items() if v == "approve"]


@contextlib.contextmanager
def _recheck_checkout(ctx: Ctx, commit: str, written: AcceptJournal) -> Iterator[Path]:
    """A scratch checkout of `commit` (shared/work/checks.py): a temporary one is named in
    the journal before it exists, so a crash leaves nothing the next command does not remove."""
    from hunkwise.shared.work.checks import checkout

    def made(folder: Path) -> None:
        written["recheck"] = str(folder)
        journal.write(ctx, written)

    try:
        with checkout(ctx.repo, ctx.lay.root, commit, ctx.config.checkout, made=made) as where:
            yield where
    finally:
        if written["recheck"] is not None:
            written["recheck"] = None
            journal.write(ctx, written)


def _recheck(ctx: Ctx, task: Task, commit: str, revision: int,
             written: AcceptJournal) -> tuple[RecheckDoc, Recheck]:
    """Run the task's checks on `commit` (HEAD + exactly its changes); raise CheckFailed,
    after keeping the failed recheck with the task, when one fails."""
    from hunkwise.shared.work.checks import SetupFailed, failure_text, run_checks

    setup: CheckResult | None = None
    results: list[CheckResult] = []
    try:
        with _recheck_checkout(ctx, commit, written) as where:
            kill_point("accept-recheck")
            results = run_checks(where, task.checks, ctx.config.checks.timeout_seconds,
                                 label="recheck")
    except SetupFailed as e:
        setup = e.result
        kept = Recheck(passed=False, at=store.now(), revision=revision, commit=commit, setup=setup)
        _keep_recheck(ctx, task.id, kept)
        raise CheckFailed(f"{task.id}: recheck: {e.message}; nothing committed",
                          details=e.details) from None
    bad = [r for r in results if not r.passed]
    kept = Recheck(passed=not bad, at=store.now(), revision=revision, commit=commit,
                   checks=results)
    doc: RecheckDoc = {"ran": True, "passed": not bad,
                       "checks": [r.model_dump() for r in results]}  # type: ignore[misc]
    if bad:
        _keep_recheck(ctx, task.id, kept)
        raise CheckFailed(f"{task.id}: recheck on HEAD + the task's changes failed: "
                          + ", ".join(f"{r.command!r} (exit {r.exit_code})" for r in bad)
                          + "; nothing committed",
                          details="\n".join(recheck_lines(doc["checks"])) + "\n"
                          + failure_text(bad))
    return doc, kept


def recheck_lines(checks: list[CommandResult]) -> list[str]:
    """One line per rechecked command and its result."""
    return [f"recheck {'pass' if c['passed'] else 'FAIL'}  {c['duration_s']:7.2f}s  "
            f"{c['command']}" + ("" if c["passed"] else f"  (exit {c['exit_code']})")
            for c in checks]


def _keep_recheck(ctx: Ctx, task_id: str, kept: Recheck) -> None:
    with store.transaction(ctx.lay) as state:
        task = state.tasks.get(task_id)
        if task is not None:
            task.recheck = kept


def accept(ctx: Ctx, task_id: str, *, message: str | None, recheck: bool | None) -> AcceptResult:
    from hunkwise.inbox import delivery

    with store.locked(ctx.lay, timeout=journal.COMMIT_LOCK_WAIT_S, name="commit"):
        journal.settle(ctx)
        delivery.settle(ctx)  # a report its killed worker recorded but never published
        try:
            return _accept(ctx, task_id, message=message, recheck=recheck)
        finally:
            # Still there after an error: settle it now (a crash leaves it for the next
            # command instead).
            journal.settle(ctx)


def _accept(ctx: Ctx, task_id: str, *, message: str | None, recheck: bool | None) -> AcceptResult:
    """Validate, plan, write the journal, recheck, then move HEAD; from the top again
    while HEAD moves meanwhile."""
    do_recheck = ctx.config.accept.recheck if recheck is None else recheck
    for _attempt in range(MAX_ATTEMPTS):
        state, task = _reported(ctx, task_id)
        report, tv, assessed = _validated(ctx, state, task, do_recheck)
        assert assessed.selection is not None
        plan = plan_commit(ctx, tv, task_id, assessed.selection.changes)
        head = tv.snap.head
        parents = ("-p", head) if head else ()
        commit = git.run(ctx.repo, "commit-tree", plan.tree, *parents,
                         input=commit_message(task, report, message,
                                              approving_sessions(ctx, task, report.revision))
                         ).decode().strip()
        kill_point("accept-planned")
        written: AcceptJournal = {"task": task_id, "commit": commit, "head": head,
                                  "revision": report.revision, "paths": plan.paths,
                                  "recheck": None, "started": store.now()}
        journal.write(ctx, written)
        kill_point("accept-journal")
        recheck_doc: RecheckDoc = {"ran": False, "checks": []}
        kept: Recheck | None = None
        if do_recheck and task.checks:
            recheck_doc, kept = _recheck(ctx, task, commit, report.revision, written)
        _run_pre_commit_hook(ctx, task_id, head, plan.tree)
        if not _move_head(ctx, state, task_id, report.revision, commit, head, kept):
            continue  # HEAD moved since the snapshot: start over
        kill_point("accept-state-saved")
        warning = journal.reset_index_paths(ctx, plan.entries)
        kill_point("accept-index-reset")
        journal.archive_reports(ctx, task_id)
        kill_point("accept-finished")
        journal.path(ctx).unlink()
        journal.prune_provenance(ctx)
        notes = [f"{w.code}: {w.path + ': ' if w.path else ''}{w.detail}" for w in assessed.warnings]
        doc: AcceptResult = {"commit": commit, "task": task_id, "paths": plan.paths,
                             "revision": report.revision,
                             "warnings": notes + ([warning] if warning else []),
                             "recheck": recheck_doc}
        return doc
    raise StateRefused(f"HEAD kept moving while accepting {task_id} ({MAX_ATTEMPTS} tries); try again")


def _reported(ctx: Ctx, task_id: str) -> tuple[State, Task]:
    """The state and the task, refused unless it is reported and nothing is frozen; ranges
    re-mapped to HEAD are saved."""
    with store.locked(ctx.lay):
        state = store.load(ctx.lay)
        task = get_task(state, task_id, archive=ctx.lay)
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
    return state, task


def _validated(ctx: Ctx, state: State, task: Task,
               do_recheck: bool) -> tuple[WorkReport, TreeView, Assessment]:
    """The newest report, the tree and its validation; CheckFailed on any finding or when
    the task has nothing in the tree."""
    task_id = task.id
    _entry, report = newest_report(ctx, task_id, task=task)
    tv = view(ctx.repo, active_tasks(state))
    assessed = validate(ctx, state, task, report, tv)
    findings = assessed.findings
    if do_recheck and task.checks:
        # The checks the worker skipped run here, on HEAD + exactly the task's changes.
        findings = [f for f in findings if f.code != "checks-skipped"]
    if findings:
        codes = ", ".join(sorted({f.code for f in findings}))
        first = findings[0]
        raise CheckFailed(f"{task_id} is not valid ({codes}): "
                          f"{first.path + ': ' if first.path else ''}{first.detail}; nothing staged")
    assert assessed.selection is not None
    if not assessed.selection.changes:
        raise CheckFailed(f"{task_id} has no changes in the tree; nothing to commit: send it "
                          f"back (coord request-changes {task_id} --note N), or close it "
                          f"(coord reject {task_id} --note N)")
    return report, tv, assessed


def _run_pre_commit_hook(ctx: Ctx, task_id: str, head: str | None, tree: str) -> None:
    from hunkwise.coordinator.hooks import user_pre_commit

    hooked = user_pre_commit(ctx, head, tree)
    if hooked is not None and not hooked.passed:
        raise CheckFailed(f"{task_id}: the repository's pre-commit hook refused this commit "
                          f"(exit {hooked.exit_code}); nothing committed",
                          details=hooked.output_tail)


def _move_head(ctx: Ctx, state: State, task_id: str, revision: int, commit: str,
               head: str | None, kept: Recheck | None) -> bool:
    """Under the state lock, re-check the task, move HEAD and mark it accepted; False when
    HEAD moved since the snapshot (nothing done)."""
    with store.locked(ctx.lay):
        state = store.load(ctx.lay, reuse=state)  # unparsed when nobody wrote since
        if state.freeze is not None:
            raise StateRefused(f"coord accept {task_id} refused: a freeze began meanwhile")
        now_task = state.tasks[task_id]
        if now_task.state != TaskState.REPORTED or now_task.revision != revision:
            raise StateRefused(f"{task_id} changed while it was being accepted (now "
                               f"{now_task.state}, revision {now_task.revision}); nothing "
                               "committed")
        # One transaction moves HEAD (compare-and-swap) and drops the task's snapshot
        # refs: both happen, or neither does.
        moves = f"update HEAD {commit} {head or git.null_oid(ctx.repo)}\n" + "".join(
            f"delete {ref}\n" for ref in recovery.task_refs(now_task))
        rc, _ = git.run_rc(ctx.repo, "update-ref", "-m", f"coord accept {task_id}", "--stdin",
                           input=moves.encode(), env={"HUNKWISE_COORDINATOR": "1"})
        if rc != 0:
            if git.head(ctx.repo) == head:
                raise StateRefused(f"git refused to move HEAD for {task_id} (a "
                                   "reference-transaction hook?); nothing committed")
            return False
        kill_point("accept-head-moved")
        if kept is not None:
            now_task.recheck = kept
        journal.mark_accepted(ctx, state, task_id, commit)
        store.save(ctx.lay, state)
    return True
