"""The task view of the working tree: who owns which change, as report entries.

Both sides use this: the worker to build its report, the coordinator to check a report
against the real diff. Identities are content-based (a hunk's removed and added bytes),
so another task's commit that only shifts lines leaves them unchanged.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.errors import GitError
from hunkwise.shared.hunks import diff, snapshot
from hunkwise.shared.hunks.diff import FileChange, Hunk
from hunkwise.shared.hunks.ownership import (
    Ambiguous,
    Attribution,
    attribute,
    map_grant,
    merged_ranges,
    reaches_into,
)
from hunkwise.shared.state.models import (
    DISCLAIMED,
    ChangeEntry,
    HunkEntry,
    RangeGrant,
    State,
    Task,
    TaskState,
    report_path,
)

if TYPE_CHECKING:
    from hunkwise.shared.hunks.regions import Evidence

Identity = tuple[str, ...]


@dataclass
class TreeView:
    snap: snapshot.Snapshot
    changes: list[FileChange]
    attribution: Attribution
    old_texts: dict[str, bytes] = field(default_factory=dict)
    # Paths under a range grant of an active task: a commit touching one re-maps ranges.
    ranged: set[str] = field(default_factory=set)
    # (old blob id, hunks) -> that blob with those hunks spliced in (see `splice_old`).
    spliced: dict[tuple[str, tuple[Hunk, ...]], bytes] = field(default_factory=dict, repr=False)

    def task_changes(self, task_id: str) -> list[FileChange]:
        return self.attribution.owned.get(task_id, [])

    def splice_old(self, old_oid: str, base: bytes, hunks: Sequence[Hunk]) -> bytes:
        """`diff.splice(base, hunks)`, where `base` is the blob `old_oid`: kept for this
        view, since a task's validation and its commit plan splice the same hunks onto the
        same old text. Keyed by the blob's id and the hunks' values, in order: all a splice
        reads. (A splice that fails is not kept: it raises again.)"""
        key = (old_oid, tuple(hunks))
        got = self.spliced.get(key)
        if got is None:
            got = self.spliced[key] = diff.splice(base, hunks)
        return got


def view(repo: Path, tasks: Sequence[Task], snap: snapshot.Snapshot | None = None) -> TreeView:
    """The working tree's changes attributed to `tasks` (of `snap`, or of a new snapshot)."""
    # Only files some task may commit must read the same twice: a log under no grant
    # that a check keeps writing must not keep `worker done` from settling (ever).
    snap = snapshot.take(repo, patch=True, steady=_granted(tasks)) if snap is None else snap
    changes = diff.diff_trees(repo, snap.head_tree, snap.tree)
    ranged = {g.path for t in tasks if t.active for g in t.grants if g.kind != "glob"}
    todo = [c for c in changes if c.path in ranged and c.splittable and c.hunks]
    blobs = git.cat_blobs(repo, [c.old_oid for c in todo]) if todo else {}
    old_texts = {c.path: blobs[c.old_oid] for c in todo}
    tv = TreeView(snap, changes, attribute(changes, tasks, old_texts,
                                           _evidence(repo, tasks, old_texts) if todo else None))
    tv.old_texts = old_texts
    tv.ranged = ranged
    return tv


def view_with(repo: Path, tv: TreeView, tasks: Sequence[Task],
              texts: dict[str, tuple[str, str]], without: str | None = None) -> TreeView:
    """The tree view `tv` as it would be with `texts` ({path: (mode, blob id)}, each a text
    change of a file under a range grant) written into the tree: those files divided again
    among `tasks`, with the same provenance. Nothing is written.

    `without`: a task whose changes `texts` take out (a discard): it is left out of the
    division, and so is what its sessions wrote (those lines are gone, and a record of
    them would pull its neighbours' equal lines to where they were)."""
    by_path = {c.path: c for c in tv.changes}
    changes: list[FileChange] = []
    for path, (mode, oid) in texts.items():
        c = by_path[path]
        if oid != c.old_oid:
            changes.append(FileChange(path, "M", c.old_mode, mode, c.old_oid, oid, False,
                                      diff.blob_hunks(repo, c.old_oid, oid)))
    old_texts = {p: tv.old_texts[p] for p in texts if p in tv.old_texts}
    evidence = _evidence(repo, tasks, old_texts)
    if without is not None:
        evidence = {p: {d: ({t: n for t, n in w.items() if t != without},
                            {t: n for t, n in g.items() if t != without})
                        for d, (w, g) in per.items()} for p, per in evidence.items()}
        tasks = [t for t in tasks if t.id != without]
    after = TreeView(tv.snap, changes, attribute(changes, tasks, old_texts, evidence))
    after.old_texts = old_texts
    after.ranged = tv.ranged
    return after


