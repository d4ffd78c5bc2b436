"""Recorded revisions of a task's work, and telling which of their changes are gone.

Every report, and every worker command of an in-progress task, records the task's
changes in the state (`Task.saved`, a `Saved`): a snapshot tree kept under
`refs/hunkwise/`, the commit it was taken on, and each change as git prints it between
the two. Both sides use this: the worker to say at `worker start` that its work was
destroyed, the coordinator to list lost work in `coord status` and to restore it.

A change is *lost* when its lines are back to what the commit held: nothing of the
current diff lies where it was. A change the worker edited further is not lost, so a
worker that keeps working never sees a false alarm; a record that would drop lost
changes is not replaced, so a command run after an accident never buries the work.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.hunks import diff, snapshot
from hunkwise.shared.hunks.diff import FileChange, Hunk
from hunkwise.shared.hunks.globs import grant_covers
from hunkwise.shared.hunks.slide import canonical, placements
from hunkwise.shared.hunks.taskview import Selection, TreeView, select, whole_identity
from hunkwise.shared.state import store
from hunkwise.shared.state.models import Saved, SavedKind, State, Task, TaskState, report_path

if TYPE_CHECKING:
    from hunkwise.shared.state.context import Ctx

WIP_REFS = "refs/hunkwise/wip"
SNAPSHOT_REFS = "refs/hunkwise/snapshots"
Pos = tuple[int, int, str]
RECORD_LOCK_WAIT_S = 5.0


def kill_point(step: str) -> None:
    """Fault injection for the crash tests: HUNKWISE_TEST_KILL_AT=<step> SIGKILLs here."""
    if os.environ.get("HUNKWISE_TEST_KILL_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


# ---- what a record holds -------------------------------------------------------------------

def record_of(sel: Selection) -> tuple[dict[str, list[Pos]], dict[str, str]]:
    """(hunks, whole) of a selection, as `Saved` holds them."""
    hunks: dict[str, list[Pos]] = {}
    whole: dict[str, str] = {}
    for ch in sel.changes:
        rp = report_path(ch.path)
        if ch.splittable and ch.hunks:
            hunks.setdefault(rp, []).extend((h.old_start, h.old_lines, h.sha256) for h in ch.hunks)
        else:
            whole[rp] = whole_identity(ch)
    return hunks, whole


def saved_of(tv: TreeView, sel: Selection, *, kind: SavedKind, revision: int, ref: str) -> Saved:
    hunks, whole = record_of(sel)
    return Saved(kind=kind, revision=revision, tree=tv.snap.tree, base=tv.snap.head,
                 at=store.now(), ref=ref, hunks=hunks, whole=whole)


def covered(task: Task, path: str) -> bool:
    """Is the path inside one of the task's grants (a range's file, or a glob)?"""
    return any(grant_covers(g, path) for g in task.grants)


# ---- which recorded changes are gone -------------------------------------------------------

def _span(s: int, n: int) -> tuple[int, int]:
    """A change's place in old-line coordinates doubled: a removal of lines [s, s+n-1]
    covers 2s..2(s+n-1); an insertion after line s is the point 2s+1 between two lines."""
    return (2 * s, 2 * (s + n - 1)) if n else (2 * s + 1, 2 * s + 1)


def _near(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Do two changes touch the same lines (as `diff.carry` sees a clash)? Then the region
    is not back to the commit's: someone, most likely the task itself, changed it further."""
    (a0, a1), (b0, b1) = _span(*a), _span(*b)
    return a0 <= b1 and b0 <= a1


def unmatched(recorded: Sequence[Pos], current: Sequence[Hunk]) -> list[int]:
    """Indexes of recorded changes with nothing of the current diff on their lines."""
    free = Counter((h.old_start, h.old_lines, h.sha256) for h in current)
    left = []
    for i, r in enumerate(recorded):
        if free[r] > 0:
            free[r] -= 1
        elif not any(_near((r[0], r[1]), (h.old_start, h.old_lines)) for h in current):
            left.append(i)
    return left


