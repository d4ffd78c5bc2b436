"""The documents commands print: one TypedDict per command's result, and the rows inside.

A command's core function returns one of these; `output.emit` prints it as the `--json`
document or hands it to the command's human renderer, so mypy checks every key the core
writes and every key the renderer reads. A TypedDict fixes names and types, not order: the
order of keys in the JSON is the order the core writes them, and stays as it was.
SPEC.md ("JSON shapes that scripts rely on") fixes some of these keys for scripts; the
others may grow. `NotRequired` marks a key present only sometimes.

Modules import this one under `TYPE_CHECKING` only: building these classes costs
milliseconds that every command, in an agent's loop, would pay. A record that prints as
one of these says so (`public()`, shared/state/models.py), so commands need no casts.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

# `from` is a keyword: documents with a `from` key take it from this base.
_From = TypedDict("_From", {"from": str})


# ---- what many documents hold ----------------------------------------------------------------

class TaskDoc(TypedDict):
    """A task as commands show it (`coord assign`, `coord next`, `worker start`...): SPEC's TASK."""

    id: str
    title: str
    expect: str
    state: str
    batch: int
    grants: list[str]
    checks: list[str]
    session: str | None
    exclusive: bool
    revision: int
    commit: str | None
    audit: dict[str, str]
    reserved_for: str | None


class SignalDoc(_From):
    """A signal between sessions (`coord signals`, `worker signals`, `worker start`)."""

    id: str
    to: str
    type: str
    about: str
    payload: str
    state: Literal["pending", "delivered"]
    created_at: float


class FreezeDoc(TypedDict):
    """The release freeze (`coord freeze`, `coord status`, `coord thaw` as `was`)."""

    commit: str | None
    batch: int
    deferred: list[str]
    by: str
    at: float
    fingerprint: str
    tree: str
    index: str


class NoteDoc(TypedDict):
    """A note on a task: a change request, a verdict, a decision (`worker start`'s `notes`)."""

    at: float
    by: str
    kind: str
    text: str


class SavedDoc(TypedDict):
    """A task's changes a checkpoint or handoff carries (`worker checkpoint`, `worker handoff`)."""

    kind: str
    revision: int
    tree: str
    base: str | None
    at: float
    ref: str
    # path -> [old_start, old_lines, sha256] of each change
    hunks: dict[str, list[list[int | str]]]
    whole: dict[str, str]


class CheckpointDoc(TypedDict):
    """Where a session stopped (`worker checkpoint`, `worker handoff`, `coord recover`)."""

    task: str
    session: str
    at: float
    next: str
    context: str
    files: list[str]
    commits: list[str]
    kind: Literal["checkpoint", "handoff", "recovery"]
    to: str | None
    file: str | None
    saved: SavedDoc | None


class DecisionDoc(TypedDict):
    """A question for the human supervisor (`coord decisions`, `coord decide`, `worker ask`)."""

    id: str
    task: str
    session: str
    question: str
    kind: str
    state: Literal["open", "answered"]
    answer: str | None
    asked_at: float
    answered_at: float | None
    batch: int


class LostWork(TypedDict):
    """A task whose recorded changes are gone from the tree (`coord status`, `coord board`)."""

    task: str
    paths: list[str]


class WatchEvent(TypedDict):
    """A recorded event: a write outside grants, a failed notice (`coord watch`, `coord status`)."""

    at: str
    kind: str
    path: str
    detail: str


class CommandResult(TypedDict):
    """One command's run: a report's check (`worker done`), a verify command (`coord verify`)."""

    command: str
    exit_code: int
    passed: bool
    duration_s: float
    output_tail: str


# ---- the review contract: a report and its validation ----------------------------------------

class HunkDoc(TypedDict):
    """A hunk of a reported change (`coord next`'s report)."""

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    sha256: str


class ChangeDoc(TypedDict):
    """A reported change of one path (`coord next`'s report)."""

    path: str
    kind: str
    old_path: str | None
    old_mode: str | None
    new_mode: str | None
    old_oid: str | None
    new_oid: str | None
    hunks: list[HunkDoc]
    regions: list[str]


