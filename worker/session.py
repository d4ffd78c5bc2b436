"""Session practices on the worker side: heartbeats, checkpoints, handoffs, signals,
audit verdicts and questions for the human supervisor."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.hunks.taskview import active_tasks, view
from hunkwise.shared.machines.chains import is_mirrored, machine_of
from hunkwise.shared.machines.handover import HANDOFF_REFS, record_edits
from hunkwise.shared.state import store
from hunkwise.shared.state.context import (
    Ctx,
    check_session,
    env_session,
    get_task,
    iso,
    machine_name,
    new_session,
    refuse_if_frozen,
    session_role,
)
from hunkwise.shared.state.models import (
    AuditState,
    AuditVerdict,
    Checkpoint,
    Decision,
    DecisionKind,
    Handover,
    ProposedCommit,
    Saved,
    Signal,
    SignalType,
    State,
    Task,
    TaskState,
    Verdict,
)
from hunkwise.shared.state.signals import (
    ack,
    addressed_to,
    audit_targets,
    check_target,
    check_type,
    close_about,
    handoff_file,
    pending_for,
    seen_by,
    send,
    write_handoff,
)
from hunkwise.shared.work import recovery

if TYPE_CHECKING:
    from hunkwise.inbox import delivery
    from hunkwise.shared.state.documents import (
        AskResult,
        CheckpointResult,
        GuardKnows,
        HandoffResult,
        HeartbeatResult,
        Recorded,
        SessionResult,
        SignalDoc,
        SignalResult,
        VerdictResult,
        WorkerSignalsResult,
    )


def _need_session(session: str | None) -> str:
    s = session or env_session()
    if not s:
        raise UsageError("no session: pass --session or set COORD_SESSION (worker start prints "
                         "it; a reviewer gets one with worker start --role review)")
    return check_session(s)


def open_session(ctx: Ctx, *, session: str | None, role: str | None) -> SessionResult:
    """`worker start` without a task: start a session (a reviewer's, typically) and show
    the signals waiting for it. A given session id is started as it is."""
    s = session or env_session()
    if s is not None:
        check_session(s)
        if role is not None and session_role(s) != role:
            raise UsageError(f"{s} is a session of role {session_role(s)!r}, not {role!r}")
    elif role is None:
        raise UsageError("worker start needs a task id, or --role R to start a session "
                         "without one (worker start --role review)")
    with store.transaction(ctx.lay) as state:
        if s is None:
            assert role is not None
            s = new_session(state, role)
        state.sessions[s] = store.now()
        sigs = [sig.public() for sig in pending_for(state, s)]
    return {"task": None, "session": s, "role": session_role(s), "checkpoint": None,
            "signals": sigs, "notes": []}


def _holder_session(task: Task, session: str | None) -> str:
    s = session or env_session() or (task.claim.session if task.claim else None)
    if s is None:
        raise StateRefused(f"{task.id} has no claim; run worker start {task.id} first")
    check_session(s)
    if task.claim is None or task.claim.session != s:
        holder = task.claim.session if task.claim else "nobody"
        raise StateRefused(f"{task.id} is claimed by {holder}, not {s}")
    return s


def _deferred_from(task: Task, session: str | None) -> str | None:
    """The session whose claim a release freeze took when it deferred `task` (the caller's,
    or the task's last session when the caller names none), else None."""
    if task.state != TaskState.DEFERRED or task.claim is not None or task.session is None:
        return None
    s = session or env_session() or task.session
    return s if s == task.session else None


def touch(state: State, session: str) -> None:
    """Every worker command is a heartbeat for the claims its session holds. Only a
    started session is recorded: naming one on a command line does not start it."""
    now = store.now()
    if session in state.sessions:
        state.sessions[session] = now
    for t in state.tasks.values():
        if t.claim is not None and t.claim.session == session:
            t.claim = t.claim.model_copy(update={"heartbeat": now})


def heartbeat(ctx: Ctx, task_id: str, *, session: str | None) -> HeartbeatResult:
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id)
        # Heartbeats, checkpoints, questions and signals change no code: a freeze allows
        # them (a long verify must not let every claim go stale).
        deferred = _deferred_from(task, session)
        if deferred is not None:
            # A release freeze deferred the task and took the claim: its worker is told
            # what happened and what to do, not that nobody holds the task.
            now = store.now()
            state.sessions[deferred] = now
            return {"task": task_id, "session": deferred, "heartbeat": iso(now), "ttl_s": 0,
                    "deferred": {"batch": task.batch,
                                 "next": f"stop editing; worker start {task_id} after coord thaw"}}
        s = _holder_session(task, session)
        now = store.now()
        assert task.claim is not None
        task.claim = task.claim.model_copy(update={"heartbeat": now})
        state.sessions[s] = now
        changed = [sig.public() for sig in pending_for(state, s)
                   if sig.type == SignalType.TASK_CHANGED and sig.about == task_id]
    doc: HeartbeatResult = {"task": task_id, "session": s, "heartbeat": iso(now),
                            "ttl_s": task.claim.ttl}
    lost = _recorded(ctx, [task_id], state)
    if "lost" in lost:
        doc["lost"] = lost["lost"]
    if changed:
        doc["changed"] = changed
    return doc


def _recorded(ctx: Ctx, task_ids: list[str], state: State | None = None) -> Recorded:
    """Every worker command records its tasks' unreported work (shared/work/recovery.py); the
    tasks whose recorded work is gone are named with the way back. `state`: the one the
    command just saved, not parsed again."""
    from hunkwise.worker.lifecycle import record

    losses = record(ctx, task_ids, state=state)
    if not losses:
        return {}
    return {"lost": [{"task": t, "paths": v.paths, "restore": f"coord restore {t}"}
                     for t, v in sorted(losses.items())]}


def commits_since(ctx: Ctx, since: float) -> list[str]:
    out = git.run(ctx.repo, "log", "--format=%H %s", f"--since=@{int(since)}", "-n", "50", "HEAD",
                  ok_codes=(0, 128))
    return [line for line in out.decode("utf-8", "replace").splitlines() if line]


def _where_it_stands(ctx: Ctx, task_id: str, session: str | None,
                     next_step: str) -> tuple[str, list[str], list[str], Saved | None]:
    """(holder session, files the task touched, commits since the claim opened, the
    task's own changes as a record that travels).

    Read before taking the lock: the tree view is the slow part.
    """
    if not next_step.strip():
        raise UsageError("--next must say where to resume")
    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    s = _holder_session(task, session)
    tv = view(ctx.repo, active_tasks(state))
    files = sorted({c.path for c in tv.task_changes(task_id)})
    # The task's own changes travel with the checkpoint or handoff (shared/machines/handover.py).
    saved = record_edits(ctx.repo, tv, task, kind="handoff", ref=f"{HANDOFF_REFS}/{git.ref_component(task_id)}")
    return s, files, commits_since(ctx, task.claim.opened if task.claim else 0), saved


def checkpoint(ctx: Ctx, task_id: str, *, session: str | None, next_step: str,
               context: str) -> CheckpointResult:
    s, files, commits, saved = _where_it_stands(ctx, task_id, session, next_step)
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id)
        s = _holder_session(task, s)
        touch(state, s)
        cp = Checkpoint(task=task_id, session=s, at=store.now(), next=next_step, context=context,
                        files=files, commits=commits, saved=saved)
        state.checkpoints[f"{s}|{task_id}"] = cp
        sig = send(state, sender=s, to=s, kind=SignalType.CHECKPOINT, about=task_id, payload=next_step)
        if task.claim:
            task.claim = task.claim.model_copy(update={"heartbeat": cp.at})
    return {"checkpoint": cp.public(),
            "signal": sig.public(), **_recorded(ctx, [task_id])}


