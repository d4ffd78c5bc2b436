"""Reading the inbox at safe checkpoints: `coord inbox`, `coord next`, `coord review`.

A report is a claim made by a process the coordinator does not trust; validation compares
it with the real diff of the working tree, attributed to grants afresh.
"""

from __future__ import annotations

import difflib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise import inbox
from hunkwise.shared import git
from hunkwise.shared.errors import UsageError
from hunkwise.shared.hunks.globs import glob_matches, grant_covers
from hunkwise.shared.hunks.taskview import (
    Selection,
    TreeView,
    active_tasks,
    contest_lines,
    identities,
    may_still_claim,
    select,
    sync_ranges,
    task_entries,
    view,
)
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, get_task
from hunkwise.shared.state.models import (
    AuditVerdict,
    Finding,
    Report,
    State,
    Task,
    TaskState,
    WorkReport,
    report_path,
)

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        InboxResult,
        InboxRow,
        NextReport,
        NextResult,
        ReviewResult,
        Validation,
    )


def staged_text(staged: list[str], most: int = 20) -> str:
    """Every staged path (both sides of a staged rename are listed), up to `most`."""
    more = f" and {len(staged) - most} more" if len(staged) > most else ""
    return ", ".join(staged[:most]) + more


class _Cover:
    """Which paths a task's grants cover: a set lookup for ranges, matching for globs."""

    def __init__(self, task: Task) -> None:
        self.ranges = {g.path for g in task.grants if g.kind != "glob"}
        self.globs = [g.path for g in task.grants if g.kind == "glob"]

    def __call__(self, path: str) -> bool:
        return path in self.ranges or any(glob_matches(g, path) for g in self.globs)


@dataclass
class Verdict:
    """A report checked against the tree: findings block accept, warnings do not."""

    findings: list[Finding]
    tv: TreeView | None
    selection: Selection | None = None
    warnings: list[Finding] = field(default_factory=list)


def validate(ctx: Ctx, state: State, task: Task, report: Report,
             tv: TreeView | None = None) -> Verdict:
    """Every finding of SPEC.md for this report against the tree as it is now."""
    findings: list[Finding] = []
    for role, verdict in sorted(task.audit.items()):
        if verdict == "pending":
            findings.append(Finding(code="audit-pending", detail=f"audit by {role} not answered"))
        elif verdict == "changes":
            findings.append(Finding(code="audit-changes", detail=f"{role} asked for changes"))
    if isinstance(report, AuditVerdict):
        return Verdict(findings, tv)
    if tv is None:
        tv = view(ctx.repo, active_tasks(state))
    if report.task_id != task.id:
        findings.append(Finding(code="missing-change", detail=f"report is for {report.task_id}"))
    if report.status != "done":
        why = f": {report.reason}" if report.reason else ""
        findings.append(Finding(code="not-done", detail=f"worker reported {report.status}{why}"))
    failed = [c.command for c in report.checks if not c.passed]
    if failed:
        findings.append(Finding(code="checks-failed", detail="failed: " + "; ".join(failed)))
    if report.checks_skipped:
        findings.append(Finding(code="checks-skipped",
                                detail="the worker delivered with --no-run-checks; accept "
                                       "--recheck runs the task's checks before committing"))
    staged = git.index_dirty(ctx.repo)
    if staged:
        findings.append(Finding(code="index-dirty", path=staged[0],
                                detail=f"{len(staged)} path(s) staged in the index by someone "
                                       f"else: {staged_text(staged)}; unstage them (git "
                                       "restore --staged -- PATH...)"))
    if state.freeze is not None:
        findings.append(Finding(code="frozen", detail="a release freeze is in force"))
    v = assess(ctx.repo, tv, state.tasks, task, report)
    v.findings[:0] = findings
    return v


