"""`coord discard PATH[:START-END]`: remove unowned changes from the tree, exactly and restorably.

Only changes that fall under no active task's grant go: an owned change, an ambiguous one
(which a task may still claim) and a conflict are never touched, and are named. Before
anything is written, what goes is recorded as two commits under `refs/hunkwise/discarded/<n>`:
REF^ holds the paths as the discard leaves them, REF as they were, so `git diff REF^ REF`
is exactly what was discarded, `git show REF:PATH` a file as it was, and
`coord discard --undo REF` puts it back. Files are written through the compare-and-swap
door (shared/git/worktree.py): a file that moved meanwhile makes the whole discard a no-op (3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hunkwise.coordinator.outcomes import discard_entries
from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.git import objects
from hunkwise.shared.git.worktree import current_oids, write_entries
from hunkwise.shared.hunks import diff
from hunkwise.shared.hunks.diff import FileChange, Hunk
from hunkwise.shared.hunks.ownership import range_relation
from hunkwise.shared.hunks.taskview import TreeView, active_tasks, sync_ranges, view
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, refuse_if_frozen
from hunkwise.shared.state.models import RangeGrant, State, check_rel_path

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import DiscardResult, KeptChange, UndoResult, UnownedChange

PREFIX = "refs/hunkwise/discarded/"
COORDINATOR_ENV = {"HUNKWISE_COORDINATOR": "1"}


@dataclass
class Target:
    path: str
    start: int | None = None
    end: int | None = None

    def __str__(self) -> str:
        return self.path if self.start is None else f"{self.path}:{self.start}-{self.end}"

    def covers(self, path: str) -> bool:
        """The path itself; without a range, also every path under it as a directory."""
        return path == self.path or (self.start is None and path.startswith(self.path + "/"))


def parse_target(text: str) -> Target:
    m = re.fullmatch(r"(?P<path>.+):(?P<start>\d+)(?:-(?P<end>\d+))?", text)
    if m:
        start, end = int(m["start"]), int(m["end"] or m["start"])
        if start < 1 or end < start:
            raise UsageError(f"{text!r}: lines are numbered from 1, START <= END")
        return Target(check_rel_path(m["path"].removeprefix("./"), "path"), start, end)
    path = text.removeprefix("./").rstrip("/")
    if not path:
        raise UsageError("give a PATH (or PATH:START-END) from the repo root")
    return Target(check_rel_path(path, "path"))


def _lines(h: Hunk | None) -> str | None:
    if h is None:
        return None
    if not h.old_lines:
        return f"after {h.old_start}"
    return f"{h.old_start}-{h.old_start + h.old_lines - 1}"


def _grant_key(state: State) -> list[tuple[str, bool, list[str]]]:
    return sorted((t.id, t.exclusive, [str(g) for g in t.grants]) for t in active_tasks(state))


def _pick(tv: TreeView, target: Target) -> tuple[list[FileChange], list[UnownedChange],
                                                 list[KeptChange]]:
    """The unowned changes the target names (as FileChanges holding only them), what of
    them is listed, and what the target names that is kept, with the reason."""
    att = tv.attribution
    ranged = target.start is not None
    where = RangeGrant(kind="range", path=target.path, start=target.start or 1,
                       end=target.end or 1) if ranged else None

    def inside(h: Hunk | None) -> str:
        return "in" if where is None or h is None else range_relation(where, h)

    picked: dict[str, FileChange] = {}
    gone: list[UnownedChange] = []
    kept: list[KeptChange] = []
    for ch, h in att.unowned:
        if not target.covers(ch.path):
            continue
        rel = inside(h)
        if h is None and ranged:
            kept.append({"path": ch.path, "lines": None, "reason": f"a whole-file change "
                         f"({ch.kind}): discard {ch.path} without a line range"})
            continue
        if rel == "out":
            continue
        if rel == "touch":
            kept.append({"path": ch.path, "lines": _lines(h),
                         "reason": f"reaches outside {target}"})
            continue
        part = picked.get(ch.path)
        if part is None:
            part = FileChange(ch.path, ch.status, ch.old_mode, ch.new_mode, ch.old_oid,
                              ch.new_oid, ch.binary, [])
            picked[ch.path] = part
        if h is not None:
            part.hunks.append(h)
        else:
            part.hunks = list(ch.hunks)
        gone.append({"path": ch.path, "kind": ch.kind, "lines": _lines(h)})
    for tid, chs in att.owned.items():
        for ch in chs:
            hs: list[Hunk | None] = list(ch.hunks) if ch.splittable and ch.hunks else [None]
            for h in hs:
                if target.covers(ch.path) and inside(h) != "out":
                    kept.append({"path": ch.path, "lines": _lines(h), "reason": f"owned by {tid}"})
    for amb in att.ambiguous:
        if target.covers(amb.change.path) and inside(amb.hunk) != "out":
            kept.append({"path": amb.change.path, "lines": _lines(amb.hunk),
                         "reason": f"ambiguous between {', '.join(amb.tasks)}"})
    for ch, h, holders in att.conflicts:
        if target.covers(ch.path) and inside(h) != "out":
            kept.append({"path": ch.path, "lines": _lines(h),
                         "reason": f"a conflict across the grants of {', '.join(holders)}"})
    changes = sorted(picked.values(), key=lambda c: c.path)
    for c in changes:
        c.hunks.sort(key=lambda h: (h.old_start, h.old_lines))
    return changes, gone, kept


def _record(ctx: Ctx, tv: TreeView, changes: list[FileChange],
            after: dict[str, tuple[str, str] | None], what: str) -> str:
    """Keep what goes reachable: REF^ = HEAD with the paths as left, REF = as they were."""
    before: dict[str, tuple[str, str] | None] = {
        c.path: None if c.status == "D" else (c.new_mode, c.new_oid) for c in changes}
    base = tv.snap.head_tree
    left = objects.build_tree(ctx.repo, base, after)
    were = objects.build_tree(ctx.repo, base, before)
    head = git.head(ctx.repo)
    first = git.run(ctx.repo, "commit-tree", left, *(["-p", head] if head else []),
                    input=f"coord discard {what}: the paths as the discard left them\n".encode()
                    ).decode().strip()
    msg = (f"coord discard {what}: the unowned changes it removed\n\n"
           f"git diff REF^ REF shows them; coord discard --undo REF puts them back.\n")
    second = git.run(ctx.repo, "commit-tree", were, "-p", first,
                     input=msg.encode()).decode().strip()
    taken = list(git.list_refs(ctx.repo, PREFIX))
    n = max((int(r.removeprefix(PREFIX)) for r in taken if r.removeprefix(PREFIX).isdigit()),
            default=0)
    for _ in range(20):
        n += 1
        ref = f"{PREFIX}{n}"
        # Create only (old value null): two discards at once never share a number.
        rc, _ = git.run_rc(ctx.repo, "update-ref", "-m", f"coord discard {what}", ref, second,
                           git.null_oid(ctx.repo), env=COORDINATOR_ENV)
        if rc == 0:
            return ref
    raise StateRefused("could not record the discarded changes under refs/hunkwise/discarded/; "
                       "nothing was written, retry")


def discard(ctx: Ctx, text: str) -> DiscardResult:
    target = parse_target(text)
    with store.locked(ctx.lay, name="commit"):  # no accept, revert or reject meanwhile
        seen = store.load(ctx.lay)
        refuse_if_frozen(seen, "coord discard")
        sync_ranges(ctx.repo, seen)
        # The diff of the whole tree runs outside the state lock; the grants it was judged
        # against are checked again under the lock before anything is written.
        tv = view(ctx.repo, active_tasks(seen))
        changes, gone, kept = _pick(tv, target)
        out: DiscardResult = {"target": str(target), "discarded": gone, "kept": kept,
                              "paths": [c.path for c in changes], "ref": None, "undo": None}
        if not changes:
            return out
        entries = discard_entries(ctx, tv, "", changes)
        expect = {c.path: None if c.status == "D" else c.new_oid for c in changes}
        ref = _record(ctx, tv, changes, entries, str(target))
        try:
            with store.locked(ctx.lay):
                state = store.load(ctx.lay)
                refuse_if_frozen(state, "coord discard")
                sync_ranges(ctx.repo, state)
                if _grant_key(state) != _grant_key(seen):
                    raise StateRefused("the active grants changed while this ran; nothing was "
                                       "written, retry")
                write_entries(ctx.repo, entries, expect=expect)
        except BaseException:
            git.run_rc(ctx.repo, "update-ref", "-d", ref, env=COORDINATOR_ENV)
            raise
    out.update({"ref": ref, "undo": f"coord discard --undo {ref}"})
    return out


def undo(ctx: Ctx, ref: str) -> UndoResult:
    """Put back what a discard removed, carried across edits made since; where those edits
    touch the same lines, nothing is written (3)."""
    if not ref.startswith("refs/"):
        ref = PREFIX + ref
    rc, out = git.run_rc(ctx.repo, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}")
    rc1, out1 = git.run_rc(ctx.repo, "rev-parse", "-q", "--verify", f"{ref}^1^{{commit}}")
    if not ref.startswith(PREFIX) or rc != 0 or rc1 != 0:
        raise UsageError(f"{ref} is not a discard record (git for-each-ref {PREFIX} lists them)")
    were, left = out.decode().strip(), out1.decode().strip()
    with store.locked(ctx.lay, name="commit"):
        refuse_if_frozen(store.load(ctx.lay), "coord discard --undo")
        back = diff.diff_trees(ctx.repo, left, were)  # left -> were: what was discarded
        now = current_oids(ctx.repo, [c.path for c in back], write=True)
        entries: dict[str, tuple[str, str] | None] = {}
        problems: list[str] = []
        dirty = [c for c in back if now[c.path] != _oid(c.old_oid)]
        moved_paths = {c.path for c in dirty}
        blobs = git.cat_blobs(ctx.repo, [now[c.path] or "" for c in dirty
                                         if c.splittable and c.hunks and now[c.path]])
        contents: list[bytes] = []
        carried: list[FileChange] = []
        for c in back:
            if c.path not in moved_paths:
                entries[c.path] = None if c.status == "D" else (c.new_mode, c.new_oid)
                continue
            cur = now[c.path]
            if not (c.splittable and c.hunks and cur):
                problems.append(f"{c.path} changed since the discard")
                continue
            moved, clashes = diff.carry(c.hunks, diff.blob_hunks(ctx.repo, c.old_oid, cur))
            if clashes:
                problems += [f"{c.path} lines {_lines(h)} were changed since the discard"
                             for h in clashes]
                continue
            try:
                contents.append(diff.splice(blobs[cur], moved))
            except ValueError as e:
                problems.append(f"{c.path}: {e}")
                continue
            carried.append(c)
        if problems:
            raise StateRefused("cannot undo " + ref + ": " + "; ".join(problems[:10])
                               + "; nothing was written")
        for c, oid in zip(carried, objects.hash_blobs(ctx.repo, contents), strict=True):
            entries[c.path] = (c.new_mode, oid)
        with store.locked(ctx.lay):
            refuse_if_frozen(store.load(ctx.lay), "coord discard --undo")
            write_entries(ctx.repo, entries, expect={p: now[p] for p in entries})
    return {"ref": ref, "restored": sorted(entries)}


def _oid(oid: str) -> str | None:
    return None if git.is_null_oid(oid) else oid
