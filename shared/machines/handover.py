"""A task's uncommitted edits crossing machines: handed over, taken, brought back.

`worker handoff ID --to build@laptop` records the task's own changes (its hunks within its
grants, by place and bytes) with the snapshot tree and base tree they were taken on, and
publishes them with the handoff (shared/machines/sync.py). On the laptop, `worker start ID` puts
exactly those changes into its tree (`put_back`, as `coord restore` puts a recorded
revision back), refusing where the laptop's lines differ from that base. The laptop's
report travels back; the coordinator's `coord next` brings it into the desktop's tree
(`bring_in`) in place of what the desktop's tree holds of the task: the desktop kept its
copy of the handed-over edits, and the report *replaces* that copy, so nothing appears
twice and nothing is lost. Where the desktop's copy changed since it was handed over (or
the report's lines were changed in the desktop's tree), nothing is written and the lines
are named.

Every write goes through the compare-and-swap door (shared/git/worktree.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused
from hunkwise.shared.git import objects
from hunkwise.shared.git.worktree import write_entries
from hunkwise.shared.hunks import diff, snapshot
from hunkwise.shared.hunks.diff import FileChange, Hunk
from hunkwise.shared.state import store
from hunkwise.shared.state.models import Checkpoint, Saved, SavedKind, State, Task, report_path
from hunkwise.shared.work import recovery
from hunkwise.shared.work.matching import put_in

if TYPE_CHECKING:
    from collections.abc import Callable

    from hunkwise.shared.hunks.taskview import TreeView
    from hunkwise.shared.machines.chains import Applied
    from hunkwise.shared.state.context import Ctx
    from hunkwise.shared.state.models import ClaimEntry, Report, WorkReport

HANDOFF_REFS = "refs/hunkwise/handoffs"


def _lines(h: Hunk) -> str:
    return f"lines {h.old_start}-{h.old_end}" if h.old_lines else f"after line {h.old_start}"


def _safe(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and ".git" not in parts


def record_edits(repo: Path, tv: TreeView, task: Task, *, kind: SavedKind, ref: str) -> Saved | None:
    """The task's own changes in the tree now, as a record that can travel: the snapshot
    tree, the base *tree* (a tree travels without the commit's history) and its hunks."""
    from hunkwise.shared.hunks.taskview import select

    sel = select(tv, task)
    hunks, whole = recovery.record_of(sel)
    if not hunks and not whole:
        return None
    saved = Saved(kind=kind, revision=max(task.revision, 1), tree=tv.snap.tree,
                  base=tv.snap.head_tree, at=store.now(), ref=ref, hunks=hunks, whole=whole,
                  own=recovery.own_trees(repo, tv, [sel])[0])
    git.run(repo, "update-ref", "--stdin", input=recovery.ref_updates(ref, saved).encode())
    return saved


def put_back(repo: Path, task: Task, saved: Saved, *, what: str, clash: str,
             kept: Callable[[str], set[str]] | None = None) -> list[str]:
    """Put what is missing of `saved` into the tree, touching nothing else; the paths
    written. Refuses (3, nothing written) where other changes sit on the same lines:
    `clash` says what that means for the caller ("were changed by someone else since").
    `kept`: given the snapshot's tree, the files that keep every recorded change of the
    task however they are read (recovery.settle_jointly): nothing is written there."""
    recorded = recovery.saved_changes(repo, saved)
    bad = sorted(report_path(p) for p in recorded if not _safe(p))
    outside = sorted(report_path(p) for p in recorded if not recovery.covered(task, p))
    if bad or outside:
        raise StateRefused(f"cannot {what}: {', '.join((bad + outside)[:5])} lies outside "
                           "its grants; nothing was written")
    snap = snapshot.take(repo)
    base = saved.base or git.empty_tree(repo)
    current = {c.path: c for c in diff.diff_trees(repo, base, snap.tree, sorted(recorded))} \
        if recorded else {}
    gone = recovery.loss(repo, saved, {report_path(p): c for p, c in current.items()},
                         recorded, full=True)
    for path in kept(snap.tree) if kept is not None and (gone.hunks or gone.changed) else ():
        gone.hunks.pop(path, None)
        gone.changed = [c for c in gone.changed if not c.startswith(f"{report_path(path)}: ")]
    entries: dict[str, tuple[str, str] | None] = {}
    expect: dict[str, str | None] = {}
    problems = [p.replace("were changed by someone else since", clash) for p in gone.changed]
    for path in gone.whole:
        rc = recorded[path]
        entries[path] = None if rc.status == "D" else (rc.new_mode, rc.new_oid)
        expect[path] = None if rc.status == "A" else rc.old_oid  # back to the base's
    contents: list[bytes] = []
    spliced: list[tuple[str, str]] = []
    for path, hunks in sorted(gone.hunks.items()):
        rc, cur = recorded[path], current.get(path)
        now_oid = cur.new_oid if cur else rc.old_oid
        texts = git.cat_blobs(repo, [rc.old_oid, now_oid])
        try:
            text, clashes = put_in(texts[rc.old_oid], texts[now_oid], hunks,
                                            cur.hunks if cur else [])
            problems += [f"{report_path(path)}: {_lines(h)} {clash}" for h in clashes]
            if text is None:
                continue
            contents.append(text)
        except ValueError:
            problems.append(f"{report_path(path)}: the lines around the task's changes moved "
                            "in a way that cannot be followed")
            continue
        spliced.append((path, rc.new_mode))
        expect[path] = now_oid
    if problems:
        raise StateRefused(f"cannot {what}: " + "; ".join(problems[:10]) + "; nothing was written")
    for (path, mode), oid in zip(spliced, objects.hash_blobs(repo, contents), strict=True):
        entries[path] = (mode, oid)
    if entries:
        write_entries(repo, entries, expect=expect)
    return sorted(report_path(p) for p in entries)


# ---- the coordinator's side: a report from another machine comes back ----------------------

def _report_record(report: WorkReport, snapshot: str, base: str) -> Saved:
    """The report's changes as a record (hunks by place and digest, whole files)."""
    hunks: dict[str, list[tuple[int, int, str]]] = {}
    whole: dict[str, str] = {}
    for e in report.changes:
        if e.hunks and e.kind == "modified":
            hunks[e.path] = [(h.old_start, h.old_lines, h.sha256) for h in e.hunks]
        else:
            whole[e.path] = e.kind
    return Saved(kind="report", revision=max(report.revision, 1), tree=snapshot, base=base,
                 at=store.now(), ref="", hunks=hunks, whole=whole)


def strays(task: Task, report: Report) -> list[str]:
    """The paths a report lists outside the task's grants (or outside the repository):
    such a report is never brought into the tree; validation names them."""
    paths = {p for e in report.changes for p in (e.path, e.old_path) if p}
    return sorted(p for p in paths if not _safe(p) or not recovery.covered(task, p))


def bring_in(ctx: Ctx, state: State, task: Task, report: WorkReport) -> list[str]:
    """Put a report delivered on another machine into this tree in place of what this
    tree holds of the task (`task.handover.held`); the paths written.

    Refuses (3, nothing written, the lines named) where this tree's copy of the task's
    lines is no longer what it held (someone changed them here meanwhile), or where the
    report's changes fall on lines changed here since the report's base.
    """
    ho = task.handover
    assert ho is not None and ho.pending is not None
    _rev, machine, snapshot, base = ho.pending
    repo = ctx.repo
    for oid in (snapshot, base):
        if git.run_rc(repo, "cat-file", "-e", oid)[0] != 0:
            raise StateRefused(f"{task.id}: the report's snapshot from {machine} is not here "
                               "yet; run coord sync")
    incoming = _report_record(report, snapshot, base)
    return replace_held(ctx, state, task, incoming,
                        what=f"bring {task.id} r{report.revision} from {machine} into this tree",
                        again="the report stays pending: coord next tries again")


def replace_held(ctx: Ctx, state: State, task: Task, incoming: Saved, *, what: str,
                 again: str) -> list[str]:
    """Put `incoming` (changes from another machine) into this tree in place of what the
    tree holds of the task, which must still be `task.handover.held`; the paths written."""
    from hunkwise.shared.hunks.taskview import active_tasks, select, view

    assert task.handover is not None
    ho, repo = task.handover, ctx.repo
    recorded = recovery.saved_changes(repo, incoming)
    outside = sorted(report_path(p) for p in recorded
                     if not _safe(p) or not recovery.covered(task, p))
    if outside:
        raise StateRefused(f"cannot {what}: {', '.join(outside[:5])} lies outside its grants; "
                           "nothing was written")
    tv = view(repo, active_tasks(state))
    mine = {c.path: c for c in select(tv, task).changes}  # what this tree holds of the task
    held = ho.held
    # This tree's copy must be what was handed over (or last brought in): a change of
    # those lines here since is someone's edit, and replacing it would lose it.
    problems = _changed_here(repo, held, mine)
    paths = sorted(set(recorded) | set(mine))
    now = {c.path: c for c in diff.diff_trees(repo, tv.snap.head_tree, tv.snap.tree, paths)}
    head_entries = _entries(repo, tv.snap.head_tree, paths)
    entries: dict[str, tuple[str, str] | None] = {}
    expect: dict[str, str | None] = {}
    texts: list[tuple[str, str, bytes]] = []
    for path in paths:
        cur = now.get(path)
        expect[path] = cur.new_oid if cur is not None and cur.status != "D" else (
            None if cur is not None else (head_entries.get(path) or (None, None))[1])
        rc = recorded.get(path)
        if rc is None:  # the report no longer changes it: back to HEAD's, others' kept
            if path in mine and mine[path].splittable and cur is not None:
                others = _without(cur.hunks, mine[path].hunks)
                texts.append((path, cur.new_mode, _splice_head(repo, cur, others)))
            else:
                entries[path] = head_entries.get(path)
            continue
        if not (rc.splittable and rc.hunks):
            entries[path] = None if rc.status == "D" else (rc.new_mode, rc.new_oid)
            continue
        # The text without this tree's copy of the task: HEAD plus everyone else's edits.
        if cur is not None and cur.splittable:
            others = _without(cur.hunks, mine[path].hunks if path in mine else [])
            plain = _splice_head(repo, cur, others)
        elif cur is None:
            plain = _head_text(repo, head_entries, path)
        else:
            problems.append(f"{report_path(path)}: replaced as a whole in this tree")
            continue
        plain_oid = objects.hash_blobs(repo, [plain])[0]
        through = diff.blob_hunks(repo, rc.old_oid, plain_oid) if plain_oid != rc.old_oid else []
        moved, clashes = diff.carry(recovery.recorded_hunks(incoming, rc), through)
        problems += [f"{report_path(path)}: {_lines(h)} were changed in this tree since the "
                     "report's base" for h in clashes]
        if clashes:
            continue
        try:
            texts.append((path, rc.new_mode, diff.splice(plain, moved)))
        except ValueError:
            problems.append(f"{report_path(path)}: the lines around the task's changes moved "
                            "in a way that cannot be followed")
    if problems:
        raise StateRefused(f"cannot {what}: " + "; ".join(problems[:10]) + "; nothing was "
                           f"written ({again})")
    oids = objects.hash_blobs(repo, [t for _p, _m, t in texts]) if texts else []
    for (path, mode, _t), oid in zip(texts, oids, strict=True):
        entries[path] = (mode, oid)
    entries = {p: e for p, e in entries.items()
               if e != _now_entry(now.get(p), head_entries.get(p))}
    if entries:
        write_entries(repo, entries, expect={p: expect[p] for p in entries})
    return sorted(report_path(p) for p in entries)


def _changed_here(repo: Path, held: Saved | None, mine: dict[str, FileChange]) -> list[str]:
    """Where this tree's copy of the task (`mine`, HEAD -> tree) is not what it held: the
    lines named as they stand in the tree now."""
    problems: list[str] = []
    held_changes = recovery.saved_changes(repo, held) if held is not None else {}
    by_rp = {report_path(p): c for p, c in held_changes.items()}
    if held is not None:
        # A file it held changes of, where this tree holds none of the task's now: they
        # were taken back, or merged with someone else's lines (no longer the task's).
        have = {report_path(p) for p in mine}
        for rp in sorted((set(held.hunks) | set(held.whole)) - have):
            if rp in held.whole:
                problems.append(f"{rp}: changed in this tree since the handover (whole file)")
            for s, n, _d in held.hunks.get(rp, []):
                where = f"lines {s}-{s + n - 1}" if n else f"after line {s}"
                problems.append(f"{rp}: {where} were changed in this tree since the handover")
    for path, ch in mine.items():
        rp = report_path(path)
        hc = by_rp.get(rp)
        if not (ch.splittable and ch.hunks):
            if held is None or held.whole.get(rp) != _whole_id(ch):
                problems.append(f"{rp}: changed in this tree since the handover (whole file)")
            continue
        kept = recovery.recorded_hunks(held, hc) if held is not None and hc is not None \
            and hc.splittable else []
        if hc is not None and hc.old_oid != ch.old_oid:
            # Held on another base text: compare the changes by their bytes.
            free = Counter(h.sha256 for h in kept)
            for h in ch.hunks:
                if free[h.sha256] > 0:
                    free[h.sha256] -= 1
                else:
                    problems.append(f"{rp}: {_lines(h)} were changed in this tree since the "
                                    "handover")
            continue
        base = git.cat_blobs(repo, [ch.old_oid])[ch.old_oid]
        try:
            expected = diff.splice(base, kept)
        except ValueError:
            problems.append(f"{rp}: changed in this tree since the handover")
            continue
        actual = diff.splice(base, ch.hunks)
        if expected != actual:
            e_oid, a_oid = objects.hash_blobs(repo, [expected, actual])
            for h in diff.blob_hunks(repo, e_oid, a_oid):
                where = (f"lines {h.new_start}-{h.new_start + h.new_lines - 1}" if h.new_lines
                         else f"around line {h.new_start}")
                problems.append(f"{rp}: {where} were changed in this tree since the handover")
    return problems


def _whole_id(ch: FileChange) -> str:
    from hunkwise.shared.hunks.taskview import whole_identity

    return whole_identity(ch)


def _without(hunks: list[Hunk], drop: list[Hunk]) -> list[Hunk]:
    left = Counter((h.old_start, h.old_lines, h.sha256) for h in drop)
    out = []
    for h in hunks:
        k = (h.old_start, h.old_lines, h.sha256)
        if left[k] > 0:
            left[k] -= 1
        else:
            out.append(h)
    return out


def _splice_head(repo: Path, cur: FileChange, hunks: list[Hunk]) -> bytes:
    text = git.cat_blobs(repo, [cur.old_oid])[cur.old_oid]
    return diff.splice(text, hunks)


def _entries(repo: Path, tree: str, paths: list[str]) -> dict[str, tuple[str, str]]:
    if not paths:
        return {}
    out = git.run(repo, "ls-tree", "-z", tree, "--", *paths)
    found: dict[str, tuple[str, str]] = {}
    for rec in out.split(b"\0"):
        if rec:
            meta, _, name = rec.partition(b"\t")
            mode, _kind, oid = meta.decode().split(" ")
            found[name.decode("utf-8", "surrogateescape")] = (mode, oid)
    return found


def _head_text(repo: Path, head_entries: dict[str, tuple[str, str]], path: str) -> bytes:
    e = head_entries.get(path)
    return git.cat_blobs(repo, [e[1]])[e[1]] if e else b""


def _now_entry(cur: FileChange | None, head: tuple[str, str] | None) -> tuple[str, str] | None:
    if cur is None:
        return head
    return None if cur.status == "D" else (cur.new_mode, cur.new_oid)


# ---- the authority applies what another machine's sessions did with its tasks -------------

def _mine(ctx: Ctx, state: State, task_id: str) -> Task | None:
    """The task if this machine is its authority (not a mirror of another's table)."""
    from hunkwise.shared.machines.chains import mirror

    task = state.tasks.get(task_id)
    if task is None or task_id in mirror(ctx)["tasks"]:
        return None
    return task


def apply_claims(ctx: Ctx, machine: str, claims: list[ClaimEntry], applied: Applied) -> None:
    """A session of another machine started one of this machine's tasks (a handed-over
    one, typically): the claim is granted as a local `worker start` would grant it, or
    ignored when the task is no longer startable by it (the published table answers)."""
    from hunkwise.shared.state.models import Claim, Signal, SignalType, TaskState
    from hunkwise.shared.state.signals import addressed_to, close_about

    with store.transaction(ctx.lay) as state:
        for rec in claims:
            task = _mine(ctx, state, rec.task)
            if task is None:
                continue
            c = task.claim
            if c is not None and c.session == rec.session and (
                    c.opened == rec.opened or task.state in (TaskState.IN_PROGRESS,
                                                             TaskState.REPORTED)):
                # Its holder's machine knows its heartbeat: a stale one shows stale here.
                task.claim = c.model_copy(update={"heartbeat": rec.heartbeat})
                continue
            live = c is not None and not c.stale(store.now())
            if task.state not in (TaskState.ASSIGNED, TaskState.CHANGES_REQUESTED) \
                    or rec.revision < task.revision or (live and c is not None
                                                         and c.session != rec.session):
                continue
            if task.reserved_for:
                probe = Signal(id="probe", sender="", to=task.reserved_for,
                               type=SignalType.HANDOFF, about="", created_at=0.0)
                if not addressed_to(probe, rec.session):
                    continue
            task.state = TaskState.IN_PROGRESS
            task.session = rec.session
            task.claim = Claim(session=rec.session, opened=rec.opened, heartbeat=rec.heartbeat,
                               ttl=rec.ttl)
            task.reserved_for = None
            task.updated_at = store.now()
            state.sessions.setdefault(rec.session, rec.heartbeat)
            handed = state.checkpoints.get(f"handoff|{task.id}")
            if handed is not None and handed.session != rec.session:
                del state.checkpoints[f"handoff|{task.id}"]  # taken: shown once, there
            close_about(state, SignalType.HANDOFF, task.id, rec.session)
            applied.claims.append(f"{task.id}: {rec.session}")


def apply_handbacks(ctx: Ctx, machine: str, checkpoints: dict[str, Checkpoint],
                    applied: Applied) -> None:
    """A session of another machine that held one of this machine's tasks handed it on
    (back here, typically): its claim is released and the task reserved for the target,
    as a local `worker handoff` does. Its edits travel with the handoff; the start that
    takes it here puts them in place of this tree's copy (`replace_held`)."""
    from hunkwise.shared.state.models import Signal, SignalType, TaskState
    from hunkwise.shared.state.signals import addressed_to

    with store.transaction(ctx.lay) as state:
        for cp in checkpoints.values():
            task = _mine(ctx, state, cp.task) if cp.kind == "handoff" else None
            if task is None or not cp.to:
                continue
            held = task.state == TaskState.IN_PROGRESS and task.claim is not None \
                and task.claim.session == cp.session
            # Taken and handed on before its claim reached this machine.
            reserved = task.state in (TaskState.ASSIGNED, TaskState.CHANGES_REQUESTED) \
                and task.claim is None and task.reserved_for is not None \
                and addressed_to(Signal(id="probe", sender="", to=task.reserved_for,
                                        type=SignalType.HANDOFF, about="", created_at=0.0),
                                 cp.session)
            if not (held or reserved):
                continue
            task.state = TaskState.ASSIGNED
            task.claim = None
            task.reserved_for = cp.to
            task.updated_at = store.now()
            applied.claims.append(f"{task.id}: released by {cp.session} for {cp.to}")


def apply_works(ctx: Ctx, machine: str, works: list[tuple[str, bytes, WorkReport, str, str]],
                applied: Applied) -> None:
    """A report another machine's session delivered for one of this machine's tasks it
    holds the claim of: it joins this inbox as a local delivery would, and waits for
    `coord next` to bring its changes into this tree (`bring_in`)."""
    from hunkwise import inbox
    from hunkwise.shared.state.models import AuditState, Handover, TaskState

    with store.transaction(ctx.lay) as state:
        for _name, data, report, snapshot, base in sorted(works, key=lambda w: w[0]):
            task = _mine(ctx, state, report.task_id)
            if task is None or task.claim is None or task.claim.session != report.session:
                continue
            amend = task.state == TaskState.REPORTED and task.served_revision < task.revision
            if report.revision != task.revision + 1 or not (
                    task.state == TaskState.IN_PROGRESS or amend):
                continue
            path = inbox.write_report(ctx.lay.inbox, data, task.id, report.revision)
            git.run(ctx.repo, "update-ref",
                    f"refs/hunkwise/snapshots/{git.ref_component(task.id)}/r{report.revision}", snapshot)
            git.run(ctx.repo, "update-ref",
                    f"refs/hunkwise/snapshots/{git.ref_component(task.id)}/r{report.revision}-base", base)
            task.revision = report.revision
            task.state = TaskState.REPORTED
            task.last_report = path.name
            task.last_status = report.status
            task.updated_at = store.now()
            if report.status == "done":
                for role in task.audit:  # new work needs a new look
                    task.audit[role] = AuditState.PENDING
            ho = task.handover or Handover(machine=machine)
            task.handover = ho.model_copy(update={
                "machine": machine, "pending": (report.revision, machine, snapshot, base)})
            applied.works.append(f"{task.id} r{report.revision} ({machine})")