def _evidence(repo: Path, tasks: Sequence[Task], paths: Collection[str]) -> dict[str, Evidence]:
    """Provenance the agent hooks recorded, as evidence about the active tasks."""
    from hunkwise.shared.state import provenance

    task_of: dict[str, str] = {}
    for t in tasks:
        if not t.active:
            continue
        for s in (t.session, t.claim.session if t.claim else None):
            if s:
                task_of[s] = t.id
    return provenance.evidence(provenance.root_of(repo), task_of, paths)


def _granted(tasks: Sequence[Task]) -> Callable[[str], bool]:
    from hunkwise.shared.hunks.globs import glob_matches

    ranged = {g.path for t in tasks if t.active for g in t.grants if g.kind != "glob"}
    globs = [g.path for t in tasks if t.active for g in t.grants if g.kind == "glob"]
    return lambda path: path in ranged or any(glob_matches(p, path) for p in globs)


@dataclass
class Selection:
    """The changes one task would commit, and what lies in its grants that it may not."""

    changes: list[FileChange]
    claimed_ambiguous: list[Ambiguous] = field(default_factory=list)
    unclaimed_ambiguous: list[Ambiguous] = field(default_factory=list)
    disclaimed_ambiguous: list[Ambiguous] = field(default_factory=list)
    inherited: list[tuple[str, str]] = field(default_factory=list)  # (path, identity)


def whole_identity(ch: FileChange) -> str:
    return "deleted" if ch.status == "D" else f"whole:{ch.new_mode}:{ch.new_oid}"


def select(tv: TreeView, task: Task, claims: set[tuple[str, str]] | None = None,
           disclaims: set[tuple[str, str]] | None = None) -> Selection:
    """The task's changes: what it owns, plus the ambiguous changes it claims, minus what
    was in its grants before it started (`task.inherited`, never claimed silently).

    `claims` are (path, identity) pairs of ambiguous changes the task's report claims;
    None (the worker's own view) claims every ambiguous change of the task. `disclaims`
    (default: what the task's newest report disclaimed) are the ones it said are not its.
    """
    if disclaims is None:
        disclaims = {(p, i.removeprefix(DISCLAIMED)) for p, ids in task.claimed.items()
                     for i in ids if i.startswith(DISCLAIMED)}
    att = tv.attribution
    left = Counter((p, i) for p, ids in task.inherited.items() for i in ids)
    sel = Selection(changes=[])
    by_path: dict[str, FileChange] = {}

    def keep(path: str, ident: str) -> bool:
        if left[(path, ident)] > 0:
            left[(path, ident)] -= 1
            sel.inherited.append((path, ident))
            return False
        return True

    def part(ch: FileChange) -> FileChange:
        got = by_path.get(ch.path)
        if got is None:
            got = FileChange(ch.path, ch.status, ch.old_mode, ch.new_mode, ch.old_oid,
                             ch.new_oid, ch.binary, [])
            by_path[ch.path] = got
            sel.changes.append(got)
        return got

    for ch in att.owned.get(task.id, []):
        rp = report_path(ch.path)
        if not (ch.splittable and ch.hunks):
            if keep(rp, whole_identity(ch)):
                dest = part(ch)
                dest.hunks = list(ch.hunks)
            continue
        for h in ch.hunks:
            if keep(rp, att.identity(h)):
                part(ch).hunks.append(h)
    for amb in att.ambiguous:
        if task.id not in amb.tasks:
            continue
        rp = report_path(amb.change.path)
        if not keep(rp, amb.canon):
            continue
        if claims is not None and (rp, amb.canon) not in claims:
            if (rp, amb.canon) in disclaims:
                sel.disclaimed_ambiguous.append(amb)
            else:
                sel.unclaimed_ambiguous.append(amb)
            continue
        sel.claimed_ambiguous.append(amb)
        part(amb.change).hunks.append(amb.hunk)
        att.placed[id(amb.hunk)] = amb.placed[task.id]
    for c in sel.changes:
        c.hunks.sort(key=lambda h: (h.old_start, h.old_lines, h.new_start))
    sel.changes.sort(key=lambda c: c.path)
    return sel


def contest_lines(amb: Ambiguous) -> str:
    """Where a contested change is in the working tree: `PATH:N-M` (new lines)."""
    h = amb.hunk
    first, last = h.new_start, h.new_start + max(h.new_lines, 1) - 1
    span = f"{first}" if first == last else f"{first}-{last}"
    return f"{report_path(amb.change.path)}:{span}"