class OverlapDoc(TypedDict):
    """A change the report names but does not claim (`coord next`'s report)."""

    path: str
    task_id: str | None
    note: str


class ProposedCommitDoc(TypedDict):
    """The commit message a report proposes (`coord next`'s report)."""

    subject: str
    body: str


class ReportDoc(TypedDict):
    """A report, the review contract, as `coord next` serves it (SPEC's "Report")."""

    schema_version: int
    task_id: str
    status: str
    session: str | None
    created_at: str
    base_commit: str | None
    title: str
    expect: str
    summary: str
    changes: list[ChangeDoc]
    patch_sha256: str
    snapshot: str
    revision: int
    report_id: str
    checks: list[CommandResult]
    overlaps: list[OverlapDoc]
    unfinished: list[str]
    proposed_commit: ProposedCommitDoc
    reason: str | None
    kind: Literal["task", "review"]
    checks_skipped: bool
    checks_where: NotRequired[str]
    role: str | None
    verdict: str | None


class FindingDoc(TypedDict):
    """A validation finding or warning (`coord review`, `coord next`): `{code, path?, detail}`."""

    code: str
    detail: str
    path: NotRequired[str]


class Validation(TypedDict):
    """A report checked against the tree (`coord next` embeds it; `coord review` extends it)."""

    ok: bool
    findings: list[FindingDoc]
    warnings: list[FindingDoc]


# ---- coord: tasks ------------------------------------------------------------------------------

class InitResult(TypedDict):
    """`coord init`: where the state lives."""

    state_dir: str
    inbox: str


class AssignResult(TypedDict):
    """`coord assign`."""

    task: TaskDoc
    held_until_thaw: bool
    warnings: list[str]


class GrantResult(TypedDict):
    """`coord grant`."""

    task: TaskDoc
    warnings: list[str]


class TaskRow(TaskDoc):
    """A task with its claim's staleness and age (`coord status`'s rows start as this)."""

    stale: bool
    claim_age_s: float | None


class StatusTask(TaskRow):
    """A task in `coord status`: whose claim on which machine, which machine coordinates it."""

    machine: str | None
    coordinator: str
    unreported_changes: bool
    # Its launched agent (coordinator/launch.py's AgentStatus), or null.
    agent: Any
    places: list[GrantPlace]


class InboxCount(TypedDict):
    """The inbox as `coord status` counts it."""

    pending: int


class UnownedChange(TypedDict):
    """A change under no grant (`coord status` lists it, `coord discard` removes it)."""

    path: str
    kind: str
    lines: str | None


class ContestedChange(TypedDict):
    """A change several tasks' grants reach: a conflict or an ambiguous one (`coord status`)."""

    path: str
    tasks: list[str]
    lines: str | None


class SubmoduleChange(TypedDict):
    """A submodule holding changes not committed inside it (`coord status`)."""

    path: str
    modified: bool
    untracked: bool


class StatusResult(TypedDict):
    """`coord status`."""

    events: list[WatchEvent]
    lost: list[LostWork]
    tasks: list[StatusTask]
    interventions: int
    decisions_open: int
    signals_pending: int
    freeze: FreezeDoc | None
    batch: int
    inbox: InboxCount
    unowned: list[UnownedChange]
    conflicts: list[ContestedChange]
    ambiguous: list[ContestedChange]
    # What a crashed `coord accept` left and this status repaired (coordinator/accept.py).
    repaired: Repaired | None
    hidden_tasks: int
    index_dirty: bool
    staged: list[str]
    config_differs: bool
    settings_problem: NotRequired[str | None]
    submodules: NotRequired[list[SubmoduleChange]]
    # Reported tasks whose newest report is in none of this inbox's folders.
    reports_gone: NotRequired[list[str]]


class BriefClaim(TypedDict):
    """An open claim in `coord status --brief`."""

    task: str
    session: str
    age_s: int
    machine: str
    stale: bool
    state: str


