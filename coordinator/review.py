"""Reading the inbox at safe checkpoints: `coord inbox`, `coord next`, `coord review`.

A report is a claim made by a process the coordinator does not trust; validation compares
it with the real diff of the working tree, attributed to grants afresh.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise import inbox
from hunkwise.coordinator.validation import (
    handed_out,
    newest_report,
    read_or_quarantine,
    validate,
    validation_doc,
)
from hunkwise.shared.hunks.taskview import sync_ranges
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, get_task
from hunkwise.shared.state.models import AuditVerdict, Report, State, TaskState

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        InboxResult,
        InboxRow,
        NextReport,
        NextResult,
        ReviewResult,
    )


def report_summary(report: Report, age_s: float | None = None) -> InboxRow:
    passed = sum(1 for c in report.checks if c.passed)
    row: InboxRow = {
        "task_id": report.task_id, "kind": "verdict" if isinstance(report, AuditVerdict) else "report",
        "status": (report.verdict or report.status) if isinstance(report, AuditVerdict)
        else report.status,
        "role": report.role, "title": report.title,
        "checks_passed": passed, "checks_total": len(report.checks),
        "created_at": report.created_at, "revision": report.revision,
        "session": report.session,
    }
    if age_s is not None:
        row["age_s"] = round(age_s, 1)
    return row


def _quarantine_odd(paths: list[Path]) -> None:
    for p in paths:
        if p.is_file():
            inbox.quarantine(p, f"{p.name}: not a report file name")


def _forged(state: State, e: inbox.Entry, report: Report | None = None) -> str | None:
    """Why an entry is no report the state handed out (None: it may be).

    Revisions come from the state, under its lock, before the report is written: a higher
    one was never handed out (a hand-dropped `r99 failed` must not supersede every genuine
    report after it). Once the state recorded a delivery, another file of that revision
    is not it.
    """
    task = state.tasks.get(e.task_id)
    if task is None:
        return None  # unknown task: quarantined once read, with its own reason
    if e.revision > handed_out(task):
        return (f"{e.name}: revision {e.revision} was never handed out for {e.task_id} "
                f"(the state is at revision {task.revision})")
    if report is not None and report.kind == "task" and task.last_report \
            and e.revision == task.revision and e.name != task.last_report \
            and task.state != TaskState.IN_PROGRESS:
        return f"{e.name}: the state recorded {task.last_report} as revision {e.revision}"
    return None


def _superseded(state: State, e: inbox.Entry, queue: list[inbox.Entry]) -> bool:
    """Is a newer revision of the same task known: delivered (state) or readable in the queue?

    The revision in a file name is only a hint: a newer-looking name supersedes `e` only
    once its content reads as a valid report of a revision the state handed out; garbage
    and forgeries are quarantined on the way.
    """
    task = state.tasks.get(e.task_id)
    if task is not None and e.revision < task.revision:
        return True
    newer = sorted((o for o in queue if o.task_id == e.task_id and o.revision > e.revision),
                   key=lambda o: o.revision, reverse=True)
    for o in newer:
        why = _forged(state, o)
        if why:
            inbox.quarantine(o.path, why)
            continue
        report = read_or_quarantine(o)
        if report is None:
            continue
        why = _forged(state, o, report)
        if why:
            inbox.quarantine(o.path, why)
            continue
        return True
    return False


def _admit(state: State, e: inbox.Entry) -> Report | None:
    """Read an entry that is neither forged nor superseded; quarantine what is bad."""
    why = _forged(state, e)
    if why:
        inbox.quarantine(e.path, why)
        return None
    report = read_or_quarantine(e)
    if report is None:
        return None
    why = _forged(state, e, report)
    if why:
        inbox.quarantine(e.path, why)
        return None
    return report


def pending(ctx: Ctx) -> list[tuple[inbox.Entry, Report]]:
    """Pending reports, oldest first; superseded, unreadable and forged ones are moved aside."""
    entries, odd = inbox.entries(ctx.lay.inbox, "new")
    # Read after the listing: a report reaches new/ only once the state recorded it, so
    # the state read now knows every revision listed.
    state = store.load(ctx.lay)
    _quarantine_odd(odd)
    out: list[tuple[inbox.Entry, Report]] = []
    for e in entries:
        if not e.path.exists():
            continue  # quarantined while checking another entry
        if _forged(state, e):
            inbox.quarantine(e.path, _forged(state, e) or "")
            continue
        if _superseded(state, e, entries):
            inbox.archive(e)
            continue
        report = _admit(state, e)
        if report is not None and report.task_id not in state.tasks:
            # No such task here (a dropped-in file, a task deleted by hand): the queue must
            # not show what no command can act on. `coord next` says the same.
            inbox.quarantine(e.path, f"{e.name}: report for unknown task {report.task_id}")
            continue
        if report is not None:
            out.append((e, report))
    return out


def list_inbox(ctx: Ctx) -> InboxResult:
    from hunkwise.inbox import delivery

    delivery.settle(ctx)
    found = pending(ctx)
    # Maildir's rule: what a killed writer left in tmp/ goes after 36 hours (a report the
    # state recorded was published by `pending` first).
    inbox.sweep_tmp(ctx.lay.inbox)
    now = time.time()
    return {"reports": [report_summary(r, now - e.time_ns / 1e9) for e, r in found]}


def next_report(ctx: Ctx) -> NextResult:
    """The safe checkpoint: take the oldest pending report, validate it, archive it.

    A report is served once: it is taken out of `new/` (a rename, which only one of two
    concurrent `coord next` can make) before it is validated.
    """
    from hunkwise.coordinator import journal
    from hunkwise.inbox import delivery

    journal.repair(ctx)
    delivery.settle(ctx)
    while True:
        entries, odd = inbox.entries(ctx.lay.inbox, "new")
        _quarantine_odd(odd)
        if not entries:
            return {"next": None, "pending": 0}
        e = entries[0]
        state = store.load(ctx.lay)
        sync_ranges(ctx.repo, state)  # in memory only: serving a report never writes the state
        if not e.path.exists():
            continue  # taken by another coord next meanwhile
        if _forged(state, e) is None and _superseded(state, e, entries):
            inbox.archive(e)
            continue
        report = _admit(state, e)
        if report is None:
            continue
        task = state.tasks.get(report.task_id)
        if task is None:
            inbox.quarantine(e.path, f"{e.name}: report for unknown task {report.task_id}")
            continue
        ho = task.handover
        from hunkwise.shared.machines.handover import strays

        if report.kind == "task" and ho is not None and ho.pending is not None \
                and ho.pending[0] == report.revision and ho.brought < report.revision \
                and not strays(task, report):
            # Delivered on another machine: its changes come into this tree first, in place
            # of what the tree holds of the task (refused, nothing written, lines named).
            # One listing paths outside the task's grants is served as it is, unwritten:
            # its validation names them (it must not hold up the queue behind it).
            from hunkwise.coordinator.handback import bring_back

            bring_back(ctx, task.id, report)
            state = store.load(ctx.lay)
            task = state.tasks[task.id]
        if inbox.take(e) is None:
            continue  # another coord next took it first
        assessed = validate(ctx, state, task, report)
        # Not parsed again when nobody wrote since (its ranges, re-mapped to HEAD in memory,
        # are then saved with it, as any command's that writes).
        with store.transaction(ctx.lay, reuse=state) as st:
            t = st.tasks.get(task.id)
            if t is not None:
                t.served_revision = max(t.served_revision, min(report.revision, handed_out(t)))
        from hunkwise.shared.hunks.places import claimed_files

        served: NextReport = {"report": report.public(), "validation": validation_doc(assessed),
                              "task": task.public(), "audit": dict(task.audit)}
        if assessed.selection is not None:
            served["claimed"] = claimed_files(assessed.selection.changes)
        if assessed.tv is not None:
            from hunkwise.shared.hunks.places import places

            served["places"] = places(ctx.repo, [task], assessed.tv.changes,
                                      assessed.tv.snap.tree)[task.id]
        return {"next": served, "pending": max(0, len(entries) - 1)}


def review(ctx: Ctx, task_id: str) -> ReviewResult:
    from hunkwise.inbox import delivery

    delivery.settle(ctx)
    state = store.load(ctx.lay)
    sync_ranges(ctx.repo, state)  # in memory only: reading never writes the state
    task = get_task(state, task_id)
    _e, report = newest_report(ctx, task_id, task=task)
    return {**validation_doc(validate(ctx, state, task, report)), "task": task_id,
            "revision": report.revision}


# ---- what `coord next` prints ------------------------------------------------------------------

def next_text(d: NextResult, findings: str) -> str:
    """A served report in little context: only what the coordinator does not already know.

    The task's own words (its expectation, its checks' commands, its brief) are the
    coordinator's: they are not echoed back. What is left is the worker's summary, what it
    left unfinished and why it stopped, the checks' results (a command only when it
    failed), what accept would commit per file in the working tree's lines now, and the
    findings (`findings`, as the CLI renders them). `coord next --full` prints the whole
    review contract."""
    from hunkwise.shared.hunks.places import claimed_text
    from hunkwise.shared.output import clip, one_line

    n = d["next"]
    assert n is not None
    r = n["report"]
    o = one_line
    if r.get("kind") == "review":
        lines = [f"{o(r['task_id'])} r{r['revision']} audit by {o(r['role'])}: {o(r['verdict'])}",
                 f"  notes: {o(r['summary'])}"]
    else:
        lines = [f"{o(r['task_id'])} r{r['revision']} [{o(r['status'])}] {clip(o(r['title']), 60)}"]
        if r.get("summary"):
            lines.append(f"  summary: {o(r['summary'])}")
        if r.get("reason"):
            lines.append(f"  reason: {o(r['reason'])}")
        lines += [f"  unfinished: {o(u)}" for u in r["unfinished"]]
        checks = r["checks"]
        failed = [c for c in checks if not c["passed"]]
        if r.get("checks_skipped"):
            lines.append("  checks: SKIPPED (--no-run-checks)")
        elif checks:
            lines.append(f"  checks: {len(checks) - len(failed)}/{len(checks)} passed")
        for c in failed:
            tail = [t for t in c["output_tail"].split("\n") if t.strip()][-3:]
            lines.append(f"  FAILED (exit {c['exit_code']}): {o(c['command'])}")
            lines += [f"    | {clip(o(t), 160)}" for t in tail]
        claimed = n.get("claimed")
        if claimed is not None:
            lines.append("  commits (tree lines now):" if claimed else "  commits: nothing")
            lines += [f"    {o(t)}" for t in claimed_text(claimed)]
        lines += [f"  overlap: {o(ov['path'])}: {o(ov['note'])}" for ov in r["overlaps"][:5]]
        lines.append(f"  commit: {o(r['proposed_commit']['subject'])}")
    audit = n.get("audit") or {}
    if audit:
        lines.append("audit: " + ", ".join(f"{role} {v}" for role, v in sorted(audit.items())))
    lines.append(findings)
    lines.append(f"({d['pending']} more pending; coord next --full shows the whole contract)")
    return "\n".join(lines)
