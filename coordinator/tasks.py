"""`coord init`, `coord assign`, `coord status`."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from hunkwise import inbox
from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.hunks.diff import looks_binary
from hunkwise.shared.hunks.globs import glob_matches
from hunkwise.shared.hunks.ownership import find_conflicts
from hunkwise.shared.hunks.taskview import TreeView, active_tasks, sync_ranges, view
from hunkwise.shared.state import config, store
from hunkwise.shared.state.context import Ctx
from hunkwise.shared.state.models import (
    MAX_BRIEF,
    Grant,
    PointGrant,
    RangeGrant,
    State,
    SymbolRef,
    Task,
    TaskState,
    check_task_id,
    parse_write,
)

if TYPE_CHECKING:
    from hunkwise.shared.hunks.diff import Hunk
    from hunkwise.shared.state.documents import (
        AssignResult,
        BlockedOn,
        BlockedReport,
        BriefClaim,
        BriefDecision,
        BriefResult,
        ContestedChange,
        EditResult,
        GrantResult,
        InitResult,
        StatusResult,
        StatusTask,
        SubmoduleChange,
        TaskRow,
        UnownedChange,
    )


def init(ctx: Ctx) -> InitResult:
    with store.transaction(ctx.lay) as state:
        sync_ranges(ctx.repo, state)
    if not ctx.lay.state_file.exists():
        store.save(ctx.lay, state)
    return {"state_dir": str(ctx.lay.root), "inbox": str(ctx.lay.inbox)}


def _text_file(ctx: Ctx, path: str, what: str) -> bytes:
    """A committed regular text file at HEAD, for a line grant or a symbol."""
    found = git.blob_at(ctx.repo, "HEAD", path)
    if found is None:
        same = _same_named(path, git.tracked_and_untracked(ctx.repo))
        if same:
            lines = what.rpartition(":")[2] if ":" in what and "::" not in what else ""
            advice = (f"did you mean {same[0]}{':' + lines if lines else ''}? (grants are read "
                      f"from the repository root{_cwd_note(ctx)})")
        else:
            advice = (f"grants are read from the repository root{_cwd_note(ctx)}; to create "
                      f"{path} as a new file, grant the whole path ({path}, no line range)")
        raise UsageError(f"grant {what}: {path} is not a file at HEAD; a line range needs a "
                         f"committed file: {advice}")
    mode, data = found
    if mode not in ("100644", "100755"):
        raise UsageError(f"grant {what}: {path} is not a regular file at HEAD")
    if looks_binary(data):
        raise UsageError(f"grant {what}: {path} is binary; grant the whole file instead")
    return data


def _check_range(g: Grant, data: bytes) -> None:
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if g.end > lines:
        raise UsageError(f"grant {g}: {g.path} has {lines} lines at HEAD")


def _resolve(ref: SymbolRef, data: bytes) -> Grant:
    """A symbol at HEAD as the range grant it names, or its insertion point (`NAME+`)."""
    from hunkwise.shared.hunks.symbols import find

    span = find(data, ref.path, ref.name)
    if not ref.point:
        return RangeGrant(kind="range", path=ref.path, start=span.start, end=span.end,
                          symbol=ref.name)
    if span.point is None:
        raise UsageError(f"grant {ref.text}: {ref.name} is assigned on one line "
                         f"({ref.path}:{span.first}), so it has no inside to insert into; "
                         f"grant the line ({ref.path}:{span.first}) instead")
    return PointGrant(kind="point", path=ref.path, start=span.point, end=span.point,
                      symbol=ref.name)


def _same_named(pattern: str, files: list[str], most: int = 5) -> list[str]:
    """Files elsewhere in the tree whose name the pattern's last part matches."""
    import fnmatch

    last = pattern.rstrip("/").rpartition("/")[2]
    if not last or last in ("*", "**"):
        return []
    return [f for f in files if fnmatch.fnmatchcase(f.rpartition("/")[2], last)
            and f != pattern][:most]