def classify(base_text: bytes, recorded: Sequence[Hunk],
             current: Sequence[Hunk]) -> tuple[list[Hunk], list[Hunk]]:
    """Of `recorded` (one path's recorded changes), (gone, changed): not in `current` at
    any placement, with nothing else on their lines / with something else there.

    A line inside a run of identical lines may be printed elsewhere than when it was
    recorded and is still the same change; another task's identical line elsewhere is not.
    """
    old = diff.split_lines(base_text)
    ordered = sorted(recorded, key=lambda h: (h.old_start, h.old_lines))
    rec_places = placements(old, ordered)
    cur_places = placements(old, list(current))
    cur = [(canonical(ps), {(p.old_start, p.old_lines) for p in ps}) for ps in cur_places]
    used: set[int] = set()
    gone, changed = [], []
    for h, ps in zip(ordered, rec_places, strict=True):
        ident, where = canonical(ps), {(p.old_start, p.old_lines) for p in ps}
        hit = next((j for j, (cid, cw) in enumerate(cur)
                    if j not in used and cid == ident and cw & where), None)
        if hit is not None:
            used.add(hit)
        elif any(_near(w, (c.old_start, c.old_lines)) for w in where for c in current):
            changed.append(h)
        else:
            gone.append(h)
    return gone, changed


@dataclass
class Loss:
    """What of a record is gone from the tree (whole paths, hunks by path), and what
    someone changed since (descriptions: restore refuses those)."""

    whole: list[str]
    hunks: dict[str, list[Hunk]]
    changed: list[str] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        return sorted({report_path(p) for p in self.whole} | {report_path(p) for p in self.hunks})


def saved_changes(repo: Path, saved: Saved) -> dict[str, FileChange]:
    """The record's changes, by real path: base -> tree, limited to what it recorded."""
    base = saved.base or git.empty_tree(repo)
    wanted = set(saved.hunks) | set(saved.whole)
    paths = [p for p in diff.changed_paths(repo, base, saved.tree) if report_path(p) in wanted]
    return {c.path: c for c in diff.diff_trees(repo, base, saved.tree, paths)} if paths else {}


def recorded_hunks(saved: Saved, ch: FileChange) -> list[Hunk]:
    """The hunks of `ch` (base -> tree) that the record names, by place and content."""
    want = Counter(tuple(p) for p in saved.hunks.get(report_path(ch.path), []))
    out = []
    for h in ch.hunks:
        key = (h.old_start, h.old_lines, h.sha256)
        if want[key] > 0:
            want[key] -= 1
            out.append(h)
    return out


def _entry(ch: FileChange | None, base: bool) -> tuple[str, str] | None:
    if ch is None:
        return None
    if base:
        return None if ch.status == "A" else (ch.old_mode, ch.old_oid)
    return None if ch.status == "D" else (ch.new_mode, ch.new_oid)


def loss(repo: Path, saved: Saved, current: dict[str, FileChange],
         recorded: dict[str, FileChange] | None = None, full: bool = False) -> Loss:
    """What of `saved` is gone, given the current changes base -> now by report path.

    Positions first (no git process when nothing is gone); a change that seems gone is
    looked at again with its bytes and every placement. `full` (restore) also names
    what was changed since instead of gone.
    """
    whole = [rp for rp in saved.whole if full or rp not in current]
    suspects = []
    for rp, pos in saved.hunks.items():
        c = current.get(rp)
        if c is not None and not c.splittable:
            suspects.append(rp)  # replaced as a whole since: not back to the commit's
        elif full or unmatched(pos, c.hunks if c is not None else []):
            suspects.append(rp)
    out = Loss(whole=[], hunks={})
    if not (whole or suspects):
        return out
    if recorded is None:
        recorded = saved_changes(repo, saved)
    by_rp = {report_path(p): c for p, c in recorded.items()}
    for rp in whole:
        rc, c = by_rp.get(rp), current.get(rp)
        if rc is None:
            continue
        if c is None:
            out.whole.append(rc.path)
        elif _entry(c, False) != _entry(rc, False):
            out.changed.append(f"{rp}: changed by someone else since (whole file)")
    texts = git.cat_blobs(repo, [by_rp[rp].old_oid for rp in suspects if rp in by_rp])
    for rp in suspects:
        rc = by_rp.get(rp)
        if rc is None:
            continue
        c = current.get(rp)
        if c is not None and not c.splittable:
            out.changed.append(f"{rp}: changed by someone else since (whole file)")
            continue
        gone, changed = classify(texts[rc.old_oid], recorded_hunks(saved, rc),
                                 c.hunks if c is not None else [])
        if gone:
            out.hunks[rc.path] = gone
        out.changed += [f"{rp}: lines {h.old_start}-{h.old_end} were changed by someone else "
                        "since" for h in changed]
    return out


