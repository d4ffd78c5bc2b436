"""`worker start`, `worker done`, `worker blocked`, `worker failed`.

A worker never stages or commits. Its last act on a task is to deliver a report into the
inbox; the coordinator reads it at its own checkpoint.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from hunkwise.shared.errors import CheckFailed, StateRefused, UsageError
from hunkwise.shared.git import ref_component
from hunkwise.shared.hunks.snapshot import Snapshot
from hunkwise.shared.hunks.taskview import (
    Selection,
    TreeView,
    active_tasks,
    decide_boundaries,
    identities_of_selection,
    patch_digest,
    select,
    sync_ranges,
    task_entries,
    view,
)
from hunkwise.shared.state import store
from hunkwise.shared.state.context import (
    Ctx,
    check_session,
    env_session,
    get_task,
    new_session,
    refuse_if_frozen,
)
from hunkwise.shared.state.models import (
    DISCLAIMED,
    AuditState,
    ChangeEntry,
    Checkpoint,
    CheckResult,
    Claim,
    Overlap,
    ProposedCommit,
    ReportStatus,
    Saved,
    Signal,
    SignalType,
    State,
    Task,
    TaskState,
    WorkReport,
    report_path,
)
from hunkwise.shared.state.signals import send
from hunkwise.shared.work import recovery
from hunkwise.shared.work.checks import TaskCheck, failure_text, isolated_text, task_checks

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        CheckRunResult,
        CommandResult,
        DeliverResult,
        SignalDoc,
        StartResult,
)

STARTABLE = (TaskState.ASSIGNED, TaskState.CHANGES_REQUESTED)


def _live_holder(task: Task, now: float) -> str | None:
    c = task.claim
    if c is not None and not c.stale(now):
        return c.session
    return None


def _resolve_session(task: Task, session: str | None) -> str | None:
    s = session or env_session()
    if s is not None:
        check_session(s)
        return s
    return task.claim.session if task.claim else task.session


def _check_holder(task: Task, session: str | None, now: float) -> None:
    holder = _live_holder(task, now)
    if holder is not None and session is not None and holder != session:
        raise StateRefused(f"{task.id} is claimed by live session {holder}")


def _may_take(task: Task, sess: str | None) -> None:
    """A handed-off task waits for its target."""
    from hunkwise.shared.state.signals import addressed_to

    target = task.reserved_for
    if target is None:
        return
    if sess is None:
        raise StateRefused(f"{task.id} was handed off to {target}; start it with that --session")
    probe = Signal(id="probe", sender="", to=target, type=SignalType.HANDOFF, about="",
                   created_at=0.0)
    if not addressed_to(probe, sess):
        raise StateRefused(f"{task.id} was handed off to {target}, not {sess}")


def start(ctx: Ctx, task_id: str, *, session: str | None, role: str) -> StartResult:
    ttl = ctx.config.claims.ttl_seconds
    # What lies in the task's grants before it starts is not its work: read the tree before
    # taking the lock (nothing slow under it), record it with the claim.
    # Only a task's first start takes the baseline: after changes were requested, a
    # deferral or a recovery, what it left in the tree is still its own work.
    state0 = store.load(ctx.lay)
    task0 = get_task(state0, task_id)
    first = task0.state == TaskState.ASSIGNED and task0.session is None and not task0.revision
    arriving = _arriving(ctx, state0, task0)
    base, snap0 = _baseline(ctx, state0, task0) if first or arriving else (None, None)
    if base is not None and arriving is not None and arriving.saved is not None:
        # What this tree held in the grants before the handed-over changes arrive is this
        # machine's, not the task's: only the handed-over changes themselves are its own.
        base = _less(base, arriving.saved)
    placed = _take_handed_edits(ctx, state0, task0, session)
    with store.transaction(ctx.lay) as state:
        task, sess, now = _claim(state, task_id, session, role, ttl, base,
                                 handed_back=placed is not None)
        state.sessions[sess] = now
        sync_ranges(ctx.repo, state)
        task.reserved_for = None
        shown, sigs = _resume(state, task_id, sess)
        brief = task.public()
    notes = [n.public() for n in task.notes]
    # Record the work in the tree, or say that what was recorded is gone.
    # The baseline's snapshot serves (a read of the tree a moment ago, as any record is)
    # unless handed-over changes were put into the tree since.
    snap = snap0 if placed is None else None
    if snap is None and any(g.kind != "glob" for g in task.grants):
        # Where its line grants stand is read from the tree anyway: one snapshot serves
        # the record and the places (a re-start has no baseline's).
        from hunkwise.shared.errors import CoordError
        from hunkwise.shared.hunks import snapshot

        try:
            snap = snapshot.take(ctx.repo)
        except CoordError:  # a tree changing under the read: each then reads on its own
            snap = None
    lost = record(ctx, [task_id], snap).get(task_id)
    if lost is not None:
        notes.insert(0, {"at": store.now(), "by": "hunkwise", "kind": "lost",
                         "text": recovery.lost_message(task_id, lost)})
    if placed is not None:
        notes.insert(0, {"at": store.now(), "by": "hunkwise", "kind": "handoff",
                         "text": f"the handed-over changes from {placed[1]} were put into this "
                                 f"tree: {', '.join(placed[0]) or 'all were here already'}"})
    from hunkwise.shared.hunks.places import tree_places

    # Read where the grants stand from the baseline's snapshot when it serves, as `record`
    # does just above; else from a new one.
    where = tree_places(ctx.repo, [task], snap)[task.id]
    return {"checkpoint": shown.public() if shown else None, "task": brief, "session": sess,
            "placed": placed[0] if placed is not None else None,
            "signals": sigs, "expect": task.expect, "notes": notes,
            "lost": {"paths": lost.paths, "restore": f"coord restore {task_id}"} if lost else None,
            "brief": task.brief, "places": where}


def _claim(state: State, task_id: str, session: str | None, role: str, ttl: int,
           base: dict[str, list[str]] | None, *, handed_back: bool) -> tuple[Task, str, float]:
    """Under the lock: the task claimed by the session starting it (a new session when none
    is named), or its own claim's heartbeat beaten; refused when it is frozen, held by a
    live claim, or in no state to start. The task, the session and the time."""
    task = get_task(state, task_id)
    refuse_if_frozen(state, f"worker start {task_id}")
    if task.held_until_thaw:
        raise StateRefused(f"{task_id} belongs to batch {task.batch}, which opens at coord thaw")
    now = store.now()
    sess = session or env_session()
    if sess is not None:
        check_session(sess)
    holder = _live_holder(task, now)
    own_claim = task.claim is not None and task.claim.session == sess
    if task.state == TaskState.IN_PROGRESS and own_claim:
        assert task.claim is not None
        task.claim = task.claim.model_copy(update={"heartbeat": now})
    elif task.state == TaskState.IN_PROGRESS and holder is not None:
        raise StateRefused(f"{task_id} is claimed by live session {holder}; a live claim is "
                           "never taken over")
    elif task.state == TaskState.REPORTED and _amending(task, sess):
        raise StateRefused(f"{task_id} is reported and its report r{task.revision} is still "
                           f"pending: edit, then run worker done {task_id} again to "
                           "deliver a new revision that supersedes it")
    elif task.state not in STARTABLE:
        hint = " (coord recover frees a stale claim)" if task.state == TaskState.IN_PROGRESS else ""
        why = (_not_reportable(task) if task.state != TaskState.IN_PROGRESS else
               f"{task_id} is {task.state}; only assigned or changes_requested tasks can "
               f"be started{hint}")
        raise StateRefused(why)
    else:
        if holder is not None and holder != sess:
            raise StateRefused(f"{task_id} is claimed by live session {holder}")
        if sess is None and task.reserved_for and task.reserved_for.startswith("sess-"):
            sess = task.reserved_for
        if sess is None:
            sess = new_session(state, role)
        _may_take(task, sess)
        if base is not None:
            task.inherited = base
        if handed_back and task.handover is not None and task.handover.pending is None:
            task.handover = None  # the edits are back in this tree, its copy replaced
        task.state = TaskState.IN_PROGRESS
        task.session = sess
        task.claim = Claim(session=sess, opened=now, heartbeat=now, ttl=ttl)
        task.updated_at = now
    assert sess is not None
    return task, sess, now


def _resume(state: State, task_id: str, sess: str) -> tuple[Checkpoint | None, list[SignalDoc]]:
    """What a start shows first: a handoff (or a recovery's) addressed to the task, shown
    once, else the session's own checkpoint; and the session's pending signals."""
    from hunkwise.shared.state.signals import close, close_about, pending_for

    cp = state.checkpoints.get(f"{sess}|{task_id}")
    # A handoff (or a recovery's retroactive one) is shown once, to whoever resumes.
    handed = state.checkpoints.pop(f"handoff|{task_id}", None)
    shown = handed or cp
    mine = pending_for(state, sess)
    if shown is cp and cp is not None:
        # The checkpoint heads the brief; its signal is not shown a second time.
        for sig in mine:
            if sig.type == SignalType.CHECKPOINT and sig.about == task_id and sig.to == sess:
                close(sig, sess)
        mine = [sig for sig in mine if sig.state == "pending"]
    sigs = [sig.public() for sig in mine]
    # A handoff asked for someone to take the task up: shown once more here, then closed.
    close_about(state, SignalType.HANDOFF, task_id, sess)
    return shown, sigs


def _arriving(ctx: Ctx, state: State, task: Task) -> Checkpoint | None:
    """The handoff that brings a task coordinated elsewhere to this machine (its first
    start here), or None."""
    from hunkwise.shared.machines.chains import is_mirrored, machine_of
    from hunkwise.shared.state.context import machine_name

    cp = state.checkpoints.get(f"handoff|{task.id}")
    if cp is None or machine_of(cp.session) == machine_name() or task.state not in STARTABLE \
            or not is_mirrored(ctx, task.id):
        return None
    return cp


def _less(base: dict[str, list[str]], saved: Saved) -> dict[str, list[str]]:
    """The baseline without the handed-over changes (by identity)."""
    drop = Counter((p, d) for p, pos in saved.hunks.items() for _s, _n, d in pos)
    drop.update((p, i) for p, i in saved.whole.items())
    out: dict[str, list[str]] = {}
    for path, ids in base.items():
        for ident in ids:
            if drop[(path, ident)] > 0:
                drop[(path, ident)] -= 1
            else:
                out.setdefault(path, []).append(ident)
    return out


def _take_handed_edits(ctx: Ctx, state: State, task: Task,
                       session: str | None) -> tuple[list[str], str] | None:
    """A task handed over from another machine with its edits: put exactly those changes
    into this tree before the claim is taken (refused, 3, nothing written, the file and
    lines named, where this tree's lines differ from the base they were made on).

    Only when the start would succeed; putting them twice writes nothing the second time.
    """
    from hunkwise.shared.machines.chains import has_object, is_mirrored, machine_of
    from hunkwise.shared.machines.handover import put_back, replace_held
    from hunkwise.shared.state.context import machine_name

    cp = state.checkpoints.get(f"handoff|{task.id}")
    if cp is None or cp.saved is None or machine_of(cp.session) == machine_name():
        return None
    refuse_if_frozen(state, f"worker start {task.id}")
    if task.state not in STARTABLE:
        return None  # start refuses, with its own reason
    sess = session or env_session()
    if sess is None and task.reserved_for and task.reserved_for.startswith("sess-"):
        sess = task.reserved_for
    if sess is not None:
        check_session(sess)
    _may_take(task, sess)
    if not (has_object(ctx.repo, cp.saved.tree) and has_object(ctx.repo, cp.saved.base)
            and (cp.saved.own is None or has_object(ctx.repo, cp.saved.own))):
        raise StateRefused(f"{task.id}'s handed-over changes from {machine_of(cp.session)} are "
                           "not here yet: run worker sync, then worker start again")
    if task.handover is not None and not is_mirrored(ctx, task.id):
        # Back at its coordinator's machine, which kept its own copy of the task's edits:
        # the handed-back changes replace that copy.
        done = replace_held(ctx, state, task, cp.saved, what=f"take {task.id} back",
                            again="settle those lines, then worker start again")
    else:
        done = put_back(ctx.repo, task, cp.saved, what=f"take over {task.id}",
                        clash="differ here from the base the handed-over changes were made on")
    return done, machine_of(cp.session) or "?"


def record(ctx: Ctx, task_ids: list[str], snap: Snapshot | None = None,
           state: State | None = None) -> dict[str, recovery.Loss]:
    """Record the tasks' unreported work (see shared/work/recovery.py), from `snap` when the
    command already read the tree; the tasks whose recorded work is gone. Never fails the
    command: a tree changing under the snapshot, a busy lock, only skip this once (the next
    command records)."""
    from hunkwise.shared.errors import CoordError

    try:
        return recovery.record_now(ctx, task_ids, snap, state)
    except CoordError:
        return {}


def _baseline(ctx: Ctx, state: State, task: Task) -> tuple[dict[str, list[str]], Snapshot]:
    """The task's changes already in the tree, less what its own reports claimed; and the
    snapshot they were read from."""
    sync_ranges(ctx.repo, state)
    probe = task.model_copy(update={"inherited": {}})
    tv = view(ctx.repo, [probe if t.id == task.id else t for t in active_tasks(state)])
    have = identities_of_selection(tv, probe, select(tv, probe))
    for ident_path, ident in _conflict_ids(tv, task):
        have.setdefault(ident_path, []).append(ident)
    mine = Counter((p, i) for p, ids in task.claimed.items() for i in ids)
    out: dict[str, list[str]] = {}
    for path, ids in have.items():
        for ident in ids:
            if mine[(path, ident)] > 0:
                mine[(path, ident)] -= 1
            else:
                out.setdefault(path, []).append(ident)
    return out, tv.snap


def _proposed(task: Task, message: str | None, summary: str) -> ProposedCommit:
    text = (message or "").strip()
    if not text:
        return ProposedCommit(subject=task.title.strip().split("\n")[0][:200] or task.id,
                              body=summary.strip())
    subject, _, body = text.partition("\n")
    return ProposedCommit(subject=subject.strip()[:1000] or task.id, body=body.strip())


def _report(ctx: Ctx, task_id: str, *, status: ReportStatus, session: str | None, summary: str,
            unfinished: list[str], message: str | None, reason: str | None,
            run: bool, claim: Sequence[str] = (), disclaim: Sequence[str] = ()) -> DeliverResult:
    """Check, compute the task's own changes, deliver the report atomically.

    The state lock is held twice, each time only to read, re-check and write the state:
    first to refuse early and beat the claim's heartbeat, last to record the delivery.
    Everything slow runs outside it: the checks, the snapshot and its diffs, writing and
    fsyncing the report, the snapshot ref (inbox/delivery.py says in what order, and why a
    crash between any two steps loses nothing and delivers nothing twice).
    """
    from hunkwise.inbox import delivery

    state, task, sess = _beat(ctx, task_id, status, session)
    # Ranges at HEAD for attribution, in memory: the next command that saves them does it
    # under its own lock.
    sync_ranges(ctx.repo, state)
    where = ctx.config.checks.where
    checks: list[CheckResult] = []
    if run and task.checks and where == "tree":
        checks = _checked(task_id, status, task_checks(ctx, None, task_id, task.checks, [], "tree"))
    tv = view(ctx.repo, active_tasks(state))
    sel = select(tv, task)
    entries = _deliverable(ctx, tv, task, sel, status, claim, disclaim)
    if run and task.checks and where == "isolated":
        # HEAD + exactly the changes this report delivers: what accept would commit, so
        # neither another task's edit nor its half-done syntax error decides the result.
        checks = _checked(task_id, status,
                          task_checks(ctx, tv, task_id, task.checks, sel.changes, "isolated"))
    # Told before delivering: what it changed in its files that this report will not carry.
    from hunkwise.worker import neighbours

    outside = neighbours.outside_grants(tv, task, list(state.tasks.values()))
    overlaps = _overlaps(tv, task_id, sel)
    # The revision this report takes: the state hands it out only if no other delivery
    # took it meanwhile (checked under the lock below).
    revision = task.revision + 1
    ref = f"{recovery.SNAPSHOT_REFS}/{ref_component(task_id)}/r{revision}"
    report = WorkReport(
        schema_version=1, task_id=task_id, status=status,
        session=sess, created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        base_commit=tv.snap.head, title=task.title, expect=task.expect, summary=summary,
        changes=entries, patch_sha256=patch_digest(entries), snapshot=tv.snap.tree,
        revision=revision, report_id=f"rep-{task_id}-r{revision}-{os.urandom(4).hex()}",
        checks=checks, overlaps=overlaps[:1000], unfinished=unfinished,
        proposed_commit=_proposed(task, message, summary), reason=reason,
        checks_skipped=not run and bool(task.checks) and status == "done",
        checks_where=where if run and task.checks else "tree")
    saved = recovery.saved_of(ctx.repo, tv, sel, kind="report", revision=revision, ref=ref)
    claimed = identities_of_selection(tv, task, sel)
    for a in sel.disclaimed_ambiguous:
        claimed.setdefault(report_path(a.change.path), []).append(DISCLAIMED + a.canon)

    def record(d: delivery.Delivery) -> Task:
        recovery.kill_point("worker-staged")
        task = _record_report(ctx, state, task_id, status, sess, d.staged[0].name, revision,
                              saved, claimed)
        recovery.kill_point("worker-recorded")
        return task

    task, paths = delivery.deliver(
        ctx.lay.inbox, [delivery.Draft(report.model_dump_json().encode(), task_id, revision)],
        record, publish=lambda st: delivery.land(ctx, task_id, ref, saved, st))
    recovery.kill_point("worker-delivered")
    (path,) = paths.values()
    from hunkwise.shared.hunks.places import claimed_files

    result: DeliverResult = {
        "task": task.public(), "report": {
            "id": report.report_id, "revision": report.revision, "status": status,
            "file": str(path), "changes": len(entries),
            "hunks": sum(len(e.hunks) for e in entries),
            "checks_passed": sum(1 for c in checks if c.passed), "checks_total": len(checks),
            "overlaps": [o.public() for o in overlaps]},
        "claimed": claimed_files(entries),
        "outside_grants": outside}
    if outside:
        result["warnings"] = [neighbours.warning(task_id, outside)]
    return result


def _beat(ctx: Ctx, task_id: str, status: ReportStatus,
          session: str | None) -> tuple[State, Task, str | None]:
    """The first hold of the lock: refuse early (frozen, not reportable, not the holder) and
    beat the claim's heartbeat. The state, the task, and the session reporting."""
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id)
        refuse_if_frozen(state, f"worker {status} {task_id}")
        sess = _resolve_session(task, session)
        if task.state != TaskState.IN_PROGRESS and not _amending(task, sess):
            raise StateRefused(_not_reportable(task))
        _check_holder(task, sess, store.now())
        if task.claim is not None and (sess is None or task.claim.session == sess):
            task.claim = task.claim.model_copy(update={"heartbeat": store.now()})
    return state, task, sess


def _deliverable(ctx: Ctx, tv: TreeView, task: Task, sel: Selection, status: ReportStatus,
                 claim: Sequence[str], disclaim: Sequence[str]) -> list[ChangeEntry]:
    """The task's changes as its report lists them; a "done" is refused (nothing delivered)
    while a boundary change is undecided, an edit in its grants cannot be claimed, or
    there is nothing to deliver."""
    task_id = task.id
    undecided = decide_boundaries(sel, claim, disclaim)
    if undecided and status == "done":
        raise CheckFailed(f"{task_id}: {len(undecided)} change(s) at the boundary of your "
                          "grant could be yours or your neighbour's, and nothing recorded who "
                          f"wrote them: {'; '.join(undecided[:5])}. Say which: worker done "
                          f"{task_id} --claim PATH:LINES (yours) or --disclaim PATH:LINES (not "
                          "yours; `all` for every one). Yours are the lines you wrote and the "
                          "lines of your range you left as they were (a blank line that "
                          "ended your range before still does). If only some of those lines are yours, "
                          "no answer is right: with the agent hooks installed (coord "
                          "install-hooks) what each session wrote settles it; else report "
                          f"worker blocked {task_id}; nothing was delivered")
    blocking = _unclaimable(tv, task, sel)
    if blocking and status == "done":
        raise CheckFailed(f"{task_id}: {len(blocking)} edit(s) in your grants cannot be "
                          f"claimed: {'; '.join(blocking[:5])}. Move the edit inside your "
                          "range, or ask the coordinator for a wider grant (worker blocked "
                          f"{task_id} --reason ...); nothing was delivered")
    entries = task_entries(ctx.repo, tv, task, sel)
    if not entries and status == "done":
        # A "done" with nothing in it would validate, then dead-end at accept: refused
        # here, where the worker can still act on it (docs/newcomer.md), before any check
        # runs for nothing.
        raise CheckFailed(f"{task_id}: no changes in your grants ({', '.join(map(str, task.grants))}) "
                          "to deliver: edit them first, or report why there is nothing to do "
                          f"(worker blocked {task_id} --reason R, or worker failed {task_id} "
                          "--reason R); nothing was delivered")
    return entries


def _overlaps(tv: TreeView, task_id: str, sel: Selection) -> list[Overlap]:
    """What the report tells of changes in or beside its grants it does not carry."""
    overlaps = [Overlap(path=report_path(ch.path), task_id=",".join(t for t in tids if t != task_id) or None,
                        note="a change here straddles grants" + (f" (line {h.old_start})" if h else ""))
                for ch, h, tids in tv.attribution.conflicts if task_id in tids]
    overlaps += [Overlap(path=report_path(a.change.path),
                         task_id=",".join(t for t in a.tasks if t != task_id) or None,
                         note=f"ambiguous change at line {a.hunk.old_start} claimed: it lies "
                              "inside the other task's grant too; it is committed for this "
                              "task only if the other does not claim it")
                 for a in sel.claimed_ambiguous]
    overlaps += [Overlap(path=path, note="inherited: this change was in the grant before "
                                         "the task started; not claimed")
                 for path, _ident in sel.inherited]
    overlaps += [Overlap(path=report_path(ch.path), note="change outside every grant: never committed")
                 for ch, h in tv.attribution.unowned]
    return overlaps


def _record_report(ctx: Ctx, state: State, task_id: str, status: ReportStatus,
                   sess: str | None, name: str, revision: int, saved: Saved,
                   claimed: dict[str, list[str]]) -> Task:
    """The second hold of the lock: re-check the task, then record the delivery (the new
    revision, the report's name, what it claims). The task as recorded."""
    with store.transaction(ctx.lay, reuse=state) as state:
        task = get_task(state, task_id)
        refuse_if_frozen(state, f"worker {status} {task_id}")
        if task.state != TaskState.IN_PROGRESS and not _amending(task, sess):
            raise StateRefused(f"{_not_reportable(task)} (it changed meanwhile); nothing "
                               "was delivered")
        if task.claim is None or (sess is not None and task.claim.session != sess):
            holder = task.claim.session if task.claim else "nobody"
            raise StateRefused(f"{task_id} is claimed by {holder} now (recovered or "
                               "handed over meanwhile); nothing was delivered")
        if task.revision != revision - 1:
            raise StateRefused(f"{task_id} got revision {task.revision} while this report "
                               "was being prepared (another delivery of the task); nothing "
                               "was delivered: run it again to supersede that one")
        now = store.now()
        task.revision = revision
        task.saved = saved
        task.state = TaskState.REPORTED
        task.last_report = name
        task.claimed = claimed
        task.last_status = status
        if status == "done" and any(v != AuditState.PENDING for v in task.audit.values()):
            # New work needs a new look: verdicts were about the previous revision.
            for role in task.audit:
                task.audit[role] = AuditState.PENDING
                send(state, sender=sess or "worker", to=f"{role}@*",
                     kind=SignalType.READY_FOR_REVIEW, about=task_id,
                     payload=f"revision {revision} of {task_id}: {task.title}")
        task.updated_at = now
        if task.claim:
            task.claim = task.claim.model_copy(update={"heartbeat": now})
    return task


def _checked(task_id: str, status: str, check: TaskCheck) -> list[CheckResult]:
    """The checks' results; CheckFailed (nothing delivered) when one of a done's failed."""
    failed = [c for c in check.results if not c.passed]
    if status == "done" and failed:
        names = ", ".join(f"{c.command!r} (exit {c.exit_code})" for c in failed)
        where = " on HEAD + exactly the task's changes" if check.where == "isolated" else ""
        raise CheckFailed(f"{task_id}: check failed{where}: {names}; nothing was delivered",
                          details="\n".join(filter(None, [failure_text(failed),
                                                           isolated_text(check, task_id)])))
    return check.results


def check(ctx: Ctx, task_id: str) -> CheckRunResult:
    """`worker check`: the task's checks as `worker done` would run them, delivering
    nothing and writing no state."""
    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    if not task.active:
        raise StateRefused(f"{task_id} is {task.state}; nothing is left to check")
    sync_ranges(ctx.repo, state)
    where = ctx.config.checks.where
    if not task.checks:
        return {"task": task_id, "where": where, "commit": None, "passed": True, "checks": [],
                "left_out": [], "note": f"{task_id} has no checks"}
    if where == "tree":
        ran = task_checks(ctx, None, task_id, task.checks, [], "tree")
    else:
        tv = view(ctx.repo, active_tasks(state))
        ran = task_checks(ctx, tv, task_id, task.checks, select(tv, task).changes, "isolated")
    return {"task": task_id, "where": ran.where, "commit": ran.commit, "passed": ran.passed,
            "checks": [cast("CommandResult", c.model_dump()) for c in ran.results],
            "left_out": [{"path": p, "whose": w} for p, w in ran.left_out],
            "note": isolated_text(ran, task_id)}


def _conflict_ids(tv: TreeView, task: Task) -> list[tuple[str, str]]:
    return [(report_path(ch.path), "conflict:" + (tv.attribution.identity(h) if h else ch.new_oid))
            for ch, h, tids in tv.attribution.conflicts if task.id in tids]


def _amending(task: Task, sess: str | None) -> bool:
    """A reported task whose report the coordinator has not taken yet: its holder may
    deliver a new revision, which supersedes the pending one."""
    return (task.state == TaskState.REPORTED and task.claim is not None
            and (sess is None or task.claim.session == sess)
            and task.served_revision < task.revision)


def _not_reportable(task: Task) -> str:
    """Why the task cannot report now, and what to do: never contradicting `worker start`."""
    tid = task.id
    if task.state == TaskState.REPORTED:
        if task.claim is not None and task.served_revision >= task.revision:
            return (f"{tid}'s report r{task.revision} was taken for review at the coordinator's "
                    "checkpoint; wait for its verdict (coord request-changes reopens the task)")
        return (f"{tid} is reported and its claim is not yours; wait for the coordinator's "
                "verdict")
    if task.state in STARTABLE:
        return f"{tid} is {task.state}; run worker start {tid} first"
    if task.state == TaskState.DEFERRED:
        return f"{tid} is deferred to batch {task.batch}; worker start {tid} after coord thaw"
    return f"{tid} is {task.state}; nothing is left to report"


def _unclaimable(tv: TreeView, task: Task, sel: Selection) -> list[str]:
    """Edits touching the task's grants that no rule lets it claim (and it did not inherit)."""
    left = Counter((p, i) for p, ids in task.inherited.items() for i in ids)
    out = []
    for (ch, h, tids), key in zip(
            [c for c in tv.attribution.conflicts if task.id in c[2]], _conflict_ids(tv, task),
            strict=True):
        if left[key] > 0:
            left[key] -= 1
            continue
        where = f"lines {h.old_start}-{h.old_end}" if h and h.old_lines else (
            f"after line {h.old_start}" if h else "the whole file")
        others = [t for t in tids if t != task.id]
        why = (f"it straddles your grant and {', '.join(others)}'s" if others
               else "it reaches outside your grant")
        out.append(f"{report_path(ch.path)} {where}: {why}")
    return out


def done(ctx: Ctx, task_id: str, *, session: str | None, summary: str, unfinished: list[str],
         message: str | None, run_checks: bool, claim: Sequence[str] = (),
         disclaim: Sequence[str] = ()) -> DeliverResult:
    return _report(ctx, task_id, status="done", session=session, summary=summary,
                   unfinished=unfinished, message=message, reason=None, run=run_checks,
                   claim=claim, disclaim=disclaim)


def stopped(ctx: Ctx, task_id: str, *, status: ReportStatus, session: str | None,
            reason: str) -> DeliverResult:
    if not reason.strip():
        raise UsageError("--reason must say why")
    return _report(ctx, task_id, status=status, session=session, summary="", unfinished=[],
                   message=None, reason=reason, run=False)
