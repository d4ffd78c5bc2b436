"""The session index on the coordinator side: recover, signals, audits, decisions, the
Markdown view."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.hunks.taskview import active_tasks, view
from hunkwise.shared.output import printable
from hunkwise.shared.state import store
from hunkwise.shared.state.context import (
    Ctx,
    env_session,
    get_task,
    iso,
    machine_name,
    session_role,
)
from hunkwise.shared.state.models import AuditState, Checkpoint, SignalType, State, TaskState
from hunkwise.shared.state.signals import close as close_signal
from hunkwise.shared.state.signals import handoff_file, send, write_handoff

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        AuditResult,
        CoordSignalsResult,
        IndexResult,
        RecoverResult,
        SignalDoc,
    )
    from hunkwise.shared.state.models import Signal

COORDINATOR = "coordinator"


def coordinator_session() -> str:
    """Who the coordinator is in signals: $COORD_SESSION, else coordinator@<machine>."""
    return env_session() or f"{COORDINATOR}@{machine_name()}"


def recover(ctx: Ctx, task_id: str, note: str, *, live_ok: bool = False) -> RecoverResult:
    """Free a stale claim with a retroactive handoff. `live_ok`: the claim's agent was
    ended by `coord stop` (coordinator/launch.py), so its fresh heartbeat is no life."""
    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    tv = view(ctx.repo, active_tasks(state))
    files = sorted({c.path for c in tv.task_changes(task_id)})
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id)
        c = task.claim
        if task.state == TaskState.ASSIGNED and task.reserved_for and c is None:
            # A handoff to a target that never comes (a mistyped session id): free it.
            was = task.reserved_for
            task.reserved_for = None
            send(state, sender=coordinator_session(), to="*", kind=SignalType.HANDOFF, about=task_id,
                 payload=f"handoff to {was} released by the coordinator" + (f": {note}" if note else ""))
            return {"task": task.public(), "handoff": None, "stale_session": None,
                    "released_reservation": was}
        if task.state != TaskState.IN_PROGRESS or c is None:
            raise StateRefused(f"{task_id} is {task.state} with no claim to recover")
        if not c.stale(time.time()) and not live_ok:
            raise StateRefused(f"{task_id} is claimed by live session {c.session} "
                               f"(heartbeat {time.time() - c.heartbeat:.0f}s ago, ttl {c.ttl}s); "
                               "a live claim is never taken over")
        last = state.checkpoints.get(f"{c.session}|{task_id}")
        cp = Checkpoint(task=task_id, session=c.session, at=store.now(),
                        next=last.next if last else "no checkpoint was recorded: read the diff",
                        context=(note + ("\n" if note and last else "") + (last.context if last else "")),
                        files=files, commits=last.commits if last else [], kind="recovery")
        path, data = handoff_file(ctx.lay.root, cp)
        cp.file = str(path)
        state.checkpoints[f"handoff|{task_id}"] = cp
        task.state = TaskState.ASSIGNED
        task.claim = None
        task.reserved_for = None
        task.updated_at = cp.at
        # To whoever takes the task over: a session of the stale one's role, not everyone
        # (reviewers and other roles have nothing to resume).
        send(state, sender=coordinator_session(), to=f"{session_role(c.session)}@*", kind=SignalType.HANDOFF,
             about=task_id, payload=f"recovered from stale {c.session}: " + cp.next)
    write_handoff(path, data)
    return {"task": task.public(), "handoff": cp.public(),
            "stale_session": c.session}


def _for_coordinator(sig: Signal) -> bool:
    """Addressed to the coordinator: a coordinator session, its role, or everyone."""
    to = sig.to
    if to == "*":
        return True
    if to.startswith("sess-"):
        return session_role(to) in (COORDINATOR, "coord")
    return to.partition("@")[0] in (COORDINATOR, "coord")


def signals(ctx: Ctx, *, pending_only: bool, ack: list[str] | None = None) -> CoordSignalsResult:
    """List signals; with `ack`, acknowledge (close) the given ids addressed to the
    coordinator, or every pending one with "all"."""
    if not ack:
        state = store.load(ctx.lay)
        rows = [s.public() for s in state.signals
                if not pending_only or s.state == "pending"]
        return {"signals": rows}
    every = any(a in ("all", "--all") for a in ack)
    me = coordinator_session()
    acked: list[str] = []
    with store.transaction(ctx.lay) as state:
        by_id = {s.id: s for s in state.signals}
        for sid in ack:
            if sid in ("all", "--all"):
                continue
            sig = by_id.get(sid)
            if sig is None:
                raise UsageError(f"unknown signal {sid!r} (coord signals lists them)")
            if not _for_coordinator(sig):
                raise StateRefused(f"{sid} is addressed to {sig.to}, not to the coordinator; "
                                   "only its addressee acknowledges it")
        for sig in state.signals:
            wanted = sig.id in ack or (every and sig.state == "pending" and _for_coordinator(sig))
            if wanted and (sig.state == "pending" or me not in sig.acked_by):
                close_signal(sig, me)  # the coordinator's acknowledgement closes it
                acked.append(sig.id)
        rows = [s.public() for s in state.signals
                if not pending_only or s.state == "pending"]
    return {"signals": rows, "acked": acked}


def audit(ctx: Ctx, task_id: str, roles: list[str]) -> AuditResult:
    """Ask each role (`review`: any session of it) or one session (`sess-...-review@m`:
    that session alone). The READY_FOR_REVIEW signals are the record of whom the audit
    asked: `worker review` takes a verdict only from a started session they reach."""
    from hunkwise.shared.state.context import check_session
    from hunkwise.shared.state.models import ROLE_RE

    asked: list[tuple[str, str]] = []  # (role, target)
    for r in (r.strip() for r in roles):
        if not r:
            continue
        if r.startswith("sess-"):
            asked.append((session_role(check_session(r)), r))
        elif ROLE_RE.fullmatch(r):
            asked.append((r, f"{r}@*"))
        else:
            raise UsageError(f"malformed role {r!r}: a role, or a session id for one reviewer")
    if not asked:
        raise UsageError("--roles needs at least one role, e.g. review,security,test")
    sent: list[SignalDoc] = []
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id)
        if not task.active:
            raise StateRefused(f"{task_id} is {task.state}; nothing to audit")
        for role, target in asked:
            task.audit[role] = AuditState.PENDING
            sig = send(state, sender=coordinator_session(), to=target, kind=SignalType.READY_FOR_REVIEW,
                       about=task_id, payload=f"audit {task_id}: {task.title}")
            sent.append(sig.public())
    return {"task": task_id, "audit": dict(task.audit), "signals": sent,
            "addressed": {role: [t for r, t in asked if r == role] for role, _ in asked}}


# ---- the Markdown view -------------------------------------------------------------------

# `_` inside a word never emphasises in GitHub-flavoured Markdown: it stays as written, so
# a session grepping the index for READY_FOR_REVIEW finds it.
_MD_SPECIAL = re.compile(r"([\\`*{}\[\]()#+!|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def md_cell(text: object) -> str:
    """One safe table cell: no newlines, pipes, HTML, or control characters survive."""
    s = printable("" if text is None else str(text))
    s = " ".join(s.split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return s[:500] or " "


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    if not rows:
        out.append("| " + " | ".join(["-"] * len(header)) + " |")
    return out


def render_index(state: State, now: float | None = None, *, everything: bool = False) -> str:
    """Claims, stale claims, and the pending signals (`everything`: every signal)."""
    now = now or time.time()
    live: list[list[object]] = []
    stale: list[list[object]] = []
    for t in sorted(state.tasks.values(), key=lambda t: t.id):
        c = t.claim
        if c is None:
            continue
        row: list[object] = [c.session, _machine(c.session), t.id, t.state,
                             ", ".join(str(g) for g in t.grants), iso(c.opened),
                             f"{now - c.heartbeat:.0f}s"]
        (stale if c.stale(now) else live).append(row)
    lines = ["# Session index", "", f"Generated {iso(now)} from the coordinator state "
             "(a view: the state is the truth; other machines' claims and signals as of "
             "the last sync).", "", "## Active claims", ""]
    head = ["session", "machine", "task", "state", "grants", "opened", "heartbeat age"]
    lines += _table(head, live)
    lines += ["", "## Stale claims", ""]
    lines += _table(head, stale)
    lines += ["", "## Signals", ""]
    lines += _table(["id", "from", "to", "type", "about", "payload", "state", "machine"],
                    [[s.id, s.sender, s.to, s.type.value, s.about, s.payload, s.state,
                      _machine(s.sender)]
                     for s in state.signals if everything or s.state == "pending"])
    return "\n".join(lines) + "\n"


def _machine(who: str) -> str:
    return who.rpartition("@")[2] if "@" in who else ""


INDEX_FILE = "SESSIONS.md"


def index(ctx: Ctx, output: str | None, *, everything: bool = False) -> IndexResult:
    """Render the index; `output` "" writes it into the state directory.

    A file written inside the working tree is added to `.git/info/exclude`: the view must
    not become an unowned change that `coord status` reports and nobody may commit.
    """
    state = store.load(ctx.lay)
    if everything:
        from hunkwise.shared.state.models import Signal

        state.signals = [Signal.model_validate(d) for d in store.archived(ctx.lay, "signal")] + state.signals
    text = render_index(state, everything=everything)
    if output is None:
        return {"markdown": text, "output": None}
    if output == "":
        store.ensure(ctx.lay)
    path = ctx.lay.root / INDEX_FILE if output == "" else Path(output)
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        store.atomic_write(path, text.encode())
    except OSError as e:
        raise UsageError(f"--output {output}: {e.strerror}") from None
    _exclude_if_inside(ctx, path)
    return {"markdown": text, "output": str(path)}


def _exclude_if_inside(ctx: Ctx, path: Path) -> None:
    import os

    from hunkwise.shared import git

    top = ctx.repo.resolve()
    real = path.resolve()
    if os.path.commonpath([top, real]) != str(top) or ctx.lay.root.resolve() in real.parents:
        return
    rel = "/" + real.relative_to(top).as_posix()
    exclude = git.common_dir(ctx.repo) / "info" / "exclude"
    text = exclude.read_text(encoding="utf-8", errors="replace") if exclude.exists() else ""
    if rel not in text.splitlines():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as f:
            f.write(("\n" if text and not text.endswith("\n") else "") + rel + "\n")