def current_changes(repo: Path, saved: Saved, now_tree: str,
                    tv: TreeView | None = None) -> dict[str, FileChange]:
    """The changes base -> now of the paths a record names, by report path."""
    return currents(repo, [saved], now_tree, tv)[0]


def currents(repo: Path, records: Sequence[Saved], now_tree: str,
             tv: TreeView | None = None) -> list[dict[str, FileChange]]:
    """`current_changes` of many records at once, without a git process per record.

    A record made on the commit the tree view is of reads the view's own changes (one
    index by report path, shared by every such record); the others are grouped by their
    base, each base diffed once against now for all its records' paths. Only a record
    naming a path that is not plain UTF-8 (whose report path may stand for more than one
    real path) asks git which real paths its own diff holds.
    """
    now: dict[str, FileChange] | None = None
    out: list[dict[str, FileChange] | None] = [None] * len(records)
    by_base: dict[str, list[int]] = {}
    for i, saved in enumerate(records):
        if tv is not None and saved.base == tv.snap.head and now_tree == tv.snap.tree:
            if now is None:
                now = {report_path(c.path): c for c in tv.changes}
            out[i] = now
        else:
            by_base.setdefault(saved.base or git.empty_tree(repo), []).append(i)
    for base, members in by_base.items():
        paths: set[str] = set()
        for i in members:
            saved = records[i]
            wanted = set(saved.hunks) | set(saved.whole)
            if any("\\" in rp for rp in wanted):
                paths.update(p for p in diff.changed_paths(repo, base, saved.tree)
                             if report_path(p) in wanted)
            else:
                paths |= wanted  # a plain path is its own report path
        found = {report_path(c.path): c
                 for c in diff.diff_trees(repo, base, now_tree, sorted(paths))} if paths else {}
        for i in members:
            out[i] = found  # a superset: a loss reads only the paths its record names
    return [o if o is not None else {} for o in out]


def present(repo: Path, oids: Iterable[str]) -> set[str]:
    """The object ids among `oids` that the repository holds: one `cat-file --batch-check`
    answers them all (none when there is nothing to ask)."""
    want = list(dict.fromkeys(o for o in oids if o))
    if not want:
        return set()
    rc, out = git.run_rc(repo, "cat-file", "--batch-check",
                         input="".join(f"{o}\n" for o in want).encode())
    if rc != 0:
        return set()
    lines = out.decode(errors="replace").split("\n")
    return {o for o, line in zip(want, lines, strict=False)
            if line.split(" ")[-1:] != ["missing"] and line.startswith(o)}


def lost_of(repo: Path, task: Task, now_tree: str, tv: TreeView | None = None) -> Loss:
    return losses_of(repo, [task], now_tree, tv).get(task.id, Loss([], {}))


