"""A task's uncommitted edits crossing machines: handed over, taken, brought back.

`worker handoff ID --to build@laptop` records the task's own changes (its hunks within its
grants, by place and bytes) with the snapshot tree and base tree they were taken on, and
publishes them with the handoff (shared/sync.py). On the laptop, `worker start ID` puts
exactly those changes into its tree (`put_back`, as `coord restore` puts a recorded
revision back), refusing where the laptop's lines differ from that base. The laptop's
report travels back; the coordinator's `coord next` brings it into the desktop's tree
(`bring_in`) in place of what the desktop's tree holds of the task: the desktop kept its
copy of the handed-over edits, and the report *replaces* that copy, so nothing appears
twice and nothing is lost. Where the desktop's copy changed since it was handed over (or
the report's lines were changed in the desktop's tree), nothing is written and the lines
are named.

Every write goes through the compare-and-swap door (shared/worktree.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from . import diff, git, recovery, store
from .diff import FileChange, Hunk
from .errors import StateRefused
from .models import Saved, State, Task, report_path
from .worktree import write_entries

HANDOFF_REFS = "refs/hunkwise/handoffs"


def _lines(h: Hunk) -> str:
    return f"lines {h.old_start}-{h.old_end}" if h.old_lines else f"after line {h.old_start}"


def _safe(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and ".git" not in parts


def record_edits(repo: Path, tv: Any, task: Task, kind: str = "handoff") -> Saved | None:
    """The task's own changes in the tree now, as a record that can travel: the snapshot
    tree, the base *tree* (a tree travels without the commit's history) and its hunks."""
    from .tree import select

    sel = select(tv, task)
    hunks, whole = recovery.record_of(sel)
    if not hunks and not whole:
        return None
    git.run(repo, "update-ref", f"{HANDOFF_REFS}/{task.id}", tv.snap.tree)
    return Saved(kind=kind, revision=max(task.revision, 1), tree=tv.snap.tree,
                 base=tv.snap.head_tree, at=store.now(), ref=f"{HANDOFF_REFS}/{task.id}",
                 hunks=hunks, whole=whole)


def put_back(repo: Path, task: Task, saved: Saved, *, what: str, clash: str) -> list[str]:
    """Put what is missing of `saved` into the tree, touching nothing else; the paths
    written. Refuses (3, nothing written) where other changes sit on the same lines:
    `clash` says what that means for the caller ("were changed by someone else since")."""
    recorded = recovery.saved_changes(repo, saved)
    bad = sorted(report_path(p) for p in recorded if not _safe(p))
    outside = sorted(report_path(p) for p in recorded if not recovery.covered(task, p))
    if bad or outside:
        raise StateRefused(f"cannot {what}: {', '.join((bad + outside)[:5])} lies outside "
                           "its grants; nothing was written")
    snap = diff.snapshot(repo)
    base = saved.base or git.empty_tree(repo)
    current = {c.path: c for c in diff.diff_trees(repo, base, snap.tree, sorted(recorded))} \
        if recorded else {}
    gone = recovery.loss(repo, saved, {report_path(p): c for p, c in current.items()},
                         recorded, full=True)
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
        moved, clashes = diff.carry(hunks, cur.hunks if cur else [])
        problems += [f"{report_path(path)}: {_lines(h)} {clash}" for h in clashes]
        if clashes:
            continue
        now_oid = cur.new_oid if cur else rc.old_oid
        blob = git.cat_blobs(repo, [now_oid])[now_oid]
        try:
            contents.append(diff.splice(blob, moved))
        except ValueError:
            problems.append(f"{report_path(path)}: the lines around the task's changes moved "
                            "in a way that cannot be followed")
            continue
        spliced.append((path, rc.new_mode))
        expect[path] = now_oid
    if problems:
        raise StateRefused(f"cannot {what}: " + "; ".join(problems[:10]) + "; nothing was written")
    for (path, mode), oid in zip(spliced, git.hash_blobs(repo, contents), strict=True):
        entries[path] = (mode, oid)
    if entries:
        write_entries(repo, entries, expect=expect)
    return sorted(report_path(p) for p in entries)


# ---- the coordinator's side: a report from another machine comes back ----------------------

def _report_record(report: Any, snapshot: str, base: str) -> Saved:
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


def bring_in(ctx: Any, state: State, task: Task, report: Any) -> list[str]:
    """Put a report delivered on another machine into this tree in place of what this
    tree holds of the task (`task.handover.held`); the paths written.

    Refuses (3, nothing written, the lines named) where this tree's copy of the task's
    lines is no longer what it held (someone changed them here meanwhile), or where the
    report's changes fall on lines changed here since the report's base.
    """
    from .tree import active_tasks, select, view

    ho = task.handover
    assert ho is not None and ho.pending is not None
    _rev, machine, snapshot, base = ho.pending
    repo = ctx.repo
    for oid in (snapshot, base):
        if git.run_rc(repo, "cat-file", "-e", oid)[0] != 0:
            raise StateRefused(f"{task.id}: the report's snapshot from {machine} is not here "
                               "yet; run coord sync")
    incoming = _report_record(report, snapshot, base)
    recorded = recovery.saved_changes(repo, incoming)
    what = f"bring {task.id} r{report.revision} from {machine} into this tree"
    outside = sorted(report_path(p) for p in recorded
                     if not _safe(p) or not recovery.covered(task, p))
    if outside:
        raise StateRefused(f"cannot {what}: {', '.join(outside[:5])} lies outside its grants; "
                           "nothing was written")
    tv = view(repo, active_tasks(state))
    mine = {c.path: c for c in select(tv, task).changes}  # what this tree holds of the task
    held = ho.held
    problems: list[str] = []
    # This tree's copy must be what was handed over (or last brought in): a change of
    # those lines here since is someone's edit, and replacing it would lose it.
    for path, ch in mine.items():
        rp = report_path(path)
        if ch.splittable and ch.hunks and held is not None and rp in held.hunks:
            free = Counter(sha for _s, _n, sha in held.hunks[rp])
            for h in ch.hunks:
                if free[h.sha256] > 0:
                    free[h.sha256] -= 1
                else:
                    problems.append(f"{rp}: {_lines(h)} were changed in this tree since the "
                                    "handover")
        elif held is None or rp not in held.whole and rp not in held.hunks:
            problems.append(f"{rp}: changed in this tree since the handover")
        elif not (ch.splittable and ch.hunks) and held.whole.get(rp) != _whole_id(ch):
            problems.append(f"{rp}: changed in this tree since the handover (whole file)")
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
        plain_oid = git.hash_blobs(repo, [plain])[0]
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
                           "written (the report stays pending: coord next tries again)")
    oids = git.hash_blobs(repo, [t for _p, _m, t in texts]) if texts else []
    for (path, mode, _t), oid in zip(texts, oids, strict=True):
        entries[path] = (mode, oid)
    entries = {p: e for p, e in entries.items()
               if e != _now_entry(now.get(p), head_entries.get(p))}
    if entries:
        write_entries(repo, entries, expect={p: expect[p] for p in entries})
    return sorted(report_path(p) for p in entries)


def _whole_id(ch: FileChange) -> str:
    from .tree import whole_identity

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
