"""What other machines published, read as untrusted input and applied here.

Every record of a fetched chain (`refs/hunkwise/remote/<machine>/records`, see
shared/machines/sync.py) is parsed as strictly as a report in the inbox (size caps, duplicate keys,
NaN, the strict record); its id or session must name the machine whose ref holds it;
what fails is quarantined with its reason, once. The machine that holds a task in its own
state is its one authority: it applies remote audit verdicts under its lock. Other
machines keep a mirror of its published task table, replaced at every sync.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hunkwise.shared import git
from hunkwise.shared.errors import UsageError
from hunkwise.shared.machines.chains import (
    KEY_RE,
    MAX_RECORD_BYTES,
    REPORT_NAME_RE,
    SEEN,
    Applied,
    dump_json,
    has_object,
    load_json,
    ls_tree,
    machine_of,
    mirror,
    save_json,
    sync_dir,
)
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, machine_name, session_role
from hunkwise.shared.state.models import (
    INACTIVE,
    SESSION_RE,
    TASK_ID_RE,
    AuditState,
    AuditVerdict,
    Checkpoint,
    ClaimEntry,
    Report,
    Signal,
    SignalType,
    State,
    Task,
    TaskState,
    WorkReport,
    check_task,
)
from hunkwise.shared.state.schema import Record
from hunkwise.shared.state.signals import addressed_to, close_about

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import Mirror, SeenChain

R = TypeVar("R", bound=Record)
_SIG_ID_RE = re.compile(r"^sig-\d{8}-\d{3,9}@(?P<m>[A-Za-z0-9_-]{1,64})$")
_MACHINE_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# ---- apply what other machines published ---------------------------------------------------

def remote_machines(repo: Path, refs: dict[str, str] | None = None) -> dict[str, str]:
    """{machine: commit} of every fetched chain (from `refs`, {ref: commit}, when given)."""
    refs = git.list_refs(repo, f"{SEEN}/") if refs is None else refs
    found: dict[str, tuple[int, str]] = {}
    for line in (f"{ref} {oid}" for ref, oid in refs.items()):
        # The highest generation of each machine's chain (older ones go once compacted).
        m = re.fullmatch(rf"{SEEN}/([^/]+)/records(?:-([1-9][0-9]{{0,8}}))? ([0-9a-f]+)", line)
        if m and _MACHINE_RE.fullmatch(m[1]):
            gen = int(m[2] or 0)
            if m[1] not in found or found[m[1]][0] < gen:
                found[m[1]] = (gen, m[3])
    return {k: v[1] for k, v in found.items()}


def _quarantine(ctx: Ctx, machine: str, path: str, data: bytes, reason: str,
                applied: Applied) -> None:
    from hunkwise import inbox

    name = f"remote-{machine}-" + re.sub(r"[^A-Za-z0-9_.,=@-]", "_", path)[:200]
    tmp = ctx.lay.inbox / "tmp" / name
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(data[:MAX_RECORD_BYTES])
    inbox.quarantine(tmp, f"from {machine} ({path}): {reason}")
    applied.quarantined.append({"machine": machine, "record": path, "reason": reason})


def _parse(data: bytes, model: type[R], what: str) -> R:
    return store.parse_untrusted(data, model.model_validate, what, MAX_RECORD_BYTES)


def _read_report(ctx: Ctx, name: str, data: bytes) -> Report:
    """The same strict reading as a report in the inbox (inbox.read_report on a file)."""
    from hunkwise import inbox

    tmp = ctx.lay.inbox / "tmp" / f".remote-{os.getpid()}-{name}"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(data[:inbox.MAX_REPORT_BYTES + 1])
    try:
        return inbox.read_report(tmp)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def apply_remote(ctx: Ctx, machines: dict[str, str] | None = None) -> Applied:
    """Read every other machine's fetched records (`machines`: remote_machines, when the
    caller has it) and apply what is new and sound."""
    applied = Applied()
    me = machine_name()
    with store.locked(ctx.lay, name="sync.lock"):
        seen_path = sync_dir(ctx) / "seen.json"
        seen: dict[str, SeenChain] = load_json(seen_path)
        for machine, commit in sorted((remote_machines(ctx.repo) if machines is None
                                       else machines).items()):
            if machine == me:
                continue
            done = seen.get(machine)
            if done is not None and done.get("commit") == commit:
                continue
            records = set(done.get("records", []) if done is not None else [])
            now_records = _apply_machine(ctx, machine, commit, records, applied)
            seen[machine] = {"commit": commit, "records": sorted(now_records)}
        save_json(seen_path, seen)
    return applied


def _apply_machine(ctx: Ctx, machine: str, commit: str, done: set[str],
                   applied: Applied) -> set[str]:
    repo = ctx.repo
    top = ls_tree(repo, commit)
    listing: dict[str, str] = {}  # record path -> oid
    for folder in ("signals", "checkpoints", "reports", "claims"):
        if folder in top:
            for name, (_mode, oid) in ls_tree(repo, f"{commit}:{folder}").items():
                listing[f"{folder}/{name}"] = oid
    if "tasks.json" in top:
        listing["tasks.json"] = top["tasks.json"][1]
    todo = {p: o for p, o in listing.items() if f"{p} {o}" not in done}
    report_trees = {p: ls_tree(repo, o) for p, o in todo.items() if p.startswith("reports/")}
    blob_ids = [o for p, o in todo.items() if not p.startswith("reports/")]
    blob_ids += [t["report.json"][1] for t in report_trees.values() if "report.json" in t]
    blobs = git.cat_blobs(repo, blob_ids) if blob_ids else {}
    edits = ls_tree(repo, f"{commit}:edits") if "edits" in top else {}

    signals: list[Signal] = []
    checkpoints: dict[str, Checkpoint] = {}
    verdicts: list[tuple[str, bytes, AuditVerdict]] = []
    works: list[tuple[str, bytes, WorkReport, str, str]] = []
    claims: list[ClaimEntry] = []
    table: Table | None = None
    for path, oid in sorted(todo.items()):
        kind, _, name = path.partition("/")
        data = blobs.get(oid, b"")
        try:
            if kind == "signals":
                signals.append(_read_signal(data, path, name, machine))
            elif kind == "checkpoints":
                checkpoints[name] = _read_checkpoint(repo, data, path, name, machine, edits)
            elif kind == "claims":
                claims.append(_read_claim(data, path, name, machine))
            elif kind == "reports":
                entry = report_trees[path]
                if "report.json" not in entry:
                    raise UsageError("no report.json")
                data = blobs[entry["report.json"][1]]
                report = _read_machine_report(ctx, data, name, machine)
                if isinstance(report, AuditVerdict):
                    verdicts.append((name, data, report))
                elif {"snapshot", "base"} <= set(entry):
                    works.append((name, data, report, entry["snapshot"][1], entry["base"][1]))
                applied.reports.append(f"{machine}/{name}")
            elif path == "tasks.json":
                table = _parse_table(data, machine)
            else:
                raise UsageError("unknown record")
        except UsageError as e:
            _quarantine(ctx, machine, path, data, e.message, applied)
        done.add(f"{path} {oid}")
    _apply_state(ctx, machine, signals, checkpoints, verdicts, table, applied)
    if claims or works or checkpoints:
        from hunkwise.shared.machines.handover import apply_claims, apply_handbacks, apply_works

        apply_claims(ctx, machine, claims, applied)
        apply_works(ctx, machine, works, applied)
        apply_handbacks(ctx, machine, checkpoints, applied)
    # What left the published tree is forgotten here too: the bookkeeping stays small.
    return {r for r in done if r.split(" ", 1)[0] in listing}


def _read_signal(data: bytes, path: str, name: str, machine: str) -> Signal:
    """A signal of `machine`'s chain, refused unless its id and sender are that machine's."""
    sig = _parse(data, Signal, path)
    m = _SIG_ID_RE.fullmatch(sig.id)
    if sig.id != name or m is None or m["m"] != machine:
        raise UsageError(f"signal id {sig.id!r} is not one of {machine}'s")
    if machine_of(sig.sender) != machine:
        raise UsageError(f"sender {sig.sender!r} is not on {machine}")
    from hunkwise.shared.state.signals import check_target

    check_target(sig.to)
    return sig


def _read_checkpoint(repo: Path, data: bytes, path: str, name: str, machine: str,
                     edits: dict[str, tuple[str, str]]) -> Checkpoint:
    """A checkpoint of `machine`'s chain: its session on that machine, its edits travelling
    with it as the trees it names."""
    cp = _parse(data, Checkpoint, path)
    if machine_of(cp.session) != machine or not SESSION_RE.fullmatch(cp.session):
        raise UsageError(f"session {cp.session!r} is not on {machine}")
    if not KEY_RE.fullmatch(name) or not TASK_ID_RE.fullmatch(cp.task):
        raise UsageError(f"malformed checkpoint key {name!r}")
    if cp.saved is not None:
        # Its edits must travel with it, as the trees it names.
        trees = ls_tree(repo, edits[name][1]) if name in edits else {}
        if (trees.get("snapshot", ("", ""))[1], trees.get("base", ("", ""))[1],
                trees.get("own", ("", None))[1]) != (cp.saved.tree, cp.saved.base, cp.saved.own):
            raise UsageError("its edits are not the trees it names")
    return cp


def _read_claim(data: bytes, path: str, name: str, machine: str) -> ClaimEntry:
    """A claim of `machine`'s chain: the task its name says, a session on that machine."""
    rec = _parse(data, ClaimEntry, path)
    if rec.task != name or not TASK_ID_RE.fullmatch(rec.task):
        raise UsageError(f"claim record {name!r} names task {rec.task!r}")
    if not SESSION_RE.fullmatch(rec.session) or machine_of(rec.session) != machine:
        raise UsageError(f"session {rec.session!r} is not on {machine}")
    return rec