class BriefDecision(TypedDict):
    """An open decision in `coord status --brief`."""

    id: str
    task: str
    kind: str
    question: str


class BlockedOn(_From):
    """A BLOCKED_ON signal to the coordinator in `coord status --brief`."""

    id: str
    about: str
    payload: str


class BlockedReport(TypedDict):
    """A pending report of a blocked task in `coord status --brief`."""

    task: str
    reason: str


class VerifySummary(TypedDict):
    """The newest verify record, in short (`coord status --brief`, `coord board`)."""

    record: str
    ok: bool
    commit: str | None
    batch: int | None
    at: str | None
    failing: list[str]
    problems: list[str]


class SendResult(TypedDict):
    """`coord status --brief --send`: how many notifiers it went to, and what failed."""

    sent_to: int
    errors: list[str]


class BriefResult(TypedDict):
    """`coord status --brief`."""

    brief: str
    claims: list[BriefClaim]
    decisions: list[BriefDecision]
    blocked_on: list[BlockedOn]
    reports_waiting: list[str]
    blocked: list[BlockedReport]
    freeze: FreezeDoc | None
    verify: VerifySummary | None
    sent: NotRequired[SendResult]


# ---- coord: the inbox and the verdicts ---------------------------------------------------------

class InboxRow(TypedDict):
    """A pending report (or audit verdict) in `coord inbox`."""

    task_id: str
    kind: Literal["report", "verdict"]
    status: str
    role: str | None
    title: str
    checks_passed: int
    checks_total: int
    created_at: str
    revision: int
    session: str | None
    age_s: NotRequired[float]


class InboxResult(TypedDict):
    """`coord inbox`."""

    reports: list[InboxRow]


class DiffFile(TypedDict):
    """A file of `coord diff`: lines added and removed (None for a binary file)."""

    added: int | None
    removed: int | None
    old_path: NotRequired[str]
    path: str


class FromSnapshot(TypedDict):
    """The report `coord diff --from-snapshot` read the patch from."""

    snapshot: str
    revision: int
    machine: str
    session: str | None


class DiffResult(TypedDict):
    """`coord diff` (also `coord next --diff`, and `worker review` without a verdict)."""

    task: str
    base: str | None
    files: list[DiffFile]
    patch: str
    from_snapshot: NotRequired[FromSnapshot]
    stat: NotRequired[str]
    tree: NotRequired[str]
    # The task's line grants in HEAD's lines and the working tree's (from the tree only).
    places: NotRequired[list[GrantPlace]]


class ClaimedSpan(TypedDict):
    """One change a task would commit: its lines in the working tree now (`tree`: first
    and last line; an empty span for a pure removal, after the line before it) and in
    HEAD's (`head`), and how many lines it adds and removes."""

    tree: list[int]
    head: list[int]
    added: int
    removed: int


class ClaimedFile(TypedDict):
    """A file of what a task would commit (`coord next`, `worker done`)."""

    path: str
    kind: str
    added: int
    removed: int
    spans: list[ClaimedSpan]


class NextReport(TypedDict):
    """The report `coord next` served, with its validation."""

    report: ReportDoc
    validation: Validation
    task: TaskDoc
    audit: dict[str, str]
    # What accept would commit, per file, in the working tree's lines now.
    claimed: NotRequired[list[ClaimedFile]]
    # The task's line grants in HEAD's lines and the working tree's.
    places: NotRequired[list[GrantPlace]]


class NextResult(TypedDict):
    """`coord next`: `next` is null when the inbox is empty."""

    next: NextReport | None
    pending: int
    diff: NotRequired[DiffResult]


class ReviewResult(Validation):
    """`coord review`."""

    task: str
    revision: int


class RequestChangesResult(TypedDict):
    """`coord request-changes`."""

    task: TaskDoc
    note: str
    # The agent started again (`--relaunch`): coordinator/launch.py's LaunchResult.
    relaunched: NotRequired[Any]


class DeferResult(TypedDict):
    """`coord defer`."""

    task: TaskDoc