def losses_of(repo: Path, tasks: Sequence[Task], now_tree: str,
              tv: TreeView | None = None) -> dict[str, Loss]:
    """What of each task's record is gone (tasks without a record, or whose snapshot the
    repository no longer holds, are left out): one existence check for every record, one
    tree view index, a diff per base the records were made on, never a process per task."""
    recs = [(t.id, t.saved) for t in tasks if t.saved is not None]
    if not recs:
        return {}
    have = present(repo, [o for _tid, s in recs for o in (s.tree, s.base) if o])
    kept = [(tid, s) for tid, s in recs if s.tree in have and (not s.base or s.base in have)]
    found = currents(repo, [s for _tid, s in kept], now_tree, tv)
    return {tid: loss(repo, s, cur) for (tid, s), cur in zip(kept, found, strict=True)}


# ---- recording unreported work -------------------------------------------------------------

def _same(saved: Saved | None, hunks: dict[str, list[Pos]], whole: dict[str, str]) -> bool:
    if saved is None:
        return not hunks and not whole
    return ({k: sorted(map(tuple, v)) for k, v in saved.hunks.items()}
            == {k: sorted(v) for k, v in hunks.items()} and saved.whole == whole)


def record_wip(ctx: Ctx, state: State, tv: TreeView,
               task_ids: Iterable[str], current: set[str] | None = None) -> dict[str, Loss]:
    """Record the in-progress tasks' changes where they changed since their last record.

    A task whose recorded changes are partly gone keeps its record (it is what
    `coord restore` needs); its loss is returned instead. Cheap when nothing changed:
    no git process, no state write. `current` collects the tasks whose record holds
    their changes in this tree as it is (recorded now, or found the same as before).
    """
    losses: dict[str, Loss] = {}
    todo: list[tuple[str, Saved | None, Saved]] = []
    due = [task for tid in task_ids if (task := state.tasks.get(tid)) is not None
           and task.state == TaskState.IN_PROGRESS
           and not (task.saved is not None and task.saved.tree == tv.snap.tree
                    and task.saved.base == tv.snap.head)]
    gone = losses_of(ctx.repo, due, tv.snap.tree, tv)
    for task in due:
        tid = task.id
        lost = gone.get(tid)
        if lost is not None and lost.paths:
            losses[tid] = lost
            continue
        sel = select(tv, task)
        hunks, whole = record_of(sel)
        if (_same(task.saved, hunks, whole) and task.saved is not None
                and task.saved.base == tv.snap.head) or (not hunks and not whole
                                                         and task.saved is None):
            if current is not None:
                current.add(tid)
            continue
        todo.append((tid, task.saved, Saved(kind="wip", revision=1, tree=tv.snap.tree,
                                            base=tv.snap.head, at=store.now(), ref="",
                                            hunks=hunks, whole=whole)))
    if not todo:
        return losses
    # The refs first, outside the lock (nothing slow under it), in one transaction. Each
    # name is this process's own (`w<n>-<pid>`, n the sequence it expects to record), so
    # two commands recording at once never write or drop each other's ref.
    for tid, _before, rec in todo:
        rec.revision = state.tasks[tid].wip_seq + 1
        rec.ref = f"{WIP_REFS}/{git.ref_component(tid)}/w{rec.revision}-{os.getpid()}"
    git.run(ctx.repo, "update-ref", "--stdin",
            input="".join(f"update {rec.ref} {rec.tree}\n" for _t, _b, rec in todo).encode())
    drop: list[str] = []
    try:
        # A short wait: recording must never hold up the command it rides on; the next
        # command records what this one could not.
        with store.locked(ctx.lay, timeout=RECORD_LOCK_WAIT_S):
            st = store.load(ctx.lay, reuse=state)  # unparsed when nobody wrote since
            for tid, before, rec in todo:
                task = st.tasks.get(tid)
                if task is None or task.state != TaskState.IN_PROGRESS or task.saved != before:
                    drop.append(rec.ref)  # recorded meanwhile by another command
                    continue
                task.wip_seq += 1
                rec.revision = task.wip_seq
                if before is not None and before.kind == "wip":
                    drop.append(before.ref)
                task.saved = rec
                state.tasks[tid].saved = rec
                if current is not None:
                    current.add(tid)
            store.save(ctx.lay, st)
    except BaseException:
        drop = [rec.ref for _t, _b, rec in todo]  # nothing recorded: none of them is needed
        raise
    finally:
        if drop:
            git.run_rc(ctx.repo, "update-ref", "--stdin",
                       input="".join(f"delete {r}\n" for r in drop).encode())
    return losses