def handoff(ctx: Ctx, task_id: str, *, session: str | None, to: str, next_step: str,
            context: str) -> HandoffResult:
    check_target(to)
    s, files, commits, saved = _where_it_stands(ctx, task_id, session, next_step)
    lost = _recorded(ctx, [task_id])  # while still in progress: the handoff releases it
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id)
        refuse_if_frozen(state, f"worker handoff {task_id}")
        s = _holder_session(task, s)
        now = store.now()
        cp = Checkpoint(task=task_id, session=s, at=now, next=next_step, context=context,
                        files=files, commits=commits, kind="handoff", to=to, saved=saved)
        path, data = handoff_file(ctx.lay.root, cp)
        cp.file = str(path)
        state.checkpoints[f"handoff|{task_id}"] = cp
        sig = send(state, sender=s, to=to, kind=SignalType.HANDOFF, about=task_id, payload=next_step)
        task.state = TaskState.ASSIGNED
        task.claim = None
        task.reserved_for = to
        away = machine_of(to)
        if away != machine_name() and not is_mirrored(ctx, task_id):
            # Its edits stay in this tree; the report that comes back replaces them.
            task.handover = Handover(machine=away or "*", held=saved)
        task.updated_at = now
    write_handoff(path, data)
    return {"handoff": cp.public(),
            "signal": sig.public(), "task": task.public(),
            **lost}