def _spec_matches(spec: str, amb: Ambiguous) -> bool:
    if spec == "all":
        return True
    path, _, lines = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if not path:
        path, lines = spec, ""
    if lines and not all(p.isdigit() for p in lines.split("-", 1)):
        path, lines = spec, ""
    if path.removeprefix("./") != report_path(amb.change.path):
        return False
    if not lines:
        return True
    a, _, b = lines.partition("-")
    lo, hi = int(a), int(b or a)
    h = amb.hunk
    first, last = h.new_start, h.new_start + max(h.new_lines, 1) - 1
    # Whole or not at all: the lines of a contested change are one answer.
    return lo <= first and last <= hi


def _narrowness(spec: str) -> int:
    """How narrow an answer is: `all` 1, a whole file 2, lines of a file 3."""
    if spec == "all":
        return 1
    _path, sep, lines = spec.rpartition(":")
    return 3 if sep and lines and all(p.isdigit() for p in lines.split("-", 1)) else 2


def drop_claim(sel: Selection, amb: Ambiguous) -> None:
    """Take a contested change the selection claims out of it: disclaimed, its lines no
    longer among the selection's changes."""
    sel.claimed_ambiguous.remove(amb)
    sel.disclaimed_ambiguous.append(amb)
    for ch in sel.changes:
        if ch.path == amb.change.path:
            ch.hunks = [h for h in ch.hunks if h is not amb.hunk]
    sel.changes = [c for c in sel.changes if c.hunks or not c.splittable]


def decide_boundaries(sel: Selection, claim: Sequence[str], disclaim: Sequence[str]) -> list[str]:
    """Apply a worker's --claim / --disclaim to the contested boundary changes of its own
    view (`select` with no claims takes them all): a disclaimed one leaves the selection.
    Returns the undecided ones, each as `PATH:LINES (reason)`. A change both claimed and
    disclaimed goes with the narrower answer (`--claim f.py:12 --disclaim all`: line 12 is
    mine, the rest is not); answered as narrowly both ways, it is undecided."""
    undecided: list[str] = []
    for amb in list(sel.claimed_ambiguous):
        yes = max((_narrowness(s) for s in claim if _spec_matches(s, amb)), default=0)
        no = max((_narrowness(s) for s in disclaim if _spec_matches(s, amb)), default=0)
        if yes and no and yes != no:
            yes, no = (yes, 0) if yes > no else (0, no)
        if yes and not no:
            continue
        if no and not yes:
            drop_claim(sel, amb)
            continue
        undecided.append(f"{contest_lines(amb)} ({amb.reason or 'ambiguous'}; answered whole)")
    return undecided


def may_still_claim(other: Task, path: str, canon: str) -> str | None:
    """Why `other` claims, or may yet claim, an ambiguous change; None if it cannot."""
    if canon in other.claimed.get(path, []):
        return f"{other.id}'s report claims it too"
    if canon in other.inherited.get(path, []):
        return None  # it was there before `other` started: never `other`'s claim
    if other.state == TaskState.ASSIGNED:
        return None  # not started: it will inherit what is there now
    if other.state == TaskState.REPORTED:
        return None  # its report did not claim it
    return f"{other.id} is {other.state} and may claim it in its report"


def moved_by_discard(before: TreeView, after: TreeView, tasks: Sequence[Task], task_id: str,
                     paths: Collection[str]) -> list[str]:
    """The other tasks whose changes to `paths` would not stay the same once `task_id`'s
    are discarded: base + each one's changes, as attribution divides the tree `before` and
    `after` the discard, must be the same text.

    A task's lines put back between two equal lines of its neighbours, on the wrong side of
    one (a deleted function's, beside a point's two identical lines), or a line of its
    removed where a neighbour's equal line was, change a neighbour's text: the file alone
    cannot say which was meant, and the discard is refused."""
    out = []
    for u in tasks:
        if u.id == task_id or not u.active:
            continue
        a = {c.path: c.hunks for c in select(before, u, claims_of(u)).changes if c.path in paths}
        b = {c.path: c.hunks for c in select(after, u, claims_of(u)).changes if c.path in paths}
        for path in sorted(set(a) | set(b)):
            base = before.old_texts.get(path)
            if base is not None and diff.splice(base, a.get(path, [])) != diff.splice(base, b.get(path, [])):
                out.append(f"{u.id}'s changes to {report_path(path)}")
    return out


def claims_of(task: Task) -> set[tuple[str, str]]:
    """The (path, identity) pairs the task's newest report claimed."""
    return {(p, i) for p, ids in task.claimed.items() for i in ids
            if not i.startswith(DISCLAIMED)}