def _cwd_note(ctx: Ctx) -> str:
    """`, not from src/pkg/ where you are` when the command runs below the top level."""
    import os

    try:
        here = os.path.relpath(os.path.realpath(os.getcwd()), os.path.realpath(ctx.repo))
    except (OSError, ValueError):
        return ""
    if here == "." or here.startswith(".."):
        return ""
    return f", not from {here.replace(os.sep, '/')}/ where you are"


def _unmatched(ctx: Ctx, grants: list[Grant], files: list[str]) -> list[str]:
    """A glob that matches no file grants a new file where the pattern says, from the
    root: right for a new file, a silent mistake when the file meant is elsewhere (a
    command run in a subdirectory, say). Warn when a same-named file exists."""
    out = []
    for g in grants:
        if g.kind != "glob" or any(glob_matches(g.path, f) for f in files):
            continue
        same = _same_named(g.path, files)
        if same:
            out.append(f"grant {g} matches no file (grants are read from the repository root"
                       f"{_cwd_note(ctx)}): it grants a new {g.path}; a file of that name "
                       f"exists at {', '.join(same)}: grant that path if you meant it "
                       "(coord grant ID --write PATH)")
    return out


def _parse_grants(ctx: Ctx, writes: list[str]) -> list[Grant]:
    """`--write` values as grants: a range or point must fit a committed text file, and a
    symbol is resolved against HEAD into the lines it spans."""
    if not writes:
        raise UsageError("give at least one --write GRANT (a GLOB, PATH:START-END, "
                         "PATH::NAME or PATH:+N)")
    texts: dict[str, bytes] = {}
    grants: list[Grant] = []
    for w in writes:
        item = parse_write(w)
        if isinstance(item, SymbolRef) or item.kind != "glob":
            if item.path not in texts:
                texts[item.path] = _text_file(ctx, item.path, w)
            data = texts[item.path]
            if isinstance(item, SymbolRef):
                item = _resolve(item, data)
            else:
                _check_range(item, data)
        grants.append(item)
    _refuse_inside_submodules(ctx, grants)
    return grants


def read_brief(path: str | None, data: bytes | None = None) -> str:
    """The worker's brief from a file (or bytes already read: stdin), at most MAX_BRIEF
    bytes of UTF-8."""
    if data is None:
        assert path is not None
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_BRIEF + 1)
        except OSError as e:
            raise UsageError(f"--brief-file {path}: {e.strerror or e}") from None
    where = "stdin" if path in (None, "-") else path
    if len(data) > MAX_BRIEF:
        raise UsageError(f"brief from {where} is over {MAX_BRIEF // 1024} KiB; keep the brief "
                         "to what the worker needs, and point at files for the rest")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"brief from {where} is not UTF-8 text") from None
    if "\0" in text:
        raise UsageError(f"brief from {where} holds a NUL byte")
    return text