def _carried(repo: Path, tv: TreeView, tasks: dict[str, Task], task: Task,
             sel: Selection) -> list[Finding]:
    """A file the task adds whole (a rename by plain `mv`, a copy, a rewrite) that holds
    another active task's uncommitted edit of a file deleted in the tree: committing it
    would commit that edit too. Found by content: the added file keeps most of the deleted
    file's lines, and differs from them inside the other task's grants."""
    from hunkwise.shared.hunks.diff import blob_hunks, split_lines
    from hunkwise.shared.hunks.ownership import range_relation
    from hunkwise.shared.state.models import Grant

    added = [c for c in sel.changes if c.status == "A" and not c.binary]
    gone = [c for c in tv.changes if c.status == "D" and not c.binary]
    if not added or not gone:
        return []
    holders: dict[str, list[tuple[Task, Grant]]] = {}
    for t in tasks.values():
        if t.active and t.id != task.id:
            for g in t.grants:
                for c in gone:
                    if grant_covers(g, c.path):
                        holders.setdefault(c.path, []).append((t, g))
    gone = [c for c in gone if c.path in holders]
    if not gone:
        return []
    blobs = git.cat_blobs(repo, [c.new_oid for c in added] + [c.old_oid for c in gone])
    out: list[Finding] = []
    for a in added:
        new = split_lines(blobs[a.new_oid])
        for d in gone:
            old = split_lines(blobs[d.old_oid])
            if not old or new == old:
                continue
            common = sum(n for _i, _j, n in difflib.SequenceMatcher(
                None, old, new, autojunk=False).get_matching_blocks())
            if common * 2 < len(old):
                continue  # not a copy of that file
            hunks = blob_hunks(repo, d.old_oid, a.new_oid)
            for other, g in holders[d.path]:
                hit = [h for h in hunks
                       if g.kind == "glob" or range_relation(g, h) != "out"]  # type: ignore[arg-type]
                if hit:
                    lines = ", ".join(f"{h.old_start}-{h.old_end}" for h in hit[:3])
                    out.append(Finding(
                        code="conflict", path=report_path(a.path),
                        detail=f"{a.path} holds {d.path} (deleted in the tree) with a change "
                               f"inside {other.id}'s grant ({d.path} lines {lines}), which "
                               f"is {other.id}'s uncommitted edit: committing {a.path} now "
                               f"would commit it. Accept or reject {other.id} first, or put "
                               f"{d.path}'s lines as HEAD has them into {a.path}"))
    return out


def assess(repo: Path, tv: TreeView, tasks: dict[str, Task], task: Task,
           report: WorkReport) -> Verdict:
    """The report's changes against the tree's: what the task may commit, and why not.

    Pure but for reading blobs: the randomized attribution tests drive it directly.
    """
    findings: list[Finding] = []
    warnings: list[Finding] = []
    covered = _Cover(task)
    for entry in report.changes:
        for p in filter(None, (entry.path, entry.old_path)):
            if not covered(p):
                findings.append(Finding(code="outside-grant", path=p,
                                        detail=f"the report lists a change to {p}, which "
                                               f"{task.id} holds no grant on"))
    for ch, h, tids in tv.attribution.conflicts:
        if task.id in tids:
            where = f" lines {h.old_start}-{h.old_end}" if h else ""
            others = [t for t in tids if t != task.id]
            who = f" and {', '.join(others)}" if others else " and no grant on its other lines"
            warnings.append(Finding(code="conflict", path=report_path(ch.path),
                                    detail=f"a change at{where or ' the whole file'} falls "
                                           f"under {task.id}{who}; it is never staged"))
    claims = {(e.path, h.sha256) for e in report.changes for h in e.hunks}
    sel = select(tv, task, claims)
    for amb in sel.claimed_ambiguous:
        path = report_path(amb.change.path)
        for other_id in amb.tasks:
            other = tasks.get(other_id)
            if other_id == task.id or other is None:
                continue
            why = may_still_claim(other, path, amb.canon)
            if why:
                findings.append(Finding(
                    code="ambiguous", path=path,
                    detail=f"lines {contest_lines(amb).rpartition(':')[2]}: "
                           f"{amb.reason or 'they could be either task' + chr(39) + 's'}; {why}. Nothing of "
                           "it is committed until one task's report stops claiming it, or a "
                           "grant is narrowed"))
    for amb in sel.unclaimed_ambiguous:
        path = report_path(amb.change.path)
        others = [t for t in amb.tasks if t != task.id]
        if any(tasks.get(t) is not None and amb.canon in tasks[t].claimed.get(path, [])
               for t in others):
            warnings.append(Finding(code="ambiguous", path=path,
                                    detail=f"lines {contest_lines(amb).rpartition(':')[2]} are "
                                           f"claimed by {', '.join(others)}, not by {task.id}: "
                                           "not committed with it"))
            continue
        findings.append(Finding(
            code="ambiguous", path=path,
            detail=f"lines {contest_lines(amb).rpartition(':')[2]}: "
                   f"{amb.reason or 'they could be ' + ' or '.join(amb.tasks) + chr(39) + 's'}; "
                   f"neither report says whose they are (worker done {task.id} --claim or "
                   "--disclaim them); nothing is committed until one does"))
    for path, _ident in sel.inherited:
        warnings.append(Finding(code="inherited", path=path,
                                detail=f"a change in {task.id}'s grant was there before it "
                                       "started; it is not committed with it (coord discard "
                                       "removes it)"))
    findings += _carried(repo, tv, tasks, task, sel)
    tree_entries = task_entries(repo, tv, task, sel)
    tree_ids = identities(tree_entries)
    rep_ids = identities([e for e in report.changes if covered(e.path)])
    for path in sorted(set(tree_ids) | set(rep_ids)):
        t, r = tree_ids.get(path, Counter()), rep_ids.get(path, Counter())
        if t == r:
            continue
        if t and r:
            findings.append(Finding(code="stale-report", path=path,
                                    detail="the task's changes in the tree differ from the "
                                           "report (content or position); ask for a new "
                                           "report"))
        elif t:
            findings.append(Finding(code="unreported-change", path=path,
                                    detail=f"{sum(t.values())} change(s) of {task.id} in the "
                                           "tree are not in the report"))
        else:
            findings.append(Finding(code="missing-change", path=path,
                                    detail=f"the report lists {sum(r.values())} change(s) the "
                                           "tree does not hold"))
    return Verdict(findings, tv, sel, warnings)