def record_now(ctx: Ctx, task_ids: Iterable[str], snap: snapshot.Snapshot | None = None,
               state: State | None = None) -> dict[str, Loss]:
    """`record_wip` for a worker command: one snapshot (`snap` when the command has one);
    a tree view only when the tree changed since the tasks' records. `state`: the one the
    command saved last, not parsed again when nobody wrote since.

    Without `snap`, only when a record is due (shared/work/quiet.py): while no path under
    the tasks' grants changed since their records and HEAD did not move, the tree is not
    read at all (a heartbeat then costs no snapshot)."""
    from hunkwise.shared.hunks.taskview import active_tasks, view
    from hunkwise.shared.work import quiet

    state = store.load(ctx.lay, reuse=state)
    ids = [t for t in task_ids if t in state.tasks
           and state.tasks[t].state == TaskState.IN_PROGRESS]
    if not ids:
        return {}
    digests: dict[str, str | None] = {}
    if snap is None:
        digests = {t: quiet.grant_stat(ctx.repo, state.tasks[t]) for t in ids}
        head = git.head(ctx.repo)
        if all(quiet.is_quiet(ctx.repo, state.tasks[t], digests[t], head) for t in ids):
            return {}
    snap = snap or snapshot.take(ctx.repo)
    current = {t for t in ids if (s := state.tasks[t].saved) is not None
               and s.tree == snap.tree and s.base == snap.head}
    if len(current) == len(ids):
        losses: dict[str, Loss] = {}
    else:
        # (A record found the same is current too: other tasks' edits moved the tree,
        # not this task's, and its next heartbeat needs no snapshot either.)
        losses = record_wip(ctx, state, view(ctx.repo, active_tasks(state), snap), ids,
                            current)
    for t in digests:  # stamped with what was seen before the snapshot
        quiet.stamp(ctx.repo, state.tasks[t],
                    digests[t] if t in current and t not in losses else None)
    return losses


def held_by(state: State, session: str) -> list[str]:
    return [t.id for t in state.tasks.values()
            if t.claim is not None and t.claim.session == session]


def forget(repo: Path, task_id: str) -> None:
    """Drop a finished task's snapshot refs (accepted, rejected), whatever their names."""
    git.delete_refs(repo, f"{SNAPSHOT_REFS}/{git.ref_component(task_id)}/",
                    f"{WIP_REFS}/{git.ref_component(task_id)}/")


def task_refs(task: Task) -> list[str]:
    """The refs a task may hold, named from its record, without asking git for a listing:
    a report's snapshot `r<N>` (a handover's `r<N>-base`) for every revision handed out,
    the ref its `saved` names under those two prefixes (its newest unreported record
    `w<N>-<pid>`; a handoff's ref is not the task's to drop), and `w<N>`, as earlier
    releases named that record.

    An older record is deleted when a newer one is recorded (`record_wip`) and every one
    when the task reports (`worker done`); only a process killed between writing its ref
    and that deletion leaves one behind, which these names miss (`forget` lists them).
    """
    part = git.ref_component(task.id)
    names = [f"{SNAPSHOT_REFS}/{part}/r{n}{tail}" for n in range(1, task.revision + 1)
             for tail in ("", "-base")]
    if task.wip_seq:
        names.append(f"{WIP_REFS}/{part}/w{task.wip_seq}")
    ref = task.saved.ref if task.saved is not None else ""
    if ref.startswith((f"{SNAPSHOT_REFS}/{part}/", f"{WIP_REFS}/{part}/")) \
            and ref not in names:
        names.append(ref)
    return names


def lost_message(task_id: str, lost: Loss) -> str:
    return (f"{task_id}'s recorded changes are gone from {', '.join(lost.paths)} (something "
            f"overwrote them); coord restore {task_id} brings them back")