def read_checks(path: str) -> list[str]:
    """`--check-file`: one command a line; blank lines and `#` comments are skipped."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BRIEF + 1)
    except OSError as e:
        raise UsageError(f"--check-file {path}: {e.strerror or e}") from None
    if len(data) > MAX_BRIEF:
        raise UsageError(f"--check-file {path} is over {MAX_BRIEF // 1024} KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--check-file {path} is not UTF-8 text") from None
    out = []
    for line in text.split("\n"):
        line = line.strip()
        if line and not line.startswith("#"):
            if "\0" in line:
                raise UsageError(f"--check-file {path}: a line holds a NUL byte")
            out.append(line)
    return out


def gitlinks(ctx: Ctx) -> list[str]:
    """The submodules of the tree (gitlink entries of the index); none without a
    .gitmodules, which costs no process to look for."""
    import os

    if not os.path.lexists(ctx.repo / ".gitmodules"):
        return []
    out = git.run(ctx.repo, "ls-files", "-z", "--stage")
    links = []
    for rec in out.split(b"\0"):
        meta, _, path = rec.partition(b"\t")
        if meta.startswith(b"160000 "):
            links.append(os.fsdecode(path))
    return links


def _refuse_inside_submodules(ctx: Ctx, grants: list[Grant]) -> None:
    """A grant inside a submodule would hold nothing: the superproject's diff sees only the
    submodule's pointer, never the files in it, so edits there could be neither
    attributed nor committed nor protected. The pointer itself (`sub`) may be granted."""
    links = gitlinks(ctx)
    for g in grants:
        path = g.path.rstrip("/")
        for link in links:
            inside = path.startswith(link + "/") or (path == link and g.path != link)
            if inside:
                raise UsageError(
                    f"grant {g}: {link} is a git submodule, another repository: edits inside "
                    "it are invisible to this tree's diff, so no task can be given, shown or "
                    f"committed them. Work in the submodule itself; grant {link} (no slash) "
                    "for the change of its pointer (a new commit checked out in it)")


def submodule_changes(ctx: Ctx) -> list[SubmoduleChange]:
    """Submodules whose own tree holds changes not committed inside them: hunkwise sees
    only their pointers, so this is all it can say about them (git status
    --porcelain=v2: `S<commit><modified><untracked>`)."""
    import os

    links = gitlinks(ctx)
    if not links:
        return []
    out = git.run(ctx.repo, "status", "--porcelain=v2", "-z", "--ignore-submodules=none",
                  "--untracked-files=no", "--", *links)
    found: list[SubmoduleChange] = []
    for rec in out.split(b"\0"):
        parts = rec.split(b" ", 8)
        if len(parts) == 9 and parts[0] == b"1" and parts[2].startswith(b"S"):
            sub = parts[2].decode()
            if sub[2] == "M" or sub[3] == "U":
                found.append({"path": os.fsdecode(parts[8]), "modified": sub[2] == "M",
                              "untracked": sub[3] == "U"})
    return found


def assign(ctx: Ctx, *, task_id: str | None, title: str, expect: str, writes: list[str],
           checks: list[str], exclusive: bool, brief: str = "") -> AssignResult:
    if task_id is not None:
        check_task_id(task_id)
    for text, what in ((title, "--title"), (expect, "--expect")):
        if not text.strip() or "\0" in text:
            raise UsageError(f"{what} must be non-empty text")
    grants = _parse_grants(ctx, writes)
    files = git.tracked_and_untracked(ctx.repo)
    serial = ctx.config.ownership.serial
    # Matching grants against every file is the slow part: do it before taking the lock,
    # then, under the lock, redo it only if the active grants changed meanwhile.
    seen = store.load(ctx.lay)
    sync_ranges(ctx.repo, seen)
    clashes = find_conflicts(grants, exclusive, active_tasks(seen), files, serial)
    with store.transaction(ctx.lay, reuse=seen) as state:
        sync_ranges(ctx.repo, state)
        # The state read before is the one given back when nobody wrote since (the same
        # object: its grants are those the clashes were found for).
        if state is not seen and _grant_key(state) != _grant_key(seen):
            clashes = find_conflicts(grants, exclusive, active_tasks(state), files, serial)
        if task_id is None:
            while f"task-{state.next_task:03d}" in state.tasks:
                state.next_task += 1
            task_id = f"task-{state.next_task:03d}"
        elif task_id in state.tasks:
            raise StateRefused(f"task {task_id} exists already ({state.tasks[task_id].state})")
        elif any(d.get("id") == task_id for d in store.archived(ctx.lay, "task")):
            raise StateRefused(f"task {task_id} exists already (finished in an earlier batch)")
        if clashes:
            raise StateRefused("ownership conflict: " + "; ".join(
                _clash_text(c, exclusive, state, serial) for c in clashes))
        now = store.now()
        frozen = state.freeze is not None
        task = Task(id=task_id, title=title, expect=expect, grants=grants, checks=checks,
                    exclusive=exclusive, created_at=now, updated_at=now, brief=brief,
                    batch=state.batch + 1 if frozen else state.batch, held_until_thaw=frozen)
        state.tasks[task_id] = task
        if task_id == f"task-{state.next_task:03d}":
            state.next_task += 1
    return {"task": task.public(), "held_until_thaw": frozen,
            "warnings": _touching(grants, active_tasks(state), task_id)
            + _unmatched(ctx, grants, files)}


def grant(ctx: Ctx, task_id: str, writes: list[str]) -> GrantResult:
    """Widen an active task's grants, under the same ownership rules as assign.

    What already lies in the new grant is not marked inherited: a worker told that its
    edit reaches past its range asks for exactly this, and its edit is then its own.
    """
    from hunkwise.shared.state.context import get_task

    grants = _parse_grants(ctx, writes)
    files = git.tracked_and_untracked(ctx.repo)
    serial = ctx.config.ownership.serial
    with store.transaction(ctx.lay) as state:
        sync_ranges(ctx.repo, state)
        task = get_task(state, task_id)
        if not task.active:
            raise StateRefused(f"{task_id} is {task.state}; only an active task's grants widen")
        others = [t for t in active_tasks(state) if t.id != task_id]
        clashes = find_conflicts(grants, task.exclusive, others, files, serial)
        if clashes:
            raise StateRefused("ownership conflict: " + "; ".join(
                _clash_text(c, task.exclusive, state, serial) for c in clashes))
        have = {str(g) for g in task.grants}
        task.grants += [g for g in grants if str(g) not in have]
        task.updated_at = store.now()
    return {"task": task.public(), "warnings": _touching(grants, others, task_id)
            + _unmatched(ctx, grants, files)}


def edit(ctx: Ctx, task_id: str, *, title: str | None = None, expect: str | None = None,
         brief: str | None = None, checks: list[str] | None = None) -> EditResult:
    """Change a task that is not accepted or rejected; its worker gets a TASK_CHANGED
    signal and sees the change (a note) at `worker start` and `worker signals`.

    `checks` replaces the task's checks (an empty list removes them)."""
    from hunkwise.coordinator.sessions import coordinator_session
    from hunkwise.shared.state.context import get_task
    from hunkwise.shared.state.models import Note, SignalType
    from hunkwise.shared.state.signals import send

    for text, what in ((title, "--title"), (expect, "--expect")):
        if text is not None and (not text.strip() or "\0" in text):
            raise UsageError(f"{what} must be non-empty text")
    if title is None and expect is None and brief is None and checks is None:
        raise UsageError("nothing to change: give --title, --expect, --brief-file, --check, "
                         "--check-file or --no-checks")
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id)
        if not task.active:
            raise StateRefused(f"{task_id} is {task.state}; only a task that is not accepted "
                               "or rejected can be edited")
        changed = []
        if title is not None and title != task.title:
            task.title = title
            changed.append("title")
        if expect is not None and expect != task.expect:
            task.expect = expect
            changed.append("expect")
        if brief is not None and brief != task.brief:
            task.brief = brief
            changed.append("brief")
        if checks is not None and checks != task.checks:
            task.checks = list(checks)
            changed.append("checks")
        signal = None
        if changed:
            now = store.now()
            task.updated_at = now
            what = ", ".join(changed)
            task.notes.append(Note(at=now, by="coordinator", kind="edit",
                                   text=f"the coordinator changed the task's {what}: "
                                        f"worker start {task_id} shows it anew"))
            to = task.claim.session if task.claim else task.session
            if to:
                signal = send(state, sender=coordinator_session(), to=to, kind=SignalType.TASK_CHANGED,
                              about=task_id, payload=f"changed: {what}").public()
    return {"task": task.public(), "changed": changed, "signal": signal}