class RejectResult(TypedDict):
    """`coord reject`."""

    task: TaskDoc
    discarded: list[str]


class RevertResult(TypedDict):
    """`coord revert`."""

    commit: str
    task: str
    state: str
    reverts: str
    paths: list[str]
    tree_left: list[str]
    warnings: list[str]


class AcceptResult(TypedDict):
    """`coord accept`."""

    commit: str
    task: str
    paths: list[str]
    revision: int
    warnings: list[str]
    recheck: RecheckDoc


class RecheckDoc(TypedDict):
    """The accept recheck: the task's checks on HEAD + exactly its changes."""

    ran: bool
    passed: NotRequired[bool]
    checks: list[CommandResult]
    setup_reused: NotRequired[bool]


class LeftOut(TypedDict):
    """A change of the shared tree that an isolated check's checkout did not hold."""

    path: str
    whose: str


class CheckRunResult(TypedDict):
    """`worker check`: the task's checks as `worker done` runs them, nothing delivered."""

    task: str
    where: str
    commit: str | None
    passed: bool
    checks: list[CommandResult]
    left_out: list[LeftOut]
    note: str


class AcceptJournal(TypedDict):
    """The journal `coord accept` writes (`accept.json`) before it moves HEAD: what the next
    command needs to finish or undo an accept that crashed."""

    task: str
    commit: str
    head: str | None
    revision: int
    paths: list[str]
    recheck: str | None
    started: float


class Repaired(TypedDict):
    """A crashed `coord accept` the next command settled (`coord status`'s `repaired`)."""

    task: str
    commit: str
    landed: bool


class CommitResult(TypedDict):
    """`coord commit`."""

    commit: str
    paths: list[str]
    warnings: list[str]


# ---- coord: the release freeze ---------------------------------------------------------------

class FreezeResult(TypedDict):
    """`coord freeze`."""

    freeze: FreezeDoc
    already: bool


class ThawResult(TypedDict):
    """`coord thaw`: `was` and `archived` only when a freeze was lifted."""

    thawed: bool
    batch: int
    reopened: list[str]
    was: NotRequired[FreezeDoc]
    archived: NotRequired[int]


class DeferredEdit(TypedDict):
    """A deferred task's edits of its own grant during the freeze (`coord verify`)."""

    task: str
    paths: list[str]


class VerifyResult(TypedDict):
    """`coord verify` (also the record it saves, without `record`)."""

    ok: bool
    commit: str | None
    problems: list[str]
    commands: list[CommandResult]
    batch: int
    at: str
    tasks: list[str]
    deferred_edits: list[DeferredEdit]
    record: NotRequired[str]
    # `coord verify --dry`: HEAD, no freeze, nothing recorded.
    dry: NotRequired[bool]
    # The `[checkout] setup` command that failed (nothing else ran).
    setup: NotRequired[CommandResult]
    # `coord verify --bisect`: the first task commit of the batch that fails.
    bisect: NotRequired[BisectResult]
    culprit: NotRequired[str | None]


class BisectProbe(TypedDict):
    """One run of a failing command during a bisect."""

    commit: str
    task: str | None
    alone: bool
    command: str
    exit_code: int
    passed: bool
    duration_s: float


class BisectResult(TypedDict):
    """Which task commit of the batch first fails the commands verify saw failing."""

    culprit: str | None
    commit: str | None
    alone: bool | None
    base: str | None
    commands: list[str]
    tasks: list[str]
    ran: list[BisectProbe]
    note: str


# ---- coord: sessions, signals, audits, decisions -----------------------------------------------

class RecoverResult(TypedDict):
    """`coord recover`: a retroactive handoff, or a released reservation."""

    task: TaskDoc
    handoff: CheckpointDoc | None
    stale_session: str | None
    released_reservation: NotRequired[str]


class CoordSignalsResult(TypedDict):
    """`coord signals` (`acked` with `--ack`)."""

    signals: list[SignalDoc]
    acked: NotRequired[list[str]]


class AuditResult(TypedDict):
    """`coord audit`."""

    task: str
    audit: dict[str, str]
    signals: list[SignalDoc]
    addressed: dict[str, list[str]]