def identities_of_selection(tv: TreeView, task: Task, sel: Selection) -> dict[str, list[str]]:
    """(path -> identities) of a selection, as `baseline` records them."""
    out: dict[str, list[str]] = {}
    for ch in sel.changes:
        rp = report_path(ch.path)
        if not (ch.splittable and ch.hunks):
            out.setdefault(rp, []).append(whole_identity(ch))
        else:
            out.setdefault(rp, []).extend(tv.attribution.identity(h) for h in ch.hunks)
    return out


def _is_whole(ch: FileChange | ChangeEntry) -> bool:
    if isinstance(ch, FileChange):
        return not (ch.splittable and ch.hunks)
    return not (ch.kind == "modified" and ch.old_mode == ch.new_mode and ch.hunks
                and (ch.new_mode or "100644") in diff.REGULAR_MODES)


def to_entries(changes: Sequence[FileChange],
               att: Attribution | None = None) -> list[ChangeEntry]:
    """Report entries; a deletion and an addition of the same blob become one rename.

    A hunk's `sha256` is its identity whatever placement git printed (`att.identity`).
    """
    entries: list[ChangeEntry] = []
    deleted = {(c.old_oid, c.old_mode): c for c in changes if c.status == "D"}
    used: set[str] = set()
    renamed: set[str] = set()
    for c in changes:
        if c.status == "A" and (c.new_oid, c.new_mode) in deleted:
            src = deleted.pop((c.new_oid, c.new_mode))
            used.add(src.path)
            renamed.add(c.path)
            entries.append(ChangeEntry(path=report_path(c.path), kind="renamed",
                                       old_path=report_path(src.path),
                                       old_mode=src.old_mode, new_mode=c.new_mode,
                                       old_oid=src.old_oid, new_oid=c.new_oid, hunks=[]))
    for c in changes:
        if c.path in used or c.path in renamed:
            continue
        entries.append(ChangeEntry(
            path=report_path(c.path), kind=c.kind,
            old_mode=None if c.old_mode == "000000" else c.old_mode,
            new_mode=None if c.new_mode == "000000" else c.new_mode,
            old_oid=None if git.is_null_oid(c.old_oid) else c.old_oid,
            new_oid=None if git.is_null_oid(c.new_oid) else c.new_oid,
            hunks=[HunkEntry(old_start=h.old_start, old_lines=h.old_lines, new_start=h.new_start,
                             new_lines=h.new_lines,
                             sha256=att.identity(h) if att is not None else h.sha256)
                   for h in c.hunks]))
    entries.sort(key=lambda e: e.path)
    return entries


def identities(entries: Sequence[ChangeEntry]) -> dict[str, Counter[Identity]]:
    """Per path, the multiset of position-free identities of its changes."""
    out: dict[str, Counter[Identity]] = {}
    for e in entries:
        if e.kind == "renamed" and e.old_path:
            out.setdefault(e.old_path, Counter())[("deleted",)] += 1
            out.setdefault(e.path, Counter())[("added", e.new_mode or "", e.new_oid or "")] += 1
            continue
        bucket = out.setdefault(e.path, Counter())
        if e.regions:
            for r in e.regions:
                bucket[("region", r)] += 1
            continue
        if _is_whole(e):
            if e.kind == "deleted":
                bucket[("deleted",)] += 1
            else:
                bucket[("whole", e.kind, e.new_mode or "", e.new_oid or "")] += 1
        else:
            for h in e.hunks:
                bucket[("hunk", h.sha256)] += 1
    return out