def _clash_text(c: Any, exclusive: bool, state: State, serial: list[str]) -> str:
    """One conflict, with its reason when it is not plain overlap."""
    from hunkwise.shared.hunks.ownership import serial_matches

    if serial_matches(serial, c.path):
        why = f" ([ownership] serial lists {c.path}: any grant on it excludes every other)"
    elif exclusive:
        why = " (this task is --exclusive)"
    elif state.tasks[c.task_id].exclusive:
        why = f" ({c.task_id} is --exclusive)"
    else:
        why = ""
    return f"{c.ours} overlaps {c.theirs} held by {c.task_id} on {c.path}{why}"


def _touching(grants: list[Grant], others: list[Task], me: str) -> list[str]:
    """Line grants of one file with no line between them: an insertion exactly between
    two ranges, or at a point on a range's edge, lies inside both and, unless it can slide
    into one side alone, is ambiguous."""
    out = []
    for g in grants:
        if g.kind == "glob":
            continue
        for t in others:
            if t.id == me:
                continue
            for h in t.grants:
                if h.kind == "glob" or h.path != g.path:
                    continue
                if g.kind == "range" and h.kind == "range" and (
                        g.end + 1 == h.start or h.end + 1 == g.start):
                    out.append(f"{g} touches {h} of {t.id} with no line between: an insertion "
                               "exactly at their boundary lies inside both, and is committed "
                               "only for the task whose report alone claims it")
                elif (g.kind, h.kind) in (("point", "range"), ("range", "point")):
                    p, r = (g, h) if g.kind == "point" else (h, g)
                    if p.start == r.end or p.end == r.start - 1:
                        out.append(f"{g} lies at the edge of {h} of {t.id}: lines inserted "
                                   "there lie inside both, and are committed only for the "
                                   "task whose report alone claims them")
    return out