class IndexResult(TypedDict):
    """`coord index`."""

    markdown: str
    output: str | None


class DecisionsResult(TypedDict):
    """`coord decisions`."""

    decisions: list[DecisionDoc]
    interventions: int


class DecideResult(TypedDict):
    """`coord decide` (and an answer posted on `coord board`)."""

    decision: DecisionDoc
    reopened: str | None
    relaunched: NotRequired[Any]


# ---- coord: protection and recovery ------------------------------------------------------------

class RestoreResult(TypedDict):
    """`coord restore`."""

    task: str
    restored: list[str]
    revision: int
    kind: str


class KeptChange(TypedDict):
    """A change `coord discard` named but kept, and why."""

    path: str
    lines: str | None
    reason: str


class DiscardResult(TypedDict):
    """`coord discard PATH[:START-END]`."""

    target: str
    discarded: list[UnownedChange]
    kept: list[KeptChange]
    paths: list[str]
    ref: str | None
    undo: str | None


class UndoResult(TypedDict):
    """`coord discard --undo REF`."""

    ref: str
    restored: list[str]


class AgentHook(TypedDict):
    """An agent's guard `coord install-hooks --agent` wrote (and the skills, for codex)."""

    hook: str
    skills: NotRequired[list[str]]


class InstallHooksResult(TypedDict):
    """`coord install-hooks`: `agent` (the first agent's hook) and `agents` with `--agent`."""

    hooks: list[str]
    chained: list[str]
    agent: NotRequired[str]
    agents: NotRequired[dict[str, AgentHook]]
    notes: NotRequired[list[str]]


class UninstallHooksResult(TypedDict):
    """`coord uninstall-hooks`."""

    removed: list[str]
    restored: list[str]
    agent: str | None
    agents: dict[str, str | None]
    skills: list[str]


# ---- coord: watching and the board -----------------------------------------------------------

class ReportArrival(TypedDict):
    """A report `coord watch` saw arrive; an unreadable one has `error` instead of its fields."""

    task_id: str
    status: str
    title: NotRequired[str]
    revision: NotRequired[int]
    kind: NotRequired[str]
    summary: NotRequired[str]
    checks_passed: NotRequired[int]
    checks_total: NotRequired[int]
    file: str
    reason: NotRequired[str]
    error: NotRequired[str]


class EventFacts(TypedDict, total=False):
    """The facts an event carries after its head, by kind: a report's are its
    `ReportArrival`; the others' name the task, session, decision, signal, batch or paths."""

    # a report (ReportArrival)
    task_id: str
    status: str
    title: str
    revision: int
    kind: str
    summary: str
    checks_passed: int
    checks_total: int
    file: str
    reason: str
    error: str
    # a stale claim, a decision, a BLOCKED_ON signal
    session: str
    heartbeat_age_s: int
    decision: str
    question: str
    signal: str
    sender: str
    about: str
    payload: str
    # a freeze, a thaw, a verify result, lost work
    batch: int | None
    commit: str | None
    deferred: list[str]
    ok: bool
    failing: list[str]
    paths: list[str]


class NotifyEvent(EventFacts):
    """An event for the supervisor (coordinator/notify.py), as `[notify] command` reads it
    on stdin: its kind (`event`), stable id, time, subject and body, then its facts."""

    event: str
    id: str
    at: str
    subject: str
    body: str


class Delivered(TypedDict):
    """A notification `coord watch` delivered."""

    event: str
    id: str
    subject: str


class NotifyFailure(TypedDict):
    """A notification `coord watch` could not deliver (yet)."""

    id: str
    errors: list[str]
    attempts: int


class WatchResult(TypedDict):
    """`coord watch`."""

    notified: list[ReportArrival]
    events: list[WatchEvent]
    delivered: list[Delivered]
    notify_failures: list[NotifyFailure]


class BoardClaim(TypedDict):
    """A task's claim on `coord board`."""

    session: str
    opened: str
    heartbeat: str
    heartbeat_age_s: int
    ttl: int
    stale: bool