def signal(ctx: Ctx, *, session: str | None, to: str, kind: str, about: str,
           payload: str) -> SignalResult:
    s = _need_session(session)
    t = check_type(kind)
    with store.transaction(ctx.lay) as state:
        touch(state, s)
        sig = send(state, sender=s, to=to, kind=t, about=about, payload=payload)
        held = recovery.held_by(state, s)
    return {"signal": sig.public(), **_recorded(ctx, held)}


def signals(ctx: Ctx, *, session: str | None, do_ack: bool,
            everything: bool = False) -> WorkerSignalsResult:
    """The session's pending signals; `everything`: its history too (closed, acknowledged,
    archived), oldest first."""
    s = _need_session(session)
    with store.transaction(ctx.lay) as state:
        mine = pending_for(state, s)
        out = [sig.public() for sig in mine]
        if everything:
            out = [_as_seen(sig, s) for sig in state.signals if seen_by(sig, s)]
        if do_ack:
            for sig in mine:
                ack(sig, s)
            touch(state, s)
        held = recovery.held_by(state, s)
    if everything:
        old = [Signal.model_validate(d) for d in store.archived(ctx.lay, "signal")]
        out = [_as_seen(sig, s) for sig in old if seen_by(sig, s)] + out
    return {"session": s, "signals": out, "acked": do_ack, **_recorded(ctx, held)}


def _as_seen(sig: Signal, session: str) -> SignalDoc:
    """A signal as this session sees it: delivered once it acknowledged it."""
    d = sig.public()
    if session in sig.acked_by:
        d["state"] = "delivered"
    return d


def give_verdict(ctx: Ctx, task_id: str, *, session: str | None, verdict: str, notes: str,
           role: str | None = None) -> VerdictResult:
    """An auditor's verdict: a report of its own in the inbox, no tree change, no claim.

    Taken only from a started session (`worker start --role R`, or the one this command
    opens when none is given) that the audit request reached: a session id merely named
    on the command line approves nothing.
    """
    given = session or env_session()
    s0 = check_session(given) if given else None
    if verdict not in ("approve", "changes"):
        raise UsageError("--verdict is approve or changes")
    from hunkwise.inbox import delivery

    # Everything is read and the verdict written (and fsynced) in tmp/ before the lock;
    # under it, only the state is checked unchanged, the verdict linked into new/ and the
    # state saved. A state that changed meanwhile means reading it again.
    for _attempt in range(20):
        state, read = store.read(ctx.lay)
        task = get_task(state, task_id)
        refuse_if_frozen(state, f"worker review {task_id}")
        role = session_role(s0) if s0 is not None else (role or "review")
        if role not in task.audit:
            asked = ", ".join(sorted(task.audit)) or "none"
            raise StateRefused(f"{task_id} asks no audit of role {role!r} (asked: {asked})")
        s = s0 if s0 is not None else new_session(state, role)
        if s0 is None:
            state.sessions[s] = store.now()
        _may_judge(ctx, state, task, s, role)
        # A verdict is not a new revision of the work: it shares the work's revision number,
        # so it never supersedes the work report it is about.
        rev = max(task.revision, 1)
        report = AuditVerdict(
            schema_version=1, task_id=task_id, status="done", session=s,
            created_at=dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            base_commit=git.head(ctx.repo), title=task.title, expect=task.expect,
            summary=notes, changes=[], patch_sha256="0" * 64, snapshot="", revision=rev,
            report_id=f"rev-{task_id}-r{rev}-{role}-{os.urandom(4).hex()}", checks=[],
            overlaps=[], unfinished=[], proposed_commit=ProposedCommit(subject=f"{role}: {verdict}"),
            kind="review", role=role, verdict=cast(Verdict, verdict))

        path, _ = delivery.deliver(
            ctx.lay.inbox, [delivery.Draft(report.model_dump_json().encode(), task_id, rev)],
            partial(_record_verdict, ctx, read, state, task, s, role, verdict, notes),
            lasting=False)
        if path is None:
            continue
        return {"task": task_id, "session": s, "role": role, "verdict": verdict,
                "file": str(path), "audit": dict(task.audit)}
    raise StateRefused(f"the state kept changing while {task_id}'s verdict was written; retry")