def _grant_key(state: State) -> list[tuple[str, bool, list[str]]]:
    return sorted((t.id, t.exclusive, [str(g) for g in t.grants]) for t in active_tasks(state))


def task_row(task: Task, now: float) -> TaskRow:
    return {**task.public(), "stale": task.stale(now),
            "claim_age_s": round(now - task.claim.heartbeat, 1) if task.claim else None}


def lines_of(h: Hunk | None) -> str | None:
    """A hunk's old lines as people count them: `135-137`, or `after 12` for an insertion."""
    if h is None:
        return None
    if not h.old_lines:
        return f"after {h.old_start}"
    return f"{h.old_start}-{h.old_start + h.old_lines - 1}"


def status(ctx: Ctx, *, everything: bool = False) -> StatusResult:
    """Active tasks and this batch's finished ones (`everything`: every task ever).

    Reads only: ranges are re-mapped to HEAD in memory, the state is not written, with two
    exceptions that finish what a killed process left, as any next command does: a crashed
    `coord accept` (its journal) is repaired, and a report a killed `worker done` recorded
    is published.
    """
    from hunkwise.inbox import delivery

    repaired = None
    if (ctx.lay.root / "accept.json").exists():
        from hunkwise.coordinator import journal

        repaired = journal.repair(ctx)
    delivery.settle(ctx)
    state = store.load(ctx.lay)
    sync_ranges(ctx.repo, state)
    now = time.time()
    tv = view(ctx.repo, active_tasks(state))
    pending, _odd = inbox.entries(ctx.lay.inbox, "new")
    staged = git.index_dirty(ctx.repo, remembered=True)
    unowned: list[UnownedChange] = [{"path": ch.path, "kind": ch.kind, "lines": lines_of(h)}
                                    for ch, h in tv.attribution.unowned]
    conflicts: list[ContestedChange] = [{"path": ch.path, "tasks": tids, "lines": lines_of(h)}
                                        for ch, h, tids in tv.attribution.conflicts]
    ambiguous: list[ContestedChange] = [
        {"path": a.change.path, "tasks": a.tasks, "lines": lines_of(a.hunk)}
        for a in tv.attribution.ambiguous]
    shown, hidden = _shown(ctx, state, everything)
    rows = _status_rows(ctx, state, tv, shown, now)
    from hunkwise.coordinator.restore import lost_tasks
    from hunkwise.shared.state import events

    return {
        "events": events.recent(ctx.lay),
        "lost": lost_tasks(ctx, list(state.tasks.values()), tv, state),
        "tasks": rows,
        "interventions": state.interventions.get(str(state.batch), 0),
        "decisions_open": sum(1 for d in state.decisions if d.state == "open"),
        "signals_pending": sum(1 for s in state.signals if s.state == "pending"),
        "freeze": state.freeze.public() if state.freeze else None,
        "batch": state.batch,
        "inbox": {"pending": len(pending)},
        "unowned": unowned,
        "conflicts": conflicts,
        "ambiguous": ambiguous,
        "repaired": repaired,
        "hidden_tasks": hidden,
        "index_dirty": bool(staged),
        "staged": staged,
        # Settings come from HEAD's coord.toml: an uncommitted edit is not in force.
        "config_differs": config.working_copy_differs(ctx.repo),
        "submodules": submodule_changes(ctx),
        # Settings at HEAD that do not load stop assign, start and the rest: say so here.
        "settings_problem": config.problem(ctx.repo),
        "reports_gone": _reports_gone(ctx, state),
    }


