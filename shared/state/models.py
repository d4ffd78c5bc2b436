"""Typed value objects: tasks, grants, claims, reports, findings, freezes.

Everything that crosses a process boundary (state files, reports from workers) is parsed
with these strict records (shared/state/schema.py): unknown keys are errors, types are exact,
NaN is refused, sizes are capped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NewType

from hunkwise.shared.errors import UsageError
from hunkwise.shared.state.schema import Constraint, F, Public, Record, RecordError, Tag, reader

if TYPE_CHECKING:
    # Some are named only in quotes, as the document a `Public` record's public() returns.
    from hunkwise.shared.state.documents import (  # noqa: F401
        CheckpointDoc,
        DecisionDoc,
        FindingDoc,
        FreezeDoc,
        NoteDoc,
        OverlapDoc,
        ReportDoc,
        SignalDoc,
        TaskDoc,
    )


TaskId = NewType("TaskId", str)
SessionId = NewType("SessionId", str)

TASK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SESSION_RE = re.compile(r"sess-\d{8}-\d{4}-[A-Za-z0-9_.-]{1,64}@[A-Za-z0-9_.-]{1,64}")
ROLE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_RANGE_RE = re.compile(r"^(?P<path>.+):(?P<start>\d+)-(?P<end>\d+)$")

MAX_TEXT = 64 * 1024


class TaskState(StrEnum):
    ASSIGNED = "assigned"
    IN_PROGRESS = "in_progress"
    REPORTED = "reported"
    ACCEPTED = "accepted"
    CHANGES_REQUESTED = "changes_requested"
    REJECTED = "rejected"
    DEFERRED = "deferred"
    REVERTED = "reverted"


INACTIVE = (TaskState.ACCEPTED, TaskState.REJECTED, TaskState.REVERTED)


class AuditState(StrEnum):
    """Where one role's audit of a task stands (`Task.audit`, role -> state): asked and not
    answered yet, approved, or changes asked for. An auditor's answer is a verdict
    (`Verdict`: approve or changes); this is what the task keeps of it."""

    PENDING = "pending"
    APPROVED = "approved"
    CHANGES = "changes"

    @classmethod
    def of(cls, verdict: str | None) -> AuditState:
        """What an auditor's verdict makes of its role's audit."""
        return cls.APPROVED if verdict == "approve" else cls.CHANGES


Strict = Record


def check_task_id(value: str) -> TaskId:
    if not isinstance(value, str) or not TASK_ID_RE.fullmatch(value) or ".." in value:
        raise UsageError(f"malformed task id {value!r}: use letters, digits, '_', '.', '-' "
                         "(at most 64, starting with a letter or digit, no '..')")
    return TaskId(value)


_DRIVE_RE = re.compile(r"^[A-Za-z]:[\\/]")


def check_rel_path(path: str, what: str = "path", *, strict: bool = True) -> str:
    """A repository-relative path that cannot leave the repository or touch .git.

    `strict` (grants typed by people) also refuses backslashes and control characters;
    reports may name any file git can track.
    """
    if not path or "\0" in path:
        raise UsageError(f"{what} {path!r}: empty or holds a NUL byte")
    if path.startswith("/") or _DRIVE_RE.match(path):
        raise UsageError(f"{what} {path!r}: absolute paths are not allowed; give it from the repo root")
    if strict and "\\" in path:
        raise UsageError(f"{what} {path!r}: backslashes are not allowed; use '/'")
    parts = path.split("/")
    if ".." in parts:
        raise UsageError(f"{what} {path!r}: '..' would leave the repository")
    # (A part that lowers to `.git` leaves `.git` in the whole path lowered.)
    if ".git" in path.lower() and any(p.lower() == ".git" for p in parts):
        raise UsageError(f"{what} {path!r}: paths inside .git are never granted")
    if strict and any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise UsageError(f"{what} {path!r}: control characters are not allowed")
    return path


def report_path(path: str) -> str:
    """A path as reports carry it: UTF-8 text; bytes that are not UTF-8 become \\xNN."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class _GrantFields(Strict, init=False):
    """What every grant writes, in this order. A grant is a `GlobGrant`, a `RangeGrant` or
    a `PointGrant` (`kind`); see `Grant`."""

    kind: Literal["glob", "range", "point"]
    path: str = F(max_length=4096)
    start: int = F(default=0, ge=0)
    end: int = F(default=0, ge=0)
    # The symbol the grant was given by (`PATH::NAME`, `PATH::NAME+`), kept to show it by
    # name; written only when set, so grants written before it read back byte for byte.
    symbol: str | None = F(default=None, max_length=512, omit=True)


