"""Recorded revisions of a task's work, and telling which of their changes are gone.

Every report, and every worker command of an in-progress task, records the task's
changes in the state (`Task.saved`, a `Saved`): a snapshot tree kept under
`refs/hunkwise/`, the commit it was taken on, each change as attribution divided it, and
the tree of that commit plus exactly the task's changes (`own`, kept under the same ref
name + `-own`): git's diff of the commit and that tree holds the task's changes alone,
however attribution cut them. Both sides use this: the worker to say at `worker start`
that its work was destroyed, the coordinator to list lost work in `coord status` and to
restore it.

A change is *lost* when its lines are back to what the commit held: nothing of the
current diff lies where it was (shared/work/matching.py). A change the worker edited
further is not lost, so a worker that keeps working never sees a false alarm; a record
that would drop lost changes is not replaced, so a command run after an accident never
buries the work.
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
from hunkwise.shared.git import objects
from hunkwise.shared.hunks import diff, snapshot
from hunkwise.shared.hunks.diff import FileChange, Hunk
from hunkwise.shared.hunks.globs import grant_covers
from hunkwise.shared.hunks.taskview import Selection, TreeView, drop_claim, select, whole_identity
from hunkwise.shared.state import store
from hunkwise.shared.state.models import Saved, SavedKind, State, Task, TaskState, report_path
from hunkwise.shared.work import matching
from hunkwise.shared.work.matching import Pos, classify, unmatched

if TYPE_CHECKING:
    from hunkwise.shared.state.context import Ctx

WIP_REFS = "refs/hunkwise/wip"
SNAPSHOT_REFS = "refs/hunkwise/snapshots"
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


def saved_of(repo: Path, tv: TreeView, sel: Selection, *, kind: SavedKind, revision: int,
             ref: str) -> Saved:
    hunks, whole = record_of(sel)
    return Saved(kind=kind, revision=revision, tree=tv.snap.tree, base=tv.snap.head,
                 at=store.now(), ref=ref, hunks=hunks, whole=whole,
                 own=own_trees(repo, tv, [sel])[0])


Entries = dict[str, tuple[str, str] | None]
Contents = dict[str, tuple[str, bytes]]


def _spliced(tv: TreeView, sel: Selection) -> list[FileChange]:
    """The selection's text changes that hold only some of their file's hunks: their
    text is the base's with the task's hunks spliced in, not the tree's."""
    full = {c.path: c for c in tv.changes}
    return [c for c in sel.changes if c.splittable and c.hunks and (
        c.path not in full or {id(h) for h in c.hunks} != {id(h) for h in full[c.path].hunks})]


def own_entries(tv: TreeView, sel: Selection, blobs: dict[str, bytes],
                offsets: dict[str, list[int]] | None = None) -> tuple[Entries, Contents]:
    """The task's changes onto the base tree, as `objects.write_tree` takes them: what
    `coord accept` would commit on the tree view's commit. A change the task holds whole
    (every hunk of its file, a new, deleted or binary file) goes as the tree's entry; the
    others as the base's text with the task's hunks spliced in (`blobs`: base texts by id,
    besides the view's own; `offsets`: their `diff.line_offsets` by blob id, kept across calls
    so that many tasks of one big file split it once)."""
    entries: Entries = {}
    offs = {} if offsets is None else offsets
    contents: Contents = {}
    spliced = {id(c) for c in _spliced(tv, sel)}
    for c in sel.changes:
        if id(c) in spliced:
            base = tv.old_texts.get(c.path)
            text = base if base is not None else blobs[c.old_oid]
            at = offs.get(c.old_oid)
            if at is None:
                at = offs[c.old_oid] = diff.line_offsets(text)
            contents[c.path] = (c.new_mode, diff.splice(text, c.hunks, at))
        else:
            entries[c.path] = None if c.status == "D" else (c.new_mode, c.new_oid)
    return entries, contents


def own_trees(repo: Path, tv: TreeView, sels: Sequence[Selection]) -> list[str]:
    """For each selection, the tree of the view's commit plus exactly its changes (see
    `Saved.own`). A selection holding every change of the tree is the snapshot itself;
    the others are written by one `fast-import` for all of them."""
    need = [c.old_oid for sel in sels for c in _spliced(tv, sel) if c.path not in tv.old_texts]
    blobs = git.cat_blobs(repo, need) if need else {}
    every = {c.path for c in tv.changes}
    out: list[str | None] = []
    jobs: list[objects.Job] = []
    offsets: dict[str, list[int]] = {}
    for sel in sels:
        entries, contents = own_entries(tv, sel, blobs, offsets)
        if not contents and set(entries) == every:
            out.append(tv.snap.tree)  # every change of the tree is the task's, whole
        else:
            out.append(None)
            jobs.append((tv.snap.head_tree, entries, contents))
    written = iter(objects.write_trees(repo, jobs))
    return [o if o is not None else next(written)[0] for o in out]