def task_entries(repo: Path, tv: TreeView, task: Task, sel: Selection) -> list[ChangeEntry]:
    """Report entries for a task's selection, with position-aware identities.

    Each text file gets `regions`: for a file the task holds by line ranges, per range the
    digest of the range's lines before and after the task's edits; for a file it holds
    whole, the digest of the content its commit would give. Both see a moved line (the
    SPEC: validation compares positions too), and neither depends on how git's -U0 diff
    happens to split or place an edit: a report made before another task's commit that
    only shifts lines still matches.
    """
    from hunkwise.shared.hunks.diff import hunk_digest, split_lines
    from hunkwise.shared.hunks.ownership import range_relation

    att = tv.attribution
    entries = to_entries(sel.changes, att)
    ranges: dict[str, list[RangeGrant]] = {}
    for g in merged_ranges(task.grants):
        ranges.setdefault(g.path, []).append(g)
    todo = [c for c in sel.changes if c.splittable and c.hunks]
    if not todo:
        return entries
    full = {c.path: c for c in tv.changes}
    need = [c.old_oid for c in todo
            if c.path not in tv.old_texts and (c.path in ranges
                                               or len(c.hunks) != len(full[c.path].hunks))]
    blobs = git.cat_blobs(repo, need) if need else {}
    by_path = {e.path: e for e in entries}
    for c in todo:
        entry = by_path.get(report_path(c.path))
        if entry is None:
            continue
        base = tv.old_texts.get(c.path)
        if base is None:
            base = blobs.get(c.old_oid)
        # Lines at a shared point: their identities, wherever among the point's lines they
        # stand (another holder's lines committed there first move nothing of these).
        # (Line by line: one task's lines there are one hunk once they are its own, one
        # contest each while they were not.)
        pointed = sorted(hashlib.sha256(line).hexdigest() for h in c.hunks if id(h) in att.at_point
                         for line in split_lines(h.added))
        digests = [hashlib.sha256(("point:" + ",".join(pointed)).encode()).hexdigest()] if pointed else []
        hunks = [h for h in c.hunks if id(h) not in att.at_point]
        if not hunks:
            entry.regions = digests
            continue
        if c.path not in ranges:
            if len(hunks) == len(full[c.path].hunks):
                ident = f"file:{c.new_mode}:{c.new_oid}".encode()
            else:
                assert base is not None
                ident = b"content:" + tv.splice_old(c.old_oid, base, hunks)
            entry.regions = sorted(digests + [hashlib.sha256(ident).hexdigest()])
            continue
        assert base is not None
        held: list[list[diff.Hunk]] = [[] for _ in ranges[c.path]]
        for h in hunks:
            p = att.place(h)
            for i, g in enumerate(ranges[c.path]):
                if range_relation(g, p) == "in":
                    held[i].append(h)
                    break
            else:
                held[0].append(h)  # not inside any range: the digest then cannot match
        old = split_lines(base)
        for g, hs in zip(ranges[c.path], held, strict=True):
            if not hs:
                continue
            new = split_lines(tv.splice_old(c.old_oid, base, hs))
            delta = sum(h.new_lines - h.old_lines for h in hs)
            digests.append(hunk_digest(b"".join(old[g.start - 1:g.end]),
                                       b"".join(new[g.start - 1:g.end + delta])))
        entry.regions = sorted(digests)
    return entries


def patch_digest(entries: Sequence[ChangeEntry]) -> str:
    h = hashlib.sha256()
    for path, ids in sorted(identities(entries).items()):
        for ident, n in sorted(ids.items()):
            h.update(repr((path, ident, n)).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


# ---- range grants follow history ----------------------------------------------------------

def sync_ranges(repo: Path, state: State) -> bool:
    """Re-map every active range grant from `state.ranges_at` to HEAD; True if changed.

    A hunk at the edge of a range goes with what the range's own rule says: an insertion
    right before START pushes the range down, one right after END stays outside.
    """
    head = git.head(repo)
    if head is None or state.ranges_at == head:
        return False
    old = state.ranges_at
    state.ranges_at = head
    paths = sorted({g.path for t in state.tasks.values() if t.active
                    for g in t.grants if g.kind != "glob"})
    if old is None or not paths:
        return True
    # Diffed as trees: the same pair an accept's self-check has just diffed (read once).
    old_tree, head_tree = git.tree_of(repo, old), git.tree_of(repo, head)
    if old_tree is None or head_tree is None:
        return True  # the old commit is gone (history rewritten): keep ranges as they are
    try:
        changes = diff.diff_trees(repo, old_tree, head_tree, paths)
    except GitError:
        return True
    by_path = {c.path: c for c in changes}
    # Where a commit's hunk reaches into a range as git printed it, its placements are
    # read (the file's old text, once) so that it is mapped where it can lie outside.
    needed = {g.path for t in state.tasks.values() if t.active for g in t.grants
              if g.path in by_path and by_path[g.path].status != "D"
              and reaches_into(g, by_path[g.path].hunks)}
    places: dict[str, list[list[Hunk]]] = {}
    if needed:
        from hunkwise.shared.hunks.slide import placements

        olds = git.cat_blobs(repo, [by_path[p].old_oid for p in sorted(needed)])
        places = {p: placements(diff.split_lines(olds[by_path[p].old_oid]), by_path[p].hunks)
                  for p in needed if by_path[p].old_oid in olds}
    for t in state.tasks.values():
        if not t.active:
            continue
        for g in t.grants:
            if g.kind == "glob" or g.path not in by_path:
                continue
            ch = by_path[g.path]
            if ch.status == "D":
                continue
            map_grant(g, ch.hunks, places.get(g.path))  # a range, or an insertion point
    return True


def active_tasks(state: State) -> list[Task]:
    return [t for t in state.tasks.values() if t.active]