class BoardTask(TaskDoc):
    """A task on `coord board`."""

    last_status: str | None
    claim: BoardClaim | None
    agent: Any


class ReportHead(TypedDict):
    """What `coord board` reads of a pending report's file (empty strings when unreadable)."""

    status: str
    title: str
    kind: str
    reason: str


class QueueRow(ReportHead):
    """A pending report in `coord board`'s inbox queue."""

    task_id: str
    revision: int
    file: str
    delivered: str
    age_s: int


class BoardInbox(TypedDict):
    """The inbox on `coord board`."""

    pending: int
    queue: list[QueueRow]


class BoardSignal(SignalDoc):
    """A pending signal on `coord board`."""

    for_coordinator: bool


class BoardState(TypedDict):
    """Everything `coord board` shows (served as `state.json`)."""

    at: str
    repo: str
    batch: int
    tasks: list[BoardTask]
    inbox: BoardInbox
    signals: list[BoardSignal]
    decisions: list[DecisionDoc]
    interventions: int
    freeze: FreezeDoc | None
    verify: VerifySummary | None
    lost: list[LostWork]
    events: list[WatchEvent]
    error: NotRequired[str]


class ServeResult(TypedDict):
    """`coord board`, once it stops."""

    url: str
    requests: int


# ---- worker ------------------------------------------------------------------------------------

class RecordedLoss(TypedDict):
    """A task whose recorded work is gone, and the way back (`lost` of `worker heartbeat`...)."""

    task: str
    paths: list[str]
    restore: str


class Recorded(TypedDict):
    """What every worker command adds (`worker heartbeat`, `worker signals`...): `lost`."""

    lost: NotRequired[list[RecordedLoss]]


class GuardKnows(TypedDict):
    """`worker start`: whether the agent hooks now know this session, and by what (the
    agent's own session variable mapped to it, or COORD_SESSION)."""

    known: bool
    agent: str | None
    by: str | None


class SessionResult(TypedDict):
    """`worker start --role R` (no task): the session and its pending signals."""

    task: None
    session: str
    role: str
    checkpoint: None
    signals: list[SignalDoc]
    notes: list[NoteDoc]
    guard: NotRequired[GuardKnows]


class LostPaths(TypedDict):
    """The task's recorded work that is gone from the tree, and the way back (`worker start`)."""

    paths: list[str]
    restore: str


class StartResult(TypedDict):
    """`worker start ID`: the task's brief, and where the last session stopped."""

    checkpoint: CheckpointDoc | None
    task: TaskDoc
    session: str
    placed: list[str] | None
    signals: list[SignalDoc]
    expect: str
    notes: list[NoteDoc]
    lost: LostPaths | None
    # The coordinator's brief for the worker (free text), and where each line grant
    # stands in HEAD's and the working tree's lines.
    brief: str
    places: list[GrantPlace]
    guard: NotRequired[GuardKnows]


class DeliveredReport(TypedDict):
    """The report `worker done`, `worker blocked` or `worker failed` delivered."""

    id: str
    revision: int
    status: str
    file: str
    changes: int
    hunks: int
    checks_passed: int
    checks_total: int
    overlaps: list[OverlapDoc]


class OutsideChange(TypedDict):
    """A change in a file the task holds or touches that is not the task's (`worker done`):
    another task's (`task_id`) or under no grant (`task_id` null)."""

    path: str
    lines: str
    task_id: str | None
    note: str


class DeliverResult(TypedDict):
    """`worker done`, `worker blocked`, `worker failed`."""

    task: TaskDoc
    report: DeliveredReport
    # The lines it claimed, per file, in the working tree's lines (and HEAD's).
    claimed: NotRequired[list[ClaimedFile]]
    outside_grants: NotRequired[list[OutsideChange]]
    warnings: NotRequired[list[str]]


class DeferredNote(TypedDict):
    """A heartbeat of a task a release freeze deferred: where it went, what to do."""

    batch: int
    next: str