OWN_TAIL = "-own"


def refs_of(ref: str, saved: Saved) -> list[str]:
    """The refs that keep a record's trees alive: `ref` (its snapshot) and, where its
    `own` tree is not the snapshot itself, `ref` + "-own"."""
    return [ref, ref + OWN_TAIL] if saved.own not in (None, saved.tree) else [ref]


def ref_updates(ref: str, saved: Saved) -> str:
    """`update-ref --stdin` lines writing `refs_of` (one transaction with the caller's)."""
    line = f"update {ref} {saved.tree}\n"
    return line + (f"update {ref}{OWN_TAIL} {saved.own}\n" if saved.own not in (None, saved.tree)
                   else "")


def covered(task: Task, path: str) -> bool:
    """Is the path inside one of the task's grants (a range's file, or a glob)?"""
    return any(grant_covers(g, path) for g in task.grants)


# ---- which recorded changes are gone -------------------------------------------------------

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
    """The record's changes, by real path: base -> own (every change of which is the
    task's), or for a record without it, base -> tree, limited to the paths it recorded."""
    base = saved.base or git.empty_tree(repo)
    tree = saved.own or saved.tree
    wanted = set(saved.hunks) | set(saved.whole)
    paths = [p for p in diff.changed_paths(repo, base, tree) if report_path(p) in wanted]
    return {c.path: c for c in diff.diff_trees(repo, base, tree, paths)} if paths else {}


def recorded_hunks(saved: Saved, ch: FileChange) -> list[Hunk]:
    """The hunks of `ch` (`saved_changes`) that are the task's: every one of base -> own;
    of base -> tree (a record without `own`), those the record names by place and content
    (which finds none of a change attribution divided otherwise than git prints it)."""
    if saved.own is not None:
        return list(ch.hunks)
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
         recorded: dict[str, FileChange] | None = None, full: bool = False,
         texts: dict[str, bytes] | None = None,
         snapshot_blobs: dict[str, str | None] | None = None) -> Loss:
    """What of `saved` is gone, given the current changes base -> now by report path.

    Positions first (no git process when nothing is gone); a change that seems gone is
    looked at again with its bytes and every placement. `full` (restore) also names
    what was changed since instead of gone. `texts`: the base blobs by id, and
    `snapshot_blobs`: the snapshot's blob of each path, when the caller holds them (else
    read through the command's one reader).
    """
    whole = [rp for rp in saved.whole if full or rp not in current]
    suspects = []
    for rp, pos in saved.hunks.items():
        c = current.get(rp)
        if c is not None and not c.splittable:
            suspects.append(rp)  # replaced as a whole since: not back to the commit's
        elif full or unmatched(pos, c.hunks if c is not None else []):
            suspects.append(rp)
    if suspects:
        # A file that holds what the snapshot held holds every change of the task there,
        # however git's diff of the base aligns its lines with another task's (a blank
        # line of one task's taken for a blank line another task's deleted function had).
        named = [c.path for rp in suspects if (c := current.get(rp)) is not None]
        if snapshot_blobs is None:
            snapshot_blobs = snapshot_oids(repo, saved.tree, named)
        suspects = [rp for rp in suspects if (c := current.get(rp)) is None
                    or snapshot_blobs.get(c.path) != c.new_oid]
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
    want = [by_rp[rp].old_oid for rp in suspects if rp in by_rp]
    want += [c.new_oid for rp in suspects if rp in by_rp
             and (c := current.get(rp)) is not None and c.splittable]
    texts = {o: texts[o] for o in want} if texts is not None else git.cat_blobs(repo, want)
    for rp in suspects:
        rc = by_rp.get(rp)
        if rc is None:
            continue
        c = current.get(rp)
        if c is not None and not c.splittable:
            out.changed.append(f"{rp}: changed by someone else since (whole file)")
            continue
        gone, changed = classify(texts[rc.old_oid], recorded_hunks(saved, rc),
                                 c.hunks if c is not None else [],
                                 texts[c.new_oid] if c is not None else None)
        if gone:
            out.hunks[rc.path] = gone
        out.changed += [f"{rp}: lines {h.old_start}-{h.old_end} were changed by someone else "
                        "since" for h in changed]
    return out