def _reports_gone(ctx: Ctx, state: State) -> list[str]:
    """Reported tasks whose newest report file is gone from this inbox, in none of its
    folders (removed by hand, or by a worker's script; a quarantined one is named by the
    review that set it aside): the coordinator would wait for it forever, `coord accept` says
    only that no report can be read. Nothing else is lost: the edits are in the tree, and
    `worker done` again delivers a new revision."""
    inbox = ctx.lay.inbox
    return sorted(t.id for t in state.tasks.values()
                  if t.state == TaskState.REPORTED and t.last_report
                  and not any(os.path.exists(os.path.join(inbox, d, t.last_report))
                              for d in ("new", "cur", "old", "quarantine")))


def _shown(ctx: Ctx, state: State, everything: bool) -> tuple[list[Task], int]:
    """The tasks `coord status` shows, and how many it hides."""
    shown = [t for t in state.tasks.values()
             if everything or t.active or t.batch >= state.batch]
    # Finished tasks of closed batches live in the archive (moved there at thaw): shown
    # with --all, counted among the hidden ones without it.
    archive = store.archived(ctx.lay, "task")  # read once
    archived_ids = {d["id"] for d in archive
                    if isinstance(d.get("id"), str) and d["id"] not in state.tasks}
    if everything:
        have = {t.id for t in shown}
        old = {d["id"]: d for d in archive if d.get("id") not in have}
        shown += [Task.model_validate(d) for d in old.values()]
    hidden = 0 if everything else (len(state.tasks) - len(shown)) + len(archived_ids)
    return shown, hidden


def _status_rows(ctx: Ctx, state: State, tv: TreeView, shown: list[Task],
                 now: float) -> list[StatusTask]:
    """One row per task shown: active ones first, each with where its grants stand."""
    from hunkwise.coordinator.launch import status_of
    from hunkwise.shared.hunks.places import places
    from hunkwise.shared.machines.chains import machine_of, mirror
    from hunkwise.shared.state.context import machine_name

    rows: list[StatusTask] = []
    where = places(ctx.repo, active_tasks(state), tv.changes, tv.snap.tree)
    mirrored, me = mirror(ctx)["tasks"], machine_name()
    for t in sorted(shown, key=lambda t: (not t.active, t.id)):
        row = task_row(t, now)
        rows.append({
            **row,
            # Each line grant in HEAD's lines and the working tree's, with its landmark.
            "places": where.get(t.id, []),
            # Whose claim (or last session) on which machine; which machine coordinates it.
            "machine": machine_of(t.claim.session if t.claim else t.session),
            "coordinator": mirrored.get(t.id, me),
            # Finished but never reported: a stale claim whose changes sit in the tree.
            "unreported_changes": bool(row["stale"] and t.state == TaskState.IN_PROGRESS
                                       and tv.task_changes(t.id)),
            # Its launched agent: running, reported, or exited without a report.
            "agent": status_of(t) if t.launch is not None else None,
        })
    return rows


