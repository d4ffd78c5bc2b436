"""Validation: a report checked against the working tree, and which report that is.

Accept, `coord next` and `coord review` all validate (docs/design.md, "The review contract
and validation"): the task's changes are re-derived from the tree, attributed to grants
afresh, and compared with the report's. Findings block accept; warnings do not.
"""

from __future__ import annotations

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
    task_entries,
    view,
)
from hunkwise.shared.state.context import Ctx
from hunkwise.shared.state.models import (
    AuditState,
    AuditVerdict,
    Finding,
    Report,
    State,
    Task,
    WorkReport,
    report_path,
)

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import Validation


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
class Assessment:
    """A report checked against the tree: findings block accept, warnings do not."""

    findings: list[Finding]
    tv: TreeView | None
    selection: Selection | None = None
    warnings: list[Finding] = field(default_factory=list)


def validate(ctx: Ctx, state: State, task: Task, report: Report,
             tv: TreeView | None = None) -> Assessment:
    """Every finding of SPEC.md for this report against the tree as it is now."""
    findings = _audit_findings(task)
    if isinstance(report, AuditVerdict):
        return Assessment(findings, tv)
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


def _audit_findings(task: Task) -> list[Finding]:
    """An audit some role has not answered, or answered asking for changes, blocks."""
    findings: list[Finding] = []
    for role, state in sorted(task.audit.items()):
        if state == AuditState.PENDING:
            findings.append(Finding(code="audit-pending", detail=f"audit by {role} not answered"))
        elif state == AuditState.CHANGES:
            findings.append(Finding(code="audit-changes", detail=f"{role} asked for changes"))
    return findings


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
    import difflib

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
           report: WorkReport) -> Assessment:
    """The report's changes against the tree's: what the task may commit, and why not.

    Pure but for reading blobs: the randomized attribution tests drive it directly.
    """
    covered = _Cover(task)
    findings = _outside_grants(task, report, covered)
    warnings = _conflicts(tv, task)
    claims = {(e.path, h.sha256) for e in report.changes for h in e.hunks}
    sel = select(tv, task, claims)
    contested, unclaimed = _ambiguous(tasks, task, sel)
    findings += contested
    warnings += unclaimed
    for path, _ident in sel.inherited:
        warnings.append(Finding(code="inherited", path=path,
                                detail=f"a change in {task.id}'s grant was there before it "
                                       "started; it is not committed with it (coord discard "
                                       "removes it)"))
    findings += _carried(repo, tv, tasks, task, sel)
    findings += _differences(repo, tv, task, sel, report, covered)
    return Assessment(findings, tv, sel, warnings)


def _outside_grants(task: Task, report: WorkReport, covered: _Cover) -> list[Finding]:
    """A path the report lists that none of the task's grants covers."""
    findings: list[Finding] = []
    for entry in report.changes:
        for p in filter(None, (entry.path, entry.old_path)):
            if not covered(p):
                findings.append(Finding(code="outside-grant", path=p,
                                        detail=f"the report lists a change to {p}, which "
                                               f"{task.id} holds no grant on"))
    return findings


def _conflicts(tv: TreeView, task: Task) -> list[Finding]:
    """A change that crosses from the task's grant into another's (or into no grant):
    never committed, a warning."""
    warnings: list[Finding] = []
    for ch, h, tids in tv.attribution.conflicts:
        if task.id in tids:
            where = f" lines {h.old_start}-{h.old_end}" if h else ""
            others = [t for t in tids if t != task.id]
            who = f" and {', '.join(others)}" if others else " and no grant on its other lines"
            warnings.append(Finding(code="conflict", path=report_path(ch.path),
                                    detail=f"a change at{where or ' the whole file'} falls "
                                           f"under {task.id}{who}; it is never staged"))
    return warnings


def _ambiguous(tasks: dict[str, Task], task: Task,
               sel: Selection) -> tuple[list[Finding], list[Finding]]:
    """Changes that could be this task's or another's: (findings, warnings). One the report
    claims blocks while another task may still claim it; one it does not claim is a
    warning when another task's report claims it, else it blocks until one report does."""
    findings: list[Finding] = []
    warnings: list[Finding] = []
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
    return findings, warnings


def _differences(repo: Path, tv: TreeView, task: Task, sel: Selection, report: WorkReport,
                 covered: _Cover) -> list[Finding]:
    """Per path, the task's changes in the tree against the report's, by identity."""
    findings: list[Finding] = []
    tree_ids = identities(task_entries(repo, tv, task, sel))
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
    return findings


def validation_doc(v: Assessment) -> Validation:
    return {"ok": not v.findings, "findings": [f.public() for f in v.findings],
            "warnings": [f.public() for f in v.warnings]}


# ---- which report is validated ------------------------------------------------------------------

def read_or_quarantine(entry: inbox.Entry) -> Report | None:
    """The entry's report, or None once it is quarantined (unreadable, or its content names
    another task or revision than its file name)."""
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


def handed_out(task: Task) -> int:
    """The newest revision the state handed out for the task (a review verdict shares the
    work's revision, 1 before any work report)."""
    return max(task.revision, 1)


def newest_report(ctx: Ctx, task_id: str, found: list[inbox.Entry] | None = None,
                  task: Task | None = None) -> tuple[inbox.Entry, WorkReport]:
    """The task's newest work report (audit verdicts are reports too, but not of work).

    With the task's state, only revisions the state handed out count, and of the newest
    one the file the state recorded.
    """
    found = list(inbox.find_task_reports(ctx.lay.inbox, task_id) if found is None else found)
    if task is not None:
        found = [e for e in found if e.revision <= handed_out(task)]
        found.sort(key=lambda e: (e.revision, e.name == task.last_report, e.time_ns))
    while found:
        e = found.pop()
        report = read_or_quarantine(e)
        if isinstance(report, WorkReport):
            return e, report
    raise UsageError(f"task {task_id} has no readable report in the inbox")