JOINT_BUDGET = 8 << 20  # a file's bytes times the records read with it, at most


def settle_jointly(repo: Path, tasks: Sequence[Task], losses: dict[str, Loss],
                   now_tree: str) -> set[tuple[str, str]]:
    """Take out of `losses` each file whose every reading keeps the task's recorded
    changes (`matching.kept_in_every_reading`, over the records of every task in `tasks`
    that names the file); the (task id, path) pairs taken out.

    git's diff of the base may align a task's line with one another task removed (a blank
    line added at a range's end, beside a deleted neighbour's blank lines), so the task's
    change seems gone where the file holds it; the records of all tasks together tell.
    `losses` must hold every task that seems to have lost something there: a suspect left
    out would be taken for present. Only records with their own tree, all on one base, are
    read this way, and only files whose size times their records stays within
    JOINT_BUDGET (a loss that stands costs one `diff-tree` of the file per record).
    """
    files: dict[str, list[str]] = {}
    for tid, lost in losses.items():
        for path in lost.hunks:
            files.setdefault(path, []).append(tid)
    records = {t.id: t.saved for t in tasks if t.saved is not None and t.saved.own is not None}
    settled: set[tuple[str, str]] = set()
    for path, suspects in files.items():
        if len(suspects) > matching.MOST_READINGS or any(t not in records for t in suspects):
            continue
        rp = report_path(path)
        base = records[suspects[0]].base
        group = [tid for tid, saved in records.items() if rp in saved.hunks or rp in saved.whole]
        if not base or any(records[t].base != base or rp in records[t].whole for t in group):
            continue  # a record of another base, or of the whole file: not read jointly
        base_oid = snapshot_oids(repo, base, [path]).get(path)
        now_oid = snapshot_oids(repo, now_tree, [path]).get(path)
        if base_oid is None or now_oid is None:
            continue
        texts = git.cat_blobs(repo, [base_oid, now_oid])
        if len(texts[base_oid]) * len(group) > JOINT_BUDGET:
            continue
        recorded: dict[str, list[Hunk]] = {}
        for t in group:
            mine = diff.diff_trees(repo, base, records[t].own or "", [path])
            if mine and mine[0].old_oid != base_oid:
                break
            recorded[t] = recorded_hunks(records[t], mine[0]) if mine else []
        else:
            for tid in matching.kept_in_every_reading(texts[base_oid], texts[now_oid],
                                                      recorded, suspects):
                del losses[tid].hunks[path]
                settled.add((tid, path))
    return settled


def snapshot_oids(repo: Path, tree: str, paths: Sequence[str]) -> dict[str, str | None]:
    """The blob each path has in `tree` (None: none there), through the command's reader."""
    asked = [p for p in dict.fromkeys(paths) if "\n" not in p and p.isprintable()
             and not any("\udc80" <= ch <= "\udcff" for ch in p)]
    if not asked:
        return {}
    found = git.read_objects(repo, [f"{tree}:{p}" for p in asked])
    return {p: f[0] if f is not None and f[1] == "blob" else None
            for p, f in zip(asked, found, strict=True)}


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
    if saved.own is None and (hunks or whole):
        return False  # recorded before `own` was kept: record it again, with it
    return ({k: sorted(map(tuple, v)) for k, v in saved.hunks.items()}
            == {k: sorted(v) for k, v in hunks.items()} and saved.whole == whole)


def _held_elsewhere(tv: TreeView, state: State, task: Task, sel: Selection) -> None:
    """Leave out of the task's record the contested blank lines (a run of one repeated
    line) that the other side's current record already holds: each task's own view takes
    a contest before anyone answers, and two records holding one line would put it back
    twice, or call it lost where it stands once. Held: the other record (on this commit)
    inserts the same lines into the run of such lines the boundary cuts."""
    for amb in list(sel.claimed_ambiguous):
        h = amb.hunk
        base = tv.old_texts.get(amb.change.path)
        lines = diff.split_lines(h.added)
        if h.old_lines or not lines or len(set(lines)) != 1 or base is None:
            continue
        old = diff.split_lines(base)
        lo = hi = h.old_start
        while lo > 0 and old[lo - 1] == lines[0]:
            lo -= 1
        while hi < len(old) and old[hi] == lines[0]:
            hi += 1
        rp = report_path(amb.change.path)
        for other in amb.tasks:
            o = state.tasks.get(other) if other != task.id else None
            saved = o.saved if o is not None else None
            if saved is None or saved.base != tv.snap.head:
                continue
            if any(n == 0 and lo <= at <= hi and sha == h.sha256
                   for at, n, sha in saved.hunks.get(rp, [])):
                drop_claim(sel, amb)
                break


