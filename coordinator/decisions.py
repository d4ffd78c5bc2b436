"""Decisions only the human supervisor takes: the open questions workers asked (`worker
ask`), and `coord decide`, which answers one, counts the intervention, signals the asking
session and lets a task blocked on it start again."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from hunkwise.coordinator.sessions import coordinator_session
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx
from hunkwise.shared.state.models import SignalType, State, TaskState
from hunkwise.shared.state.signals import send

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import DecideResult, DecisionDoc, DecisionsResult
    from hunkwise.shared.state.models import Decision


def decisions(ctx: Ctx, *, include_answered: bool) -> DecisionsResult:
    state = store.load(ctx.lay)
    rows = [d.public() for d in state.decisions
            if include_answered or d.state == "open"]
    if include_answered:
        # Answered decisions of closed batches: the archive keeps their model_dump.
        rows = cast("list[DecisionDoc]", store.archived(ctx.lay, "decision")) + rows
    return {"decisions": rows, "interventions": state.interventions.get(str(state.batch), 0)}


def decide(ctx: Ctx, dec_id: str, answer: str, *, relaunch: bool | None = None) -> DecideResult:
    """Answer; a task blocked on the decision can start again, and with `relaunch`
    (default `[launch] relaunch`) its launched agent starts again with the answer first."""
    from hunkwise.coordinator import launch

    doc = _decide(ctx, dec_id, answer)
    task_id = doc["reopened"]
    if task_id is not None and launch.wants_relaunch(ctx, relaunch):
        task = store.load(ctx.lay).tasks.get(task_id)
        if task is not None and task.launch is not None:
            doc["relaunched"] = launch.relaunch(ctx, task_id, f"{dec_id}: {answer}",
                                                why="decision answered")
    return doc


def _decide(ctx: Ctx, dec_id: str, answer: str) -> DecideResult:
    if not answer.strip():
        raise UsageError("--answer must say something")
    with store.transaction(ctx.lay) as state:
        dec = next((d for d in state.decisions if d.id == dec_id), None)
        if dec is None:
            raise UsageError(f"unknown decision {dec_id!r} (coord decisions lists them)")
        if dec.state == "answered":
            raise StateRefused(f"{dec_id} was answered already: {dec.answer}")
        dec.state = "answered"
        dec.answer = answer
        dec.answered_at = store.now()
        key = str(state.batch)
        state.interventions[key] = state.interventions.get(key, 0) + 1
        send(state, sender=coordinator_session(), to=dec.session, kind=SignalType.DECISION, about=dec.id,
             payload=answer)
        reopened = _reopen_blocked(state, dec)
    return {"decision": dec.public(), "reopened": reopened}


def _reopen_blocked(state: State, dec: Decision) -> str | None:
    """A task that reported `blocked` waiting on this decision can start again, with the
    answer among its notes: ask -> blocked -> decide -> worker start, no dead end."""
    from hunkwise.shared.state.models import Note

    task = state.tasks.get(dec.task)
    if task is None or task.state != TaskState.REPORTED or task.last_status != "blocked":
        return None
    task.state = TaskState.CHANGES_REQUESTED
    task.claim = None  # its blocked report ended it, as request-changes ends one
    task.notes.append(Note(at=store.now(), by="supervisor", kind="decision",
                           text=f"{dec.id}: {dec.question} -> {dec.answer}"))
    task.updated_at = store.now()
    return task.id
