"""The tree HEAD + exactly one task's changes, proven against the snapshot.

What `coord accept` commits, what `coord diff` and a reviewer's `worker review` show: the
task's hunks spliced onto HEAD's bytes (whole-entry changes go whole), checked so that
HEAD -> tree is exactly the task's changes and tree -> snapshot exactly the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from hunkwise.shared import git
from hunkwise.shared.errors import CheckFailed
from hunkwise.shared.git import objects
from hunkwise.shared.hunks import diff
from hunkwise.shared.hunks.diff import FileChange
from hunkwise.shared.hunks.taskview import TreeView
from hunkwise.shared.state.context import Ctx


@dataclass
class Plan:
    tree: str
    entries: dict[str, tuple[str, str] | None]
    paths: list[str]


def _whole_entry(ch: FileChange) -> tuple[str, str] | None:
    return None if ch.status == "D" else (ch.new_mode, ch.new_oid)


def plan_commit(ctx: Ctx, tv: TreeView, task_id: str,
                mine: list[FileChange] | None = None) -> Plan:
    """The tree HEAD + exactly the task's changes, proven against the snapshot."""
    if mine is None:
        mine = tv.task_changes(task_id)
    by_path = {c.path: c for c in tv.changes}
    split = [c for c in mine if c.splittable and c.hunks]
    split_paths = {c.path for c in split}
    # Old texts of range-granted files were read for attribution already. The working
    # tree's blobs are not read back: what the splice gives is checked by its blob id.
    known = {c.old_oid: tv.old_texts[c.path] for c in split if c.path in tv.old_texts}
    blobs = git.cat_blobs(ctx.repo, [c.old_oid for c in split if c.old_oid not in known])
    blobs.update(known)
    entries: dict[str, tuple[str, str] | None] = {}
    new_contents: list[bytes] = []
    for c in mine:
        if c.path in split_paths:
            continue
        entries[c.path] = _whole_entry(c)
    for c in split:
        full = by_path[c.path]
        ids = {id(h) for h in c.hunks}
        others = [h for h in full.hunks if id(h) not in ids]
        try:
            new = tv.splice_old(c.old_oid, blobs[c.old_oid], c.hunks)
            rest = diff.splice(new, diff.shift_hunks(others, c.hunks))
        except ValueError as e:
            raise CheckFailed(f"{c.path}: cannot separate {task_id}'s hunks ({e}); nothing committed") from None
        if objects.blob_id(ctx.repo, rest) != c.new_oid:
            raise CheckFailed(f"{c.path}: HEAD + {task_id}'s hunks + the others' hunks does not "
                              "give the working tree's bytes; nothing committed")
        new_contents.append(new)
    contents = {c.path: (c.new_mode, data) for c, data in zip(split, new_contents, strict=True)}
    tree, written = objects.write_tree(ctx.repo, tv.snap.head_tree, entries, contents)
    for c in split:
        entries[c.path] = (c.new_mode, written[c.path])
    want = {c.path for c in mine}
    # Where the commit touches a range grant, the ranges are re-mapped through its diff
    # once it lands (tree.sync_ranges): the same git process reads that patch too.
    read = diff.raw_and_patch if want & tv.ranged else diff.raw_diff
    got = {c.path for c in diff.parse_raw(read(ctx.repo, tv.snap.head_tree, tree))}
    if got != want:
        raise CheckFailed(f"self-check failed: the commit would touch {sorted(got ^ want)[:5]} "
                          "beyond the task's changes; nothing committed")
    return Plan(tree=tree, entries=entries, paths=sorted(entries))