def _alone(repo: Path, tv: TreeView, task: Task, sel: Selection) -> None:
    """A file whose contested lines the task's own view takes (nothing answered yet): where
    the file reads as the base with the task's one range replaced and every other line in
    place, the record takes the file as the tree holds it.

    A contest's lines stand between two ranges; taken by one side, the other side's
    share loses its lines there, so the record would hold the contested lines added on
    top of the neighbour's own (a blank line appended before the two that open the next
    range recorded as three more). While the neighbours' lines are all as they were, the
    change is the task's alone, and the record says so."""
    from hunkwise.shared.hunks.regions import holds_word

    contested = {a.change.path for a in sel.claimed_ambiguous} - {p for p, _i in sel.inherited}
    att = tv.attribution
    # Only where every other task's part of the file is the contest's own shadow: lines
    # of its range that no longer stand where they stood, holding no word (the blank lines
    # the contested block took). A line another task's record says it wrote, a conflict,
    # a change of no task's, or another contest, and the file is recorded as before.
    for tid, changes in att.owned.items():
        for ch in changes:
            if tid != task.id and ch.path in contested and (
                    not ch.splittable or any(h.new_lines or any(map(holds_word, diff.split_lines(h.removed)))
                                             for h in ch.hunks)):
                contested.discard(ch.path)
    contested -= {ch.path for ch, _h in att.unowned}
    contested -= {ch.path for ch, _h, _t in att.conflicts}
    contested -= {a.change.path for a in att.ambiguous if task.id not in a.tasks}
    full = {c.path: c for c in tv.changes}
    want: dict[str, tuple[int, int]] = {}
    for path in contested:
        held = [g for g in task.grants if g.path == path]
        c = full.get(path)
        if len(held) != 1 or held[0].kind != "range" or c is None or not c.splittable \
                or path not in tv.old_texts:
            continue
        want[path] = (held[0].start, held[0].end)
    if not want:
        return
    texts = git.cat_blobs(repo, [full[p].new_oid for p in want])
    for path, (a, b) in want.items():
        old = diff.split_lines(tv.old_texts[path])
        new = diff.split_lines(texts[full[path].new_oid])
        n = len(old)
        a, b = max(a, 1), min(b, n)
        head, tail = a - 1, n - b
        if head + tail > len(new) or new[:head] != old[:head] or \
                (tail and new[len(new) - tail:] != old[b:]):
            continue
        sel.changes = [full[path] if c.path == path else c for c in sel.changes]
        sel.claimed_ambiguous = [x for x in sel.claimed_ambiguous if x.change.path != path]


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
    sels: list[Selection] = []
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
        if sel.claimed_ambiguous:
            _held_elsewhere(tv, state, task, sel)
        if sel.claimed_ambiguous:
            _alone(ctx.repo, tv, task, sel)
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
        sels.append(sel)
    if not todo:
        return losses
    for (_tid, _before, rec), own in zip(todo, own_trees(ctx.repo, tv, sels), strict=True):
        rec.own = own
    # The refs first, outside the lock (nothing slow under it), in one transaction. Each
    # name is this process's own (`w<n>-<pid>`, n the sequence it expects to record), so
    # two commands recording at once never write or drop each other's ref.
    for tid, _before, rec in todo:
        rec.revision = state.tasks[tid].wip_seq + 1
        rec.ref = f"{WIP_REFS}/{git.ref_component(tid)}/w{rec.revision}-{os.getpid()}"
    git.run(ctx.repo, "update-ref", "--stdin",
            input="".join(ref_updates(rec.ref, rec) for _t, _b, rec in todo).encode())
    drop: list[str] = []
    try:
        # A short wait: recording must never hold up the command it rides on; the next
        # command records what this one could not.
        with store.locked(ctx.lay, timeout=RECORD_LOCK_WAIT_S):
            st = store.load(ctx.lay, reuse=state)  # unparsed when nobody wrote since
            for tid, before, rec in todo:
                task = st.tasks.get(tid)
                if task is None or task.state != TaskState.IN_PROGRESS or task.saved != before:
                    drop += refs_of(rec.ref, rec)  # recorded meanwhile by another command
                    continue
                task.wip_seq += 1
                rec.revision = task.wip_seq
                if before is not None and before.kind == "wip":
                    drop += refs_of(before.ref, before)
                task.saved = rec
                state.tasks[tid].saved = rec
                if current is not None:
                    current.add(tid)
            store.save(ctx.lay, st)
    except BaseException:
        # Nothing recorded: none of them is needed.
        drop = [r for _t, _b, rec in todo for r in refs_of(rec.ref, rec)]
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
    only: list[str] | None = None
    if snap is None:
        digests = {t: quiet.grant_stat(ctx.repo, state.tasks[t]) for t in ids}
        head = git.head(ctx.repo)
        if all(quiet.is_quiet(ctx.repo, state.tasks[t], digests[t], head) for t in ids):
            return {}
        # Due: a snapshot of the paths these tasks' grants and records hold is all the
        # records need (what other tasks did elsewhere is no part of them).
        only = quiet.scope([state.tasks[t] for t in ids])
    snap = snap or snapshot.take(ctx.repo, only=only)
    current = {t for t in ids if (s := state.tasks[t].saved) is not None
               and s.tree == snap.tree and s.base == snap.head}
    if len(current) == len(ids):
        losses: dict[str, Loss] = {}
    else:
        # (A record found the same is current too: other tasks' edits moved the tree,
        # not this task's, and its next heartbeat needs no snapshot either.)
        tv = view(ctx.repo, active_tasks(state), snap)
        losses = record_wip(ctx, state, tv, ids, current)
        if losses and only is not None:
            # Lost work is read against the whole tree (a joint reading weighs every
            # task's records): read it again so.
            return record_now(ctx, ids, snapshot.take(ctx.repo))
        if any(lost.hunks for lost in losses.values()):
            everyone = read_jointly(ctx.repo, state, losses, tv)
            losses = {t: everyone[t] for t in losses}
    for t in digests:  # stamped with what was seen before the snapshot
        quiet.stamp(ctx.repo, state.tasks[t],
                    digests[t] if t in current and t not in losses else None)
    return losses