def _read_machine_report(ctx: Ctx, data: bytes, name: str, machine: str) -> Report:
    """A report of `machine`'s chain: a report file name, a session on that machine, and
    the task and revision its name says."""
    m = REPORT_NAME_RE.fullmatch(name)
    if m is None:
        raise UsageError(f"{name}: not a report file name")
    report = _read_report(ctx, name, data)
    if report.session is None or not SESSION_RE.fullmatch(report.session) \
            or machine_of(report.session) != machine:
        raise UsageError(f"session {report.session!r} is not on {machine}")
    if report.task_id != m["task"] or report.revision != int(m["rev"]):
        raise UsageError(f"name says {m['task']} r{m['rev']}, content says "
                         f"{report.task_id} r{report.revision}")
    return report


@dataclass
class Table:
    """Another machine's published task table (`tasks.json`), read."""

    ranges_at: str | None
    tasks: list[Task]


def _parse_table(data: bytes, machine: str) -> Table:
    if len(data) > MAX_RECORD_BYTES:
        raise UsageError("tasks.json: over the size limit")
    try:
        doc = store.strict_json_loads(data)
    except (ValueError, RecursionError) as e:
        raise UsageError(f"tasks.json: not valid JSON ({str(e)[:200]})") from None
    if not isinstance(doc, dict) or set(doc) != {"machine", "ranges_at", "tasks"} \
            or doc["machine"] != machine or not isinstance(doc["tasks"], list):
        raise UsageError(f"tasks.json: not a task table of {machine}")
    ranges_at = doc["ranges_at"]
    if ranges_at is not None and not (isinstance(ranges_at, str)
                                      and re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", ranges_at)):
        raise UsageError("tasks.json: malformed ranges_at")
    tasks = []
    for raw in doc["tasks"]:
        t = _parse(dump_json(raw), Task, "tasks.json")
        if not TASK_ID_RE.fullmatch(t.id) or ".." in t.id:
            raise UsageError(f"tasks.json: malformed task id {t.id!r}")
        try:
            check_task(t)  # what the local state would refuse at its next load
        except UsageError as e:
            raise UsageError(f"tasks.json: {e.message}") from None
        tasks.append(t)
    return Table(ranges_at=ranges_at, tasks=tasks)


def _apply_state(ctx: Ctx, machine: str, signals: list[Signal],
                 checkpoints: dict[str, Checkpoint], verdicts: list[tuple[str, bytes, AuditVerdict]],
                 table: Table | None, applied: Applied) -> None:
    from hunkwise.inbox import delivery

    mir_path = sync_dir(ctx) / "mirror.json"
    refs: list[tuple[str, str]] = []
    refused: list[tuple[str, bytes, str]] = []

    def record(d: delivery.Delivery) -> None:
        staged = {name: st for (name, _data, _report), st in zip(verdicts, d.staged, strict=True)}
        _apply_locked(ctx, machine, signals, checkpoints, verdicts, table, applied, mir_path,
                      lambda name: d.link(staged[name]), refs, refused)

    # Nothing slow under the state lock: each verdict is written (and fsynced) in tmp/
    # before it and only linked into new/ under it; refs and quarantines wait until after.
    delivery.deliver(ctx.lay.inbox, [delivery.Draft(data, report.task_id, report.revision)
                                     for _name, data, report in verdicts],
                     record, lasting=False)
    if refs:
        git.run(ctx.repo, "update-ref", "--stdin",
                input="".join(f"update {ref} {tree}\n" for ref, tree in refs).encode())
    for path, data, reason in refused:
        _quarantine(ctx, machine, path, data, reason, applied)


def _apply_locked(ctx: Ctx, machine: str, signals: list[Signal],
                  checkpoints: dict[str, Checkpoint],
                  verdicts: list[tuple[str, bytes, AuditVerdict]], table: Table | None,
                  applied: Applied, mir_path: Path, link: Callable[[str], object],
                  refs: list[tuple[str, str]], refused: list[tuple[str, bytes, str]]) -> None:
    """_apply_state's part under the state lock: the state, the mirror, and links."""
    with store.transaction(ctx.lay) as state:
        mir = mirror(ctx)
        if table is not None:
            _apply_table(ctx, state, mir, machine, table, applied, refused)
        known = {s.id for s in state.signals}
        for sig in signals:
            if sig.id not in known:
                state.signals.append(sig)
                applied.signals.append(sig.id)
        for key, cp in checkpoints.items():
            if key not in state.checkpoints or state.checkpoints[key].at < cp.at:
                state.checkpoints[key] = cp
                applied.checkpoints.append(key)
                if cp.saved is not None:  # keep its edits here until it is taken
                    kept = f"refs/hunkwise/remote-edits/{machine}/{git.ref_component(cp.task)}"
                    refs.append((kept, cp.saved.tree))
                    if cp.saved.own is not None:
                        refs.append((kept + "-own", cp.saved.own))
        _apply_verdicts(state, mir, machine, verdicts, applied, link, refused)
        save_json(mir_path, mir)


def _apply_table(ctx: Ctx, state: State, mir: Mirror, machine: str, table: Table,
                 applied: Applied, refused: list[tuple[str, bytes, str]]) -> None:
    """Another machine's published tasks into this state: those it coordinates, this
    machine's own claim and work kept where the authority has not seen them yet."""
    # A machine may publish only the tasks it coordinates: never one this machine
    # coordinates (active, or finished and archived at a thaw), never one first
    # mirrored from a third machine. Such an entry is quarantined with the reason.
    archived = {d.get("id") for d in store.archived(ctx.lay, "task")}
    for t in table.tasks:
        owner = mir["tasks"].get(t.id)
        if owner is None and (t.id in state.tasks or t.id in archived):
            # This machine's own task: never replaced by a remote's copy.
            refused.append((f"tasks.json/{t.id}", dump_json(t.model_dump(mode="json")),
                            f"{machine} published {t.id}, which {machine_name()} "
                            "coordinates; its copy is ignored"))
            continue
        if owner not in (None, machine):
            refused.append((f"tasks.json/{t.id}", dump_json(t.model_dump(mode="json")),
                            f"{machine} published {t.id}, which {owner} coordinates; "
                            "its copy is ignored"))
            continue
        local = state.tasks.get(t.id)
        if local is not None and _ahead(local, t, machine_name()):
            # Started or reported here and not yet answered: this machine's claim
            # and work stay until the authority's table shows them.
            t = t.model_copy(update={k: getattr(local, k) for k in LOCAL_FIELDS})
        elif local is not None and local.claim is not None and t.claim is not None \
                and (t.claim.session, t.claim.opened) == (local.claim.session,
                                                           local.claim.opened) \
                and machine_of(local.claim.session) == machine_name():
            # This machine's claim, answered: what lay in its grants here before it
            # started stays this machine's (the authority never saw this tree).
            t = t.model_copy(update={"inherited": local.inherited})
        state.tasks[t.id] = t
        mir["tasks"][t.id] = machine
        applied.tasks.append(t.id)
    gone = [tid for tid, m in mir["tasks"].items() if m == machine
            and tid not in {t.id for t in table.tasks}]
    for tid in gone:
        state.tasks.pop(tid, None)
        del mir["tasks"][tid]
    mir["ranges_at"][machine] = table.ranges_at


def _apply_verdicts(state: State, mir: Mirror, machine: str,
                    verdicts: list[tuple[str, bytes, AuditVerdict]], applied: Applied,
                    link: Callable[[str], object], refused: list[tuple[str, bytes, str]]) -> None:
    """Verdicts from another machine's auditors on this machine's tasks: counted, and
    linked into the inbox (`link`), as a local `worker review` would be."""
    for name, data, report in verdicts:
        task = state.tasks.get(report.task_id)
        if task is None or task.id in mir["tasks"]:
            continue  # not this machine's to decide
        role = session_role(report.session or "")
        if role not in task.audit:
            refused.append((f"reports/{name}", data,
                            f"{task.id} asks no audit of role {role!r}"))
            continue
        if report.revision != max(task.revision, 1):
            refused.append((f"reports/{name}", data,
                            f"verdict on revision {report.revision}; {task.id} is at "
                            f"revision {task.revision}"))
            continue
        task.audit[role] = AuditState.of(report.verdict)
        link(name)
        # The request it answers is closed, as a local verdict closes it: for the
        # reviewer's session, and for its role.
        who = report.session or ""
        close_about(state, SignalType.READY_FOR_REVIEW, task.id, who,
                    _answered_by(who, role))
        applied.verdicts.append(f"{task.id}: {role} {report.verdict} ({machine})")


def _answered_by(session: str, role: str) -> Callable[[Signal], bool]:
    """The review requests a verdict answers: those to its session, and to its role."""
    return lambda sig: addressed_to(sig, session) or sig.to.partition("@")[0] == role


LOCAL_FIELDS = ("state", "session", "claim", "revision", "last_report", "last_status", "saved",
                "wip_seq", "claimed", "inherited", "reserved_for", "served_revision")


def _ahead(local: Task, remote: Task, me: str) -> bool:
    """Is this machine's copy of a mirrored task ahead of the authority's table: started
    or reported here by a session of this machine, and not yet answered there?"""
    c, rc = local.claim, remote.claim
    if c is None or machine_of(c.session) != me \
            or local.state not in (TaskState.IN_PROGRESS, TaskState.REPORTED):
        return False
    if remote.state in INACTIVE or (rc is not None and rc.session != c.session):
        return False  # the authority finished it, or gave it to someone else
    if rc is not None and rc.opened == c.opened:  # it knows this claim
        return remote.revision < local.revision
    if remote.state not in (TaskState.ASSIGNED, TaskState.CHANGES_REQUESTED,
                            TaskState.IN_PROGRESS, TaskState.REPORTED):
        return False
    return remote.revision < local.revision or (
        remote.revision == local.revision and local.state == TaskState.IN_PROGRESS)


# ---- reading a task's report wherever it was delivered ---------------------------------------

def newest_report(ctx: Ctx, task_id: str) -> tuple[Report, str, str, str] | None:
    """(report, base tree, snapshot tree, machine) of the task's newest work report among
    this machine's inbox and every synced machine's records; None when there is none.
    Remote reports are read as strictly as the inbox's; a bad one is skipped."""
    from hunkwise import inbox

    found: list[tuple[int, int, Report, str, str, str]] = []
    for e in inbox.find_task_reports(ctx.lay.inbox, task_id):
        try:
            r = inbox.read_report(e.path)
        except UsageError:
            continue
        if r.kind == "task" and r.base_commit and has_object(ctx.repo, r.snapshot):
            found.append((r.revision, e.time_ns, r, f"{r.base_commit}^{{tree}}", r.snapshot,
                          machine_name()))
    for machine, commit in remote_machines(ctx.repo).items():
        for name, (_mode, oid) in ls_tree(ctx.repo, f"{commit}:reports").items():
            m = REPORT_NAME_RE.fullmatch(name)
            if m is None or m["task"] != task_id:
                continue
            entry = ls_tree(ctx.repo, oid)
            if not {"report.json", "snapshot", "base"} <= set(entry):
                continue
            data = git.cat_blobs(ctx.repo, [entry["report.json"][1]])[entry["report.json"][1]]
            try:
                r = _read_report(ctx, name, data)
            except UsageError:
                continue
            if r.kind != "task" or r.task_id != task_id or machine_of(r.session) != machine:
                continue
            found.append((r.revision, int(m["t"]), r, entry["base"][1], entry["snapshot"][1],
                          machine))
    if not found:
        return None
    found.sort(key=lambda f: (f[0], f[1]))
    _rev, _t, report, base, snap, machine = found[-1]
    return report, git.resolve(ctx.repo, base), snap, machine


def grants_at(repo: Path, task: Task, ranges_at: str | None, base: str) -> Task:
    """A copy of the task with its range grants mapped from `ranges_at` (where the state
    numbered them) to the tree `base`; unchanged when either is unknown here."""
    from hunkwise.shared.hunks import diff
    from hunkwise.shared.hunks.ownership import map_grant

    paths = sorted({g.path for g in task.grants if g.kind != "glob"})
    if not paths or not ranges_at or not has_object(repo, ranges_at):
        return task
    old = git.resolve(repo, f"{ranges_at}^{{tree}}")
    if old == base:
        return task
    by_path = {c.path: c for c in diff.diff_trees(repo, old, base, paths)}
    grants = []
    for g in task.grants:
        ch = by_path.get(g.path) if g.kind != "glob" else None
        if ch is not None and ch.status != "D":
            g = g.model_copy()
            map_grant(g, ch.hunks)
        grants.append(g)
    return task.model_copy(update={"grants": grants})