def brief(ctx: Ctx, *, width: int = 100, most: int = 8) -> BriefResult:
    """A few lines for a phone: open claims and what waits for the supervisor.

    Reads the state, the inbox listing and the newest verify record; never the tree, so it
    costs what a status line may cost in a chat bot's loop.
    """
    from hunkwise.coordinator.notify import for_coordinator, last_verification
    from hunkwise.shared.output import clip

    state = store.load(ctx.lay)
    now = time.time()
    claims: list[BriefClaim] = []
    exited: list[str] = []
    for t in sorted(state.tasks.values(), key=lambda t: t.id):
        if t.launch is not None:
            from hunkwise.coordinator.launch import status_of

            st = status_of(t)
            if st is not None and st["problem"]:
                exited.append(f"{t.id}: {st['problem']} ({st['agent']}, log {st['log']})")
        # A reported task's claim is over for the supervisor: the report waits instead.
        if t.claim is not None and t.state == TaskState.IN_PROGRESS:
            age = now - t.claim.heartbeat
            claims.append({"task": t.id, "session": t.claim.session, "age_s": round(age),
                           "machine": t.claim.session.rpartition("@")[2],
                           "stale": t.stale(now), "state": str(t.state)})
    decisions: list[BriefDecision] = [
        {"id": d.id, "task": d.task, "kind": d.kind, "question": d.question}
        for d in state.decisions if d.state == "open"]
    blocked_on: list[BlockedOn] = [
        {"id": s.id, "from": s.sender, "about": s.about, "payload": s.payload}
        for s in state.signals
        if s.type == "BLOCKED_ON" and s.state == "pending" and for_coordinator(s.to)]
    pending, _odd = inbox.entries(ctx.lay.inbox, "new")
    waiting_reports = sorted({e.task_id for e in pending if e.task_id})
    blocked: list[BlockedReport] = []
    for e in pending[:50]:  # a blocked worker waits for the supervisor too
        try:
            doc = store.strict_json_loads(e.path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("status") == "blocked":
            blocked.append({"task": e.task_id, "reason": str(doc.get("reason") or "")})
    verify = last_verification(ctx.lay)

    def ago(s: float) -> str:
        return f"{s / 60:.0f}m" if s >= 60 else f"{s:.0f}s"

    stale = sum(1 for c in claims if c["stale"])
    head = (f"{ctx.repo.name}: {len(claims)} open claim(s)" + (f" ({stale} stale)" if stale else "")
            + f", {len(pending)} report(s) waiting, {len(decisions)} decision(s)")
    if state.freeze is not None:
        head += f", frozen (batch {state.freeze.batch})"
    lines = [head]
    lines += [f"agent exited {e}" for e in exited]
    for d in decisions:
        lines.append(f"decide {d['id']} [{d['kind']}] {d['task']}: {d['question']}")
    for b in blocked:
        lines.append(f"blocked {b['task']}: {b['reason']}")
    for s in blocked_on:
        lines.append(f"blocked-on {s['from']}: {s['about']}: {s['payload']}")
    if verify is not None and not verify["ok"]:
        what = verify["failing"][0] if verify["failing"] else "; ".join(verify["problems"][:1])
        lines.append(f"verify FAILED (batch {verify['batch']}): {what}")
    for c in sorted(claims, key=lambda c: (not c["stale"], c["task"])):
        mark = " STALE" if c["stale"] else ""
        lines.append(f"claim {c['task']} {c['session']} {ago(c['age_s'])}{mark}")
    if waiting_reports:
        lines.append("reports: " + ", ".join(waiting_reports))
    shown = [clip(line, width) for line in lines[:most]]
    if len(lines) > most:
        shown.append(f"(+{len(lines) - most} more: coord status)")
    return {"brief": "\n".join(shown), "claims": claims, "decisions": decisions,
            "blocked_on": blocked_on, "reports_waiting": waiting_reports, "blocked": blocked,
            "freeze": state.freeze.public() if state.freeze else None,
            "verify": verify}