def read_jointly(repo: Path, state: State, losses: dict[str, Loss], tv: TreeView
                 ) -> dict[str, Loss]:
    """Every active task's loss (`losses`: those already read, as `record_wip` returns
    them; the others read here), less the files every reading by all tasks' records keeps
    (`settle_jointly`). Each task that seems to have lost something is read, so none is
    taken for present; the records stay as they are."""
    actives = [t for t in state.tasks.values() if t.active]
    others = [t for t in actives if t.id not in losses and t.saved is not None]
    everyone = {**losses_of(repo, others, tv.snap.tree, tv), **losses}
    settle_jointly(repo, actives, everyone, tv.snap.tree)
    return everyone


def held_by(state: State, session: str) -> list[str]:
    return [t.id for t in state.tasks.values()
            if t.claim is not None and t.claim.session == session]


def forget(repo: Path, task_id: str) -> None:
    """Drop a finished task's snapshot refs (accepted, rejected), whatever their names."""
    git.delete_refs(repo, f"{SNAPSHOT_REFS}/{git.ref_component(task_id)}/",
                    f"{WIP_REFS}/{git.ref_component(task_id)}/")


def task_refs(task: Task) -> list[str]:
    """The refs a task may hold, named from its record, without asking git for a listing:
    a report's snapshot `r<N>` (a handover's `r<N>-base`, a record's own tree `r<N>-own`)
    for every revision handed out,
    the ref its `saved` names under those two prefixes (its newest unreported record
    `w<N>-<pid>`; a handoff's ref is not the task's to drop), and `w<N>`, as earlier
    releases named that record.

    An older record is deleted when a newer one is recorded (`record_wip`) and every one
    when the task reports (`worker done`); only a process killed between writing its ref
    and that deletion leaves one behind, which these names miss (`forget` lists them).
    """
    part = git.ref_component(task.id)
    names = [f"{SNAPSHOT_REFS}/{part}/r{n}{tail}" for n in range(1, task.revision + 1)
             for tail in ("", "-base", OWN_TAIL)]
    if task.wip_seq:
        names.append(f"{WIP_REFS}/{part}/w{task.wip_seq}")
    ref = task.saved.ref if task.saved is not None else ""
    if ref.startswith((f"{SNAPSHOT_REFS}/{part}/", f"{WIP_REFS}/{part}/")):
        names += [r for r in (ref, ref + OWN_TAIL) if r not in names]
    return names


def lost_message(task_id: str, lost: Loss) -> str:
    return (f"{task_id}'s recorded changes are gone from {', '.join(lost.paths)} (something "
            f"overwrote them); coord restore {task_id} brings them back")