def _record_verdict(ctx: Ctx, read: bytes, state: State, task: Task, s: str, role: str,
                    verdict: str, notes: str, d: delivery.Delivery) -> Path | None:
    """Under the lock: the verdict linked into new/ and the state saved, unless the state
    changed since it was read (None: nothing recorded, the verdict is dropped)."""
    with store.locked(ctx.lay):
        if store.state_bytes(ctx.lay) != read:
            return None
        path = d.link(d.staged[0])
        touch(state, s)
        task.audit[role] = AuditState.of(verdict)
        # The request it answers is closed: for this session, and for its role.
        close_about(state, SignalType.READY_FOR_REVIEW, task.id, s, _answered_by(s, role))
        send(state, sender=s, to="coordinator@*", kind=SignalType.REVIEWED,
             about=task.id, payload=f"{role}: {verdict}: {notes}")
        store.save(ctx.lay, state)
    return path


def _answered_by(s: str, role: str) -> Callable[[Signal], bool]:
    """The requests a verdict of session `s` in `role` answers: its own, and its role's."""
    return lambda sig: addressed_to(sig, s) or sig.to.partition("@")[0] == role


def _may_judge(ctx: Ctx, state: State, task: Task, s: str, role: str) -> None:
    """Refuse a verdict from a session never started, from the task's own worker, or from
    a session the audit request was not addressed to."""
    if s not in state.sessions:
        raise StateRefused(f"{s} was never started: a verdict comes from a started session "
                           f"(worker start --role {role} prints one; worker review without "
                           "--session opens one)")
    if s == task.session:
        raise StateRefused(f"{s} did {task.id}'s work; another session audits it")
    targets = audit_targets(state.signals, task.id, role)
    if not targets:  # requests of a closed batch: the archive keeps them
        old = [Signal.model_validate(d) for d in store.archived(ctx.lay, "signal")]
        targets = audit_targets(old, task.id, role)
    probe = [Signal(id="probe", sender="", to=t, type=SignalType.READY_FOR_REVIEW,
                    about=task.id, created_at=0.0) for t in targets]
    if targets and not any(addressed_to(p, s) for p in probe):
        raise StateRefused(f"the audit of {task.id} by {role} was addressed to "
                           f"{', '.join(targets)}, not {s}")


def ask(ctx: Ctx, task_id: str, *, session: str | None, question: str, kind: str) -> AskResult:
    if not question.strip():
        raise UsageError("--question must ask something")
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id)
        # As the other commands of a task do: the task's claim names the session.
        s = _need_session(session or env_session()
                          or (task.claim.session if task.claim else None))
        touch(state, s)
        day = dt.datetime.now().strftime("%Y%m%d")
        dec = Decision(id=state.next_id("dec", day), task=task_id, session=s, question=question,
                       kind=cast(DecisionKind, kind), asked_at=store.now(), batch=state.batch)
        state.decisions.append(dec)
        send(state, sender=s, to="supervisor@*", kind=SignalType.DECISION, about=dec.id,
             payload=question)
        held = recovery.held_by(state, s)
    return {"decision": dec.public(), **_recorded(ctx, held)}


def record_identity(ctx: Ctx, session: str) -> GuardKnows:
    """Map the agent's own session id (from the environment its tool runs `worker start`
    in: shared/state/identity.py) to this hunkwise session, so the agent hooks know the
    worker from its next tool call on. Says whether they now do, and why not."""
    from hunkwise.shared.state import identity

    found = identity.agent_identity(os.environ)
    if found is None:
        env = env_session()
        return {"known": env == session, "agent": None, "by": "COORD_SESSION" if env == session
                else None}
    agent, agent_id = found
    identity.record(ctx.lay.root, agent_id, session)
    return {"known": True, "agent": agent, "by": dict(identity.AGENT_VARS)[agent]}