class GlobGrant(_GrantFields):
    """A write grant of a gitignore-style glob from the repo root. It names no lines:
    `start` and `end` stay 0, and are written (and read) as every grant has them."""

    kind: Literal["glob"]

    def __str__(self) -> str:
        return self.path


def span_text(start: int, end: int) -> str:
    """Lines as people write them: `92` for one line, `702-751` for more."""
    return f"{start}" if start == end else f"{start}-{end}"


class RangeGrant(_GrantFields):
    """A write grant of lines `start`-`end` (from 1, both included) of one file; given by
    a symbol, `symbol` names it (`PATH::NAME (START-END)`)."""

    kind: Literal["range"]

    def __str__(self) -> str:
        if self.symbol:
            return f"{self.path}::{self.symbol} ({span_text(self.start, self.end)})"
        return f"{self.path}:{span_text(self.start, self.end)}"


class PointGrant(_GrantFields):
    """A shared insertion point: whole new lines inserted after line `start` of one file
    (0: the top). Several active tasks may hold the same point. Lines inserted at it and
    committed widen it: `end` is the last of them (`start` when there are none), and a
    new line may go after any line from `start` to `end`."""

    kind: Literal["point"]

    def __str__(self) -> str:
        span = f"+{self.start}" if self.end <= self.start else f"+{self.start}-{self.end}"
        if self.symbol:
            return f"{self.path}::{self.symbol}+ ({span})"
        return f"{self.path}:{span}"


# A grant as tasks hold it; the state reads each as the kind it names.
Grant = Annotated[GlobGrant | RangeGrant | PointGrant, Tag("kind")]
LineGrant = RangeGrant | PointGrant

SYMBOL_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
MAX_BRIEF = 64 * 1024


class SymbolRef:
    """`PATH::NAME` or `PATH::NAME+` as typed: resolved against HEAD at assign
    (shared/hunks/symbols.py) into a range grant, or the point after (or inside) it."""

    __slots__ = ("path", "name", "point", "text")

    def __init__(self, path: str, name: str, point: bool, text: str) -> None:
        self.path, self.name, self.point, self.text = path, name, point, text

    def __repr__(self) -> str:
        return f"SymbolRef({self.text!r})"


def parse_write(text: str) -> Grant | SymbolRef:
    """A `--write` value: a grant, or a symbol still to resolve against HEAD."""
    if isinstance(text, str) and "::" in text:
        path, _, name = text.partition("::")
        point = name.endswith("+")
        name = name.removesuffix("+")
        path = path.removeprefix("./")
        if not path or not SYMBOL_RE.fullmatch(name):
            raise UsageError(f"grant {text!r}: a symbol grant is PATH::NAME or PATH::NAME+ "
                             "(a function, class, Class.method or module-level name)")
        check_rel_path(path, "grant")
        if any(c in path for c in "*?["):
            raise UsageError(f"grant {text!r}: a symbol grant needs a plain file path, not a glob")
        return SymbolRef(path, name, point, text)
    return parse_grant(text)


