"""Signals between sessions: pulled, never pushed.

`to` is a session id (direct), `<role>@<machine>` (every session of that role on that
machine) or `*` (everyone). A direct signal is delivered once its session acknowledges
it; a broadcast is pending for each session until that session acknowledges it. Any
signal is closed (delivered, for everyone) once what it asked for happened: a review
request when its role's verdict arrives, a handoff when a session starts the task.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path

from hunkwise.shared.errors import UsageError
from hunkwise.shared.state.context import session_role
from hunkwise.shared.state.models import SESSION_RE, Checkpoint, Signal, SignalType, State
from hunkwise.shared.state.store import now

_TARGET_RE = re.compile(r"^(\*|sess-\d{8}-\d{4}-[A-Za-z0-9_.-]{1,64}@[A-Za-z0-9_.-]{1,64}|"
                        r"[A-Za-z0-9_-]{1,32}@[A-Za-z0-9_.*-]{1,64})$")


def check_target(to: str) -> str:
    # A target that looks like a session id must be one: a mistyped id would otherwise
    # pass as a role name and reach nobody.
    if to.startswith("sess-") and not SESSION_RE.fullmatch(to):
        raise UsageError(f"malformed session id {to!r} as signal target: expected "
                         "sess-YYYYMMDD-HHMM-<role>@<machine>")
    if not _TARGET_RE.fullmatch(to or ""):
        raise UsageError(f"malformed signal target {to!r}: a session id, <role>@<machine> or *")
    return to


def check_type(kind: str) -> SignalType:
    try:
        return SignalType(kind)
    except ValueError:
        raise UsageError(f"unknown signal type {kind!r}: one of "
                         + ", ".join(t.value for t in SignalType)) from None


def send(state: State, *, sender: str, to: str, kind: SignalType, about: str, payload: str = "") -> Signal:
    check_target(to)
    for text, what in ((about, "--about"), (payload, "--payload")):
        if "\0" in text:
            raise UsageError(f"{what} holds a NUL byte")
    day = dt.datetime.now().strftime("%Y%m%d")
    sig = Signal(id=state.next_id("sig", day), sender=sender, to=to, type=kind,
                 about=about, payload=payload, created_at=now())
    state.signals.append(sig)
    return sig


def _machine(session: str) -> str:
    return session.rpartition("@")[2]


def addressed_to(sig: Signal, session: str) -> bool:
    if sig.to == "*" or sig.to == session:
        return True
    if sig.to.startswith("sess-"):
        return False
    role, _, machine = sig.to.partition("@")
    return role == session_role(session) and machine in ("*", _machine(session))


def seen_by(sig: Signal, session: str) -> bool:
    """Addressed to `session`, and not its own (unless sent to itself)."""
    return addressed_to(sig, session) and (sig.sender != session or sig.to == session)


def pending_for(state: State, session: str) -> list[Signal]:
    return [s for s in state.signals
            if seen_by(s, session) and session not in s.acked_by and s.state == "pending"]


def ack(sig: Signal, session: str) -> None:
    """`session` has seen it. A direct signal is then delivered; a broadcast stays open
    for the other sessions it reaches (one reviewer reading a request answers nothing)."""
    if session not in sig.acked_by:
        sig.acked_by.append(session)
    if sig.to == session:
        sig.state = "delivered"


def close(sig: Signal, by: str) -> None:
    """What the signal asked for happened (or its addressee closed it): delivered for all."""
    if by not in sig.acked_by:
        sig.acked_by.append(by)
    sig.state = "delivered"


def close_about(state: State, kind: SignalType, about: str, by: str,
                to: Callable[[Signal], bool] = lambda _sig: True) -> list[str]:
    """Close the pending signals of `kind` about `about` that `to` selects; their ids."""
    done = []
    for sig in state.signals:
        if sig.type == kind and sig.about == about and sig.state == "pending" and to(sig):
            close(sig, by)
            done.append(sig.id)
    return done


def _is_coordinator(who: str) -> bool:
    role = session_role(who) if who.startswith("sess-") else who.partition("@")[0]
    return role in ("coordinator", "coord")


def audit_targets(signals: list[Signal], task_id: str, role: str) -> list[str]:
    """To whom the coordinator addressed its review requests of `role` for the task: the
    record `coord audit` leaves. Requests others sent (a worker's own, a resubmission's
    reminder) neither widen nor narrow it."""
    out: list[str] = []
    for sig in signals:
        if (sig.type != SignalType.READY_FOR_REVIEW or sig.about != task_id
                or not _is_coordinator(sig.sender)):
            continue
        target_role = session_role(sig.to) if sig.to.startswith("sess-") else sig.to.partition("@")[0]
        if target_role == role and sig.to not in out:
            out.append(sig.to)
    return out


def handoff_file(root: Path, cp: Checkpoint) -> tuple[Path, bytes]:
    """Where a handoff's file (JSON, under the state directory) goes, and what it holds:
    decided under the state lock, written after it (`write_handoff`), as the checkpoint
    was before it names the file."""
    import json
    import os

    name = f"{cp.task}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}.json"
    return root / "handoffs" / name, json.dumps(cp.model_dump(), indent=1).encode()


def write_handoff(path: Path, data: bytes) -> None:
    from hunkwise.shared.state.store import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
