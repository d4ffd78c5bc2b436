"""A field-for-field port of the state's records (shared/state/models.py) to msgspec
Structs, for bench/records.py to measure against the product's own reader.

Same fields in the same order, the same limits (`Meta`), unknown keys refused, a grant read
as the kind it names (a tagged union: the tag is written first, as grants always were);
the fields written only when set are `UNSET` until they are.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType, field

MAX_TEXT = 64 * 1024
Text = Annotated[str, Meta(max_length=MAX_TEXT)]
Path = Annotated[str, Meta(max_length=4096)]
Oid64 = Annotated[str, Meta(max_length=64)]


class Rec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class TaskState(StrEnum):
    ASSIGNED = "assigned"
    IN_PROGRESS = "in_progress"
    REPORTED = "reported"
    ACCEPTED = "accepted"
    CHANGES_REQUESTED = "changes_requested"
    REJECTED = "rejected"
    DEFERRED = "deferred"
    REVERTED = "reverted"


class AuditState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    CHANGES = "changes"


class SignalType(StrEnum):
    READY_FOR_REVIEW = "READY_FOR_REVIEW"
    REVIEWED = "REVIEWED"
    CHANGES_REQUESTED = "CHANGES_REQUESTED"
    HANDOFF = "HANDOFF"
    CHECKPOINT = "CHECKPOINT"
    BLOCKED_ON = "BLOCKED_ON"
    DECISION = "DECISION"
    TASK_CHANGED = "TASK_CHANGED"


class _GrantFields(Rec, kw_only=True, tag_field="kind"):
    path: Path
    start: Annotated[int, Meta(ge=0)] = 0
    end: Annotated[int, Meta(ge=0)] = 0
    symbol: Annotated[str, Meta(max_length=512)] | UnsetType = UNSET


class GlobGrant(_GrantFields, kw_only=True, tag="glob"):
    kind: ClassVar[str] = "glob"


class RangeGrant(_GrantFields, kw_only=True, tag="range"):
    kind: ClassVar[str] = "range"


class PointGrant(_GrantFields, kw_only=True, tag="point"):
    kind: ClassVar[str] = "point"


Grant = GlobGrant | RangeGrant | PointGrant


class Claim(Rec, kw_only=True):
    session: str
    opened: float
    heartbeat: float
    ttl: int


class Note(Rec, kw_only=True):
    at: float
    by: str
    kind: str
    text: Text


class Saved(Rec, kw_only=True):
    kind: Literal["report", "wip", "handoff"]
    revision: Annotated[int, Meta(ge=1)]
    tree: Oid64
    base: Oid64 | None
    at: float
    ref: Annotated[str, Meta(max_length=512)]
    hunks: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)
    whole: dict[str, str] = field(default_factory=dict)
    own: Oid64 | UnsetType = UNSET


class Handover(Rec, kw_only=True):
    machine: Annotated[str, Meta(max_length=64)]
    held: Saved | None = None
    brought: int = 0
    pending: tuple[int, str, str, str] | None = None


class CheckResult(Rec, kw_only=True):
    command: Text
    exit_code: int
    passed: bool
    duration_s: Annotated[float, Meta(ge=0)]
    output_tail: Text


class Recheck(Rec, kw_only=True):
    passed: bool
    at: float
    revision: int
    commit: str
    checks: list[CheckResult] = field(default_factory=list)
    setup: CheckResult | None = None


class Launch(Rec, kw_only=True):
    agent: Annotated[str, Meta(max_length=64)]
    session: Annotated[str, Meta(max_length=200)]
    pid: Annotated[int, Meta(ge=1)]
    proc_start: int | None = None
    started: float
    log: Path
    prompt_file: Path
    tmux: Annotated[str, Meta(max_length=200)] | None = None
    command: Annotated[list[str], Meta(max_length=200)] = field(default_factory=list)
    seq: Annotated[int, Meta(ge=1)] = 1


class Task(Rec, kw_only=True):
    id: str
    title: Text
    expect: Text
    state: TaskState = TaskState.ASSIGNED
    batch: int = 1
    grants: list[Grant]
    checks: list[str] = field(default_factory=list)
    exclusive: bool = False
    session: str | None = None
    claim: Claim | None = None
    revision: int = 0
    notes: list[Note] = field(default_factory=list)
    created_at: float
    updated_at: float
    last_report: str | None = None
    commit: str | None = None
    held_until_thaw: bool = False
    reserved_for: str | None = None
    served_revision: int = 0
    audit: dict[str, AuditState] = field(default_factory=dict)
    inherited: dict[str, list[str]] = field(default_factory=dict)
    claimed: dict[str, list[str]] = field(default_factory=dict)
    last_status: str | None = None
    saved: Saved | None = None
    wip_seq: int = 0
    handover: Handover | None = None
    recheck: Recheck | UnsetType = UNSET
    launch: Launch | UnsetType = UNSET
    brief: Annotated[str, Meta(max_length=MAX_TEXT)] | UnsetType = UNSET


class Freeze(Rec, kw_only=True):
    commit: str | None
    batch: int
    deferred: list[str] = field(default_factory=list)
    by: str
    at: float
    fingerprint: str
    tree: str
    index: str


class Signal(Rec, kw_only=True):
    id: str
    sender: str = field(name="from")
    to: str
    type: SignalType
    about: Text
    payload: Text = ""
    state: Literal["pending", "delivered"] = "pending"
    created_at: float
    acked_by: list[str] = field(default_factory=list)


class Checkpoint(Rec, kw_only=True):
    task: str
    session: str
    at: float
    next: Text
    context: Text = ""
    files: list[str] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    kind: Literal["checkpoint", "handoff", "recovery"] = "checkpoint"
    to: str | None = None
    file: str | None = None
    saved: Saved | None = None


class Decision(Rec, kw_only=True):
    id: str
    task: str
    session: str
    question: Text
    kind: Literal["priority", "architecture", "scope", "deploy"]
    state: Literal["open", "answered"] = "open"
    answer: str | None = None
    asked_at: float
    answered_at: float | None = None
    batch: int


class State(Rec, kw_only=True):
    version: int = 2
    next_task: int = 1
    batch: int = 1
    tasks: dict[str, Task] = field(default_factory=dict)
    freeze: Freeze | None = None
    ranges_at: str | None = None
    sessions: dict[str, float] = field(default_factory=dict)
    signals: list[Signal] = field(default_factory=list)
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    seq: dict[str, int] = field(default_factory=dict)
    interventions: dict[str, int] = field(default_factory=dict)


_DECODE = msgspec.json.Decoder(State).decode
_ENCODE = msgspec.json.Encoder().encode


def read(data: bytes) -> State:
    return _DECODE(data)


def write(state: State) -> bytes:
    return _ENCODE(state) + b"\n"