def parse_grant(text: str) -> Grant:
    """A grant as people type it: GLOB, PATH:START-END, PATH:N, or PATH:+N (a point)."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError("empty grant: give a GLOB, PATH:START-END or PATH:+N")
    pt = re.match(r"^(?P<path>.+):\+(?P<line>\d+)(-(?P<last>\d+))?$", text)
    if pt:
        path = check_rel_path(pt["path"].removeprefix("./"), "grant")
        if any(c in path for c in "*?["):
            raise UsageError(f"grant {text!r}: an insertion point needs a plain file path, not a glob")
        n = int(pt["line"])
        last = int(pt["last"]) if pt["last"] else n
        if last < n:
            raise UsageError(f"grant {text!r}: a point's span is reversed ({n} > {last})")
        return PointGrant(kind="point", path=path, start=n, end=last)
    m = _RANGE_RE.match(text)
    if m:
        path = check_rel_path(m["path"].removeprefix("./"), "grant")
        start, end = int(m["start"]), int(m["end"])
        if start < 1 or end < 1:
            raise UsageError(f"grant {text!r}: lines are numbered from 1")
        if end < start:
            raise UsageError(f"grant {text!r}: range is reversed ({start} > {end})")
        if any(c in path for c in "*?[") :
            raise UsageError(f"grant {text!r}: a line range needs a plain file path, not a glob")
        return RangeGrant(kind="range", path=path, start=start, end=end)
    one = re.match(r"^(?P<path>.+):(?P<line>\d+)$", text)
    if one and not any(c in one["path"] for c in "*?["):
        return parse_grant(f"{one['path']}:{one['line']}-{one['line']}")  # PATH:N, one line
    pattern = text.removeprefix("./")
    if re.search(r":\+?\d*(-\d*)?$", pattern) and not m:
        raise UsageError(f"grant {text!r}: a line range is PATH:START-END, both numbers "
                         "given; an insertion point is PATH:+N")
    check_rel_path(pattern.rstrip("/") or pattern, "grant")
    if pattern.startswith("!"):
        raise UsageError(f"grant {text!r}: negated patterns are not grants")
    # gitignore drops a pattern's trailing spaces unless they are escaped: a grant names
    # what it says, so `note ` (a file whose name ends in a space) is kept as `note\ `.
    stripped = pattern.rstrip(" ")
    if stripped != pattern:
        pattern = stripped + "\\ " * (len(pattern) - len(stripped))
    return GlobGrant(kind="glob", path=pattern)


def check_task(task: Task, key: str | None = None) -> None:
    """What a task read back from a file must hold beyond its schema (a hand-edited state,
    another machine's table): its id well-formed and the one it is filed under, every grant
    a path inside the repository, every range a range."""
    check_task_id(task.id)
    if key is not None and key != task.id:
        raise UsageError(f"task filed as {key!r} has the id {task.id!r}")
    for g in task.grants:
        check_rel_path(g.path.rstrip("/") or g.path, f"{task.id}'s grant", strict=False)
        if g.kind == "range" and not 1 <= g.start <= g.end:
            raise UsageError(f"{task.id}'s grant {g}: not a range of lines")


class Claim(Strict):
    session: str
    opened: float
    heartbeat: float
    ttl: int

    def stale(self, now: float) -> bool:
        """No heartbeat for longer than its TTL (`[claims] ttl_seconds`)."""
        return now - self.heartbeat > self.ttl


class Note(Strict, Public["NoteDoc"]):
    at: float
    by: str
    kind: str
    text: str = F(max_length=MAX_TEXT)


SavedKind = Literal["report", "wip", "handoff"]
ChangeKind = Literal["modified", "added", "deleted", "renamed", "mode", "binary"]
ReportStatus = Literal["done", "blocked", "failed"]
Verdict = Literal["approve", "changes"]
DecisionKind = Literal["priority", "architecture", "scope", "deploy"]


class Saved(Strict):
    """A revision of a task's work the state recorded: its report's snapshot, or one taken
    by a worker command while the work was unreported (`wip`). `coord restore` uses this
    and nothing else, so a report dropped into the inbox by hand cannot steer it.

    `hunks` holds, per path (as reports write it), each of the task's changes as
    attribution divided them: (old_start, old_lines, sha256 of its bytes); `whole` the
    paths changed as a whole. `own` is the tree of `base` plus exactly the task's changes
    (what `coord accept` would commit on `base`): what is lost and what a restore puts back
    are read from base -> own, every change of which is the task's. Records made before it
    was kept have none; theirs are read from base -> `tree`, picked by `hunks`.
    """

    kind: SavedKind
    revision: int = F(ge=1)
    tree: str = F(max_length=64)
    base: str | None = F(max_length=64)
    at: float
    ref: str = F(max_length=512)
    hunks: dict[str, list[tuple[int, int, str]]] = F(default_factory=dict)
    whole: dict[str, str] = F(default_factory=dict)
    own: str | None = F(default=None, max_length=64, omit=True)


class Handover(Strict):
    """A task handed over to another machine while this tree holds its edits.

    `held` is what this tree holds of the task (its changes when it left, then those of
    the last report brought back): the report that comes back replaces exactly that.
    `brought` is the newest revision brought into this tree; `pending` the report's
    (revision, machine, snapshot tree, base tree) waiting for `coord next`.
    """

    machine: str = F(max_length=64)
    held: Saved | None = None
    brought: int = 0
    pending: tuple[int, str, str, str] | None = None


DISCLAIMED = "not:"


class Recheck(Strict):
    """The accept recheck of a task's revision: its checks on HEAD + exactly its changes,
    in a scratch checkout (`commit`: the commit that was checked, landed or not)."""

    passed: bool
    at: float
    revision: int
    commit: str
    checks: list[CheckResult] = F(default_factory=list)
    # The `[checkout] setup` command that failed, when one did (no check ran then).
    setup: CheckResult | None = None


class Launch(Strict):
    """The agent process `coord launch` started for a task: enough to tell whether it
    still runs (the pid and its start time in the kernel's clock ticks, so a reused pid
    is not taken for it), where its output goes, and its tmux window."""

    agent: str = F(max_length=64)
    session: str = F(max_length=200)
    pid: int = F(ge=1)
    # /proc/<pid>/stat field 22 (start time since boot, in clock ticks); None off Linux.
    proc_start: int | None = None
    started: float
    log: str = F(max_length=4096)
    prompt_file: str = F(max_length=4096)
    tmux: str | None = F(default=None, max_length=200)
    command: list[str] = F(default_factory=list, max_length=200)
    seq: int = F(default=1, ge=1)


class Task(Strict):
    id: str
    title: str = F(max_length=MAX_TEXT)
    expect: str = F(max_length=MAX_TEXT)
    state: TaskState = TaskState.ASSIGNED
    batch: int = 1
    grants: list[Grant]
    checks: list[str] = F(default_factory=list)
    exclusive: bool = False
    session: str | None = None
    claim: Claim | None = None
    revision: int = 0
    notes: list[Note] = F(default_factory=list)
    created_at: float
    updated_at: float
    last_report: str | None = None
    commit: str | None = None
    held_until_thaw: bool = False
    reserved_for: str | None = None
    served_revision: int = 0
    audit: dict[str, AuditState] = F(default_factory=dict)
    # Changes in the task's grants when it started that its own reports had not claimed
    # (path -> identities): never claimed silently (SPEC.md, "inherited").
    inherited: dict[str, list[str]] = F(default_factory=dict)
    # What its newest report claimed (path -> identities); an identity `not:<id>` is a
    # contested change at a boundary it disclaimed (said is not its own).
    claimed: dict[str, list[str]] = F(default_factory=dict)
    # The status of its newest report (done, blocked, failed).
    last_status: str | None = None
    # The newest revision of its work the state recorded (see Saved), and the counter of
    # its unreported snapshots.
    saved: Saved | None = None
    wip_seq: int = 0
    # Handed over to another machine with its edits (see Handover).
    handover: Handover | None = None
    # The newest accept recheck (coord accept --recheck).
    recheck: Recheck | None = None

    _written_when_set: ClassVar[frozenset[str]] = frozenset({"recheck"})


    # The agent process `coord launch` started for it (written only when there is one).
    launch: Launch | None = F(default=None, omit=True)
    # Free text for the worker alone (`coord assign --brief-file`): shown at `worker start`,
    # never echoed back to the coordinator; written only when set.
    brief: str = F(default="", max_length=MAX_BRIEF, omit=True)

    @property
    def active(self) -> bool:
        return self.state not in INACTIVE

    def stale(self, now: float) -> bool:
        """Its claim is stale while it is in progress. A worker that reported was told to
        stop: its claim is kept only so it may amend its report, and its silence is no sign
        of trouble (issue 26)."""
        return self.claim is not None and self.state == TaskState.IN_PROGRESS \
            and self.claim.stale(now)

    def public(self) -> TaskDoc:
        return {
            "id": self.id,
            "title": self.title,
            "expect": self.expect,
            "state": str(self.state),
            "batch": self.batch,
            "grants": [str(g) for g in self.grants],
            "checks": list(self.checks),
            "session": self.session,
            "exclusive": self.exclusive,
            "revision": self.revision,
            "commit": self.commit,
            "audit": dict(self.audit),
            "reserved_for": self.reserved_for,
        }


class Freeze(Strict, Public["FreezeDoc"]):
    commit: str | None
    batch: int
    deferred: list[str] = F(default_factory=list)
    by: str
    at: float
    fingerprint: str
    tree: str
    index: str


class SignalType(StrEnum):
    READY_FOR_REVIEW = "READY_FOR_REVIEW"
    REVIEWED = "REVIEWED"
    CHANGES_REQUESTED = "CHANGES_REQUESTED"
    HANDOFF = "HANDOFF"
    CHECKPOINT = "CHECKPOINT"
    BLOCKED_ON = "BLOCKED_ON"
    DECISION = "DECISION"
    # The coordinator changed the task (`coord edit`): title, expectation, brief or checks.
    TASK_CHANGED = "TASK_CHANGED"


class Signal(Strict):
    id: str
    sender: str = F(key="from")
    to: str
    type: SignalType
    about: str = F(max_length=MAX_TEXT)
    payload: str = F(default="", max_length=MAX_TEXT)
    state: Literal["pending", "delivered"] = "pending"
    created_at: float
    acked_by: list[str] = F(default_factory=list)

    def public(self) -> SignalDoc:
        return {"id": self.id, "from": self.sender, "to": self.to, "type": str(self.type),
                "about": self.about, "payload": self.payload, "state": self.state,
                "created_at": self.created_at}


class Checkpoint(Strict, Public["CheckpointDoc"]):
    task: str
    session: str
    at: float
    next: str = F(max_length=MAX_TEXT)
    context: str = F(default="", max_length=MAX_TEXT)
    files: list[str] = F(default_factory=list)
    commits: list[str] = F(default_factory=list)
    kind: Literal["checkpoint", "handoff", "recovery"] = "checkpoint"
    to: str | None = None
    file: str | None = None
    # The task's own changes when it was taken (snapshot tree, base tree, its hunks): they
    # travel with the checkpoint, and a handoff's are put into the taking machine's tree.
    saved: Saved | None = None


class ClaimEntry(Strict):
    """A claim a machine's session holds on a task another machine coordinates: the
    request the authority applies at its next sync."""

    task: str = F(max_length=64)
    session: str = F(max_length=200)
    state: Literal["in_progress", "reported"]
    revision: int = F(ge=0)
    opened: float
    heartbeat: float
    ttl: int = F(ge=1)


class Decision(Strict, Public["DecisionDoc"]):
    id: str
    task: str
    session: str
    question: str = F(max_length=MAX_TEXT)
    kind: DecisionKind
    state: Literal["open", "answered"] = "open"
    answer: str | None = None
    asked_at: float
    answered_at: float | None = None
    batch: int


STATE_VERSION = 2


class State(Strict):
    # Version 2: tasks carry `inherited`/`claimed`; finished work moves to the archive at
    # thaw. `store.load` migrates older versions step by step and refuses newer ones.
    version: int = STATE_VERSION
    next_task: int = 1
    batch: int = 1
    tasks: dict[str, Task] = F(default_factory=dict)
    freeze: Freeze | None = None
    ranges_at: str | None = None
    sessions: dict[str, float] = F(default_factory=dict)
    signals: list[Signal] = F(default_factory=list)
    checkpoints: dict[str, Checkpoint] = F(default_factory=dict)
    decisions: list[Decision] = F(default_factory=list)
    seq: dict[str, int] = F(default_factory=dict)
    interventions: dict[str, int] = F(default_factory=dict)

    def next_id(self, prefix: str, day: str) -> str:
        key = f"{prefix}-{day}"
        self.seq[key] = self.seq.get(key, 0) + 1
        return f"{key}-{self.seq[key]:03d}"


# ---- the review contract -------------------------------------------------------------

Sha256 = Annotated[str, Constraint(pattern=r"^[0-9a-f]{64}$")]
Oid = Annotated[str, Constraint(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")]
Mode = Annotated[str, Constraint(pattern=r"^[0-7]{6}$")]
ShortText = Annotated[str, Constraint(max_length=MAX_TEXT)]
Count = Annotated[int, Constraint(ge=0, le=10**9)]


class HunkEntry(Strict):
    old_start: Count
    old_lines: Count
    new_start: Count
    new_lines: Count
    sha256: Sha256


def _inside(v: str) -> str:
    """A path a report names: inside the repository (see check_rel_path)."""
    try:
        return check_rel_path(v, strict=False)
    except UsageError as e:
        raise RecordError(e.message) from None


def _task_id(v: str) -> str:
    if not TASK_ID_RE.fullmatch(v) or ".." in v:
        raise RecordError(f"malformed task id {v!r}")
    return v


class ChangeEntry(Strict):
    path: str = F(max_length=4096, check=_inside)
    kind: ChangeKind
    old_path: str | None = F(default=None, max_length=4096, check=_inside)
    old_mode: Mode | None = None
    new_mode: Mode | None = None
    old_oid: Oid | None = None
    new_oid: Oid | None = None
    hunks: list[HunkEntry] = F(default_factory=list, max_length=100_000)
    # For a file the task holds by line ranges: per range, the digest of the range's lines
    # before and after the task's edits (see shared/hunks/taskview.py: region identities).
    regions: list[Sha256] = F(default_factory=list, max_length=10_000)


class CheckResult(Strict):
    command: ShortText
    exit_code: int
    passed: bool
    duration_s: float = F(ge=0)
    output_tail: str = F(max_length=MAX_TEXT)


class Overlap(Strict, Public["OverlapDoc"]):
    path: str = F(max_length=4096)
    task_id: str | None = None
    note: ShortText


class ProposedCommit(Strict):
    subject: str = F(min_length=1, max_length=1000)
    body: ShortText = ""


class _Report(Strict, Public["ReportDoc"], init=False):
    """What every inbox report holds: the review contract (SPEC.md, "Report"). A report is
    a `WorkReport` or an `AuditVerdict` (`kind`); both write every field, in this order."""

    schema_version: Literal[1]
    task_id: str = F(check=_task_id)
    status: ReportStatus
    session: str | None = F(max_length=200)
    created_at: str = F(max_length=64)
    base_commit: str | None = F(max_length=64)
    title: ShortText
    expect: ShortText
    summary: ShortText
    changes: list[ChangeEntry] = F(max_length=100_000)
    patch_sha256: Sha256
    snapshot: str = F(max_length=64)
    revision: int = F(ge=1)
    report_id: str = F(max_length=256)
    checks: list[CheckResult] = F(max_length=1000)
    overlaps: list[Overlap] = F(max_length=100_000)
    unfinished: list[ShortText] = F(max_length=1000)
    proposed_commit: ProposedCommit
    reason: ShortText | None = None
    kind: Literal["task", "review"] = "task"
    checks_skipped: bool = False
    # Where the checks ran: "isolated" (HEAD + exactly the task's changes, in a scratch
    # checkout) or "tree" (the shared tree). Absent (None) in a report of an earlier
    # release, which ran them in the tree: read it with `where_checked`.
    checks_where: Literal["tree", "isolated"] | None = None
    _written_when_set: ClassVar[frozenset[str]] = frozenset({"checks_where"})

    @property
    def where_checked(self) -> str:
        return self.checks_where or "tree"
    # An audit verdict's; null in a work report. The reader refuses neither a verdict
    # without them nor a work report with them, as it never did (see AuditVerdict).
    role: str | None = F(default=None, max_length=64)
    verdict: Verdict | None = None


class WorkReport(_Report):
    """A worker's report of its work on a task (`worker done`, `blocked`, `failed`)."""

    kind: Literal["task"] = "task"


class AuditVerdict(_Report):
    """A reviewer's verdict on a task's revision (`worker review --verdict`): no changes,
    `status` done, and its role and verdict (which its writer always sets; a verdict
    without them approves nothing)."""

    kind: Literal["review"] = "review"


# An inbox report, read as the kind it names (a work report when it names none).
Report = Annotated[WorkReport | AuditVerdict, Tag("kind")]
_read_report: list[Callable[[Any], Any]] = []


def validate_report(doc: Any) -> Report:
    """A report document, read strictly as the kind it names."""
    if not _read_report:
        _read_report.append(reader(Report))
    report: Report = _read_report[0](doc)
    return report


class Finding(Strict):
    code: str
    path: str | None = None
    detail: str

    def public(self) -> FindingDoc:
        d: FindingDoc = {"code": self.code, "detail": self.detail}
        if self.path is not None:
            d["path"] = self.path
        return d