def validation_doc(v: Verdict) -> Validation:
    return {"ok": not v.findings, "findings": [f.public() for f in v.findings],
            "warnings": [f.public() for f in v.warnings]}


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


def _read_or_quarantine(entry: inbox.Entry) -> Report | None:
    try:
        report = inbox.read_report(entry.path)
    except UsageError as e:
        inbox.quarantine(entry.path, e.message)
        return None
    if report.task_id != entry.task_id or report.revision != entry.revision:
        inbox.quarantine(entry.path, f"{entry.name}: name says {entry.task_id} r{entry.revision}, "
                                     f"content says {report.task_id} r{report.revision}")
        return None
    return report


def _quarantine_odd(paths: list[Path]) -> None:
    for p in paths:
        if p.is_file():
            inbox.quarantine(p, f"{p.name}: not a report file name")


def _limit(task: Task) -> int:
    """The newest revision the state handed out for the task (a review verdict shares the
    work's revision, 1 before any work report)."""
    return max(task.revision, 1)


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
    if e.revision > _limit(task):
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
        report = _read_or_quarantine(o)
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
    report = _read_or_quarantine(e)
    if report is None:
        return None
    why = _forged(state, e, report)
    if why:
        inbox.quarantine(e.path, why)
        return None
    return report


def pending(ctx: Ctx) -> list[tuple[inbox.Entry, Report]]:
    """Pending reports, oldest first; superseded, unreadable and forged ones are moved aside."""
    from hunkwise.inbox import delivery

    delivery.settle(ctx)
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
    from hunkwise.coordinator.accept import repair
    from hunkwise.inbox import delivery

    repair(ctx)
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
        verdict = validate(ctx, state, task, report)
        # Not parsed again when nobody wrote since (its ranges, re-mapped to HEAD in memory,
        # are then saved with it, as any command's that writes).
        with store.transaction(ctx.lay, reuse=state) as st:
            t = st.tasks.get(task.id)
            if t is not None:
                t.served_revision = max(t.served_revision, min(report.revision, _limit(t)))
        from hunkwise.shared.hunks.places import claimed_files

        served: NextReport = {"report": report.public(), "validation": validation_doc(verdict),
                              "task": task.public(), "audit": dict(task.audit)}
        if verdict.selection is not None:
            served["claimed"] = claimed_files(verdict.selection.changes)
        if verdict.tv is not None:
            from hunkwise.shared.hunks.places import places

            served["places"] = places(ctx.repo, [task], verdict.tv.changes,
                                      verdict.tv.snap.tree)[task.id]
        return {"next": served, "pending": max(0, len(entries) - 1)}


def newest_report(ctx: Ctx, task_id: str, found: list[inbox.Entry] | None = None,
                  task: Task | None = None) -> tuple[inbox.Entry, WorkReport]:
    """The task's newest work report (audit verdicts are reports too, but not of work).

    With the task's state, only revisions the state handed out count, and of the newest
    one the file the state recorded.
    """
    found = list(inbox.find_task_reports(ctx.lay.inbox, task_id) if found is None else found)
    if task is not None:
        found = [e for e in found if e.revision <= _limit(task)]
        found.sort(key=lambda e: (e.revision, e.name == task.last_report, e.time_ns))
    while found:
        e = found.pop()
        report = _read_or_quarantine(e)
        if isinstance(report, WorkReport):
            return e, report
    raise UsageError(f"task {task_id} has no readable report in the inbox")


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