class HeartbeatResult(Recorded):
    """`worker heartbeat`."""

    task: str
    session: str
    heartbeat: str
    ttl_s: int
    # The coordinator changed the task since the worker last looked (`coord edit`).
    changed: NotRequired[list[SignalDoc]]
    deferred: NotRequired[DeferredNote]


class CheckpointResult(Recorded):
    """`worker checkpoint`."""

    checkpoint: CheckpointDoc
    signal: SignalDoc


class HandoffResult(Recorded):
    """`worker handoff`."""

    handoff: CheckpointDoc
    signal: SignalDoc
    task: TaskDoc


class SignalResult(Recorded):
    """`worker signal`."""

    signal: SignalDoc


class WorkerSignalsResult(Recorded):
    """`worker signals`."""

    session: str
    signals: list[SignalDoc]
    acked: bool


class VerdictResult(TypedDict):
    """`worker review --verdict`."""

    task: str
    session: str
    role: str
    verdict: str
    file: str
    audit: dict[str, str]


class AskResult(Recorded):
    """`worker ask`."""

    decision: DecisionDoc


# ---- both sides ----------------------------------------------------------------------------------

class QuarantinedRecord(TypedDict):
    """A record from another machine that `coord sync` / `worker sync` refused."""

    machine: str
    record: str
    reason: str


class AppliedDoc(TypedDict):
    """What a sync applied of the other machines' records (`coord sync`, `worker sync`)."""

    signals: list[str]
    verdicts: list[str]
    tasks: list[str]
    checkpoints: list[str]
    reports: list[str]
    claims: list[str]
    works: list[str]
    quarantined: list[QuarantinedRecord]


class SyncResult(TypedDict):
    """`coord sync`, `worker sync`."""

    machine: str
    remote: str
    published: str | None
    pushed: bool
    fetched: list[str]
    applied: AppliedDoc
    warnings: list[str]


# ---- files hunkwise keeps -------------------------------------------------------------------------

class OutboxEntry(TypedDict):
    """An event `coord watch` took and has not delivered everywhere yet (`notify.json`)."""

    event: NotifyEvent
    sinks: list[str]
    attempts: int
    next_at: float
    errors: list[str]


class Outbox(TypedDict):
    """`notify.json`: every event id taken (with when it was done with), and what is pending."""

    sent: dict[str, float]
    pending: dict[str, OutboxEntry]


class ArchiveLine(TypedDict):
    """A line of `archive.jsonl`: a record the state dropped at thaw. `data` is open JSON:
    the record as its model dumps it (a task, a signal, a decision) or a session's last
    sight, read back only by code that knows its kind."""

    kind: Literal["task", "signal", "decision", "session"]
    data: dict[str, Any]


class Mirror(TypedDict):
    """`sync/mirror.json`: the tasks this machine holds only as a copy of another machine's
    published table (task id -> machine), and the commit each machine's ranges are at."""

    tasks: dict[str, str]
    ranges_at: dict[str, str | None]


class SeenChain(TypedDict):
    """What `sync/seen.json` remembers of a machine's fetched chain: the commit applied, and
    the records ("path oid") taken from it."""

    commit: str
    records: list[str]


class ErrorBody(TypedDict):
    """What failed, with `--json` (every command): SPEC's `{"error": {"code", "message"}}`."""

    code: int
    message: str
    details: NotRequired[str]


class GrantLines(TypedDict):
    """A line grant's lines in HEAD's numbering and in the working tree's (null when the
    file is gone from the tree or changed as a whole)."""

    head: list[int]
    tree: list[int] | None


class GrantPlace(TypedDict):
    """Where a line grant stands now (`worker start`, `coord status`, `coord next`,
    `coord diff`): `landmark` is a range's first line, or the line a point follows."""

    grant: str
    kind: str
    path: str
    symbol: str | None
    lines: GrantLines
    landmark: str | None


class EditResult(TypedDict):
    """`coord edit`: the task as it now is, what changed, the signal its worker got."""

    task: TaskDoc
    changed: list[str]
    signal: SignalDoc | None
