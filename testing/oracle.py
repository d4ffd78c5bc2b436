"""What the attribution oracles share: real `git diff -U0` between two texts, the tree
view of one file, a report as `worker done` writes it, and the play itself: every task
reports, then the accepts in a random order, each checked against the truth."""

from __future__ import annotations

import random
import subprocess
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hunkwise.shared import git as hw_git
from hunkwise.shared.hunks.diff import FileChange, Hunk, parse_patch, splice, split_lines
from hunkwise.shared.hunks.ownership import attribute, map_grant
from hunkwise.shared.hunks.slide import placements
from hunkwise.shared.state.models import (
    DISCLAIMED,
    ChangeEntry,
    Grant,
    Task,
    TaskState,
    WorkReport,
)

if TYPE_CHECKING:
    from hunkwise.shared.hunks.ownership import Ambiguous
    from hunkwise.shared.hunks.taskview import TreeView

PATH = "m.py"


class Differ:
    """Real `git diff -U0` between two texts, with the product's pinned options.

    `each(fn, items)` runs the scenarios of a chunk side by side, in threads, and diffs
    what they wait for together: one `git diff --no-index` of two folders answers every
    pair asked while each scenario waits on one (the same per-file diff as a pair alone;
    a chunk of 65 scenarios starts some 30 git processes instead of some 1,000)."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.seen: dict[tuple[bytes, bytes], list[Hunk]] = {}
        self._turn = threading.Condition()
        self._running = 0  # scenarios of `each` not waiting for a diff
        self._asked: dict[tuple[bytes, bytes], tuple[bytes, bytes]] = {}
        self._batches = 0
        self._side_by_side: set[threading.Thread] = set()

    def hunks(self, old: bytes, new: bytes) -> list[Hunk]:
        """git's hunks from `old` to `new`; a pair diffed before (the first accept's view
        is the reports' view; both modes of a seed diff the same texts) is not run again.
        New objects each time: views compare hunks by identity."""
        import dataclasses
        import hashlib

        key = (hashlib.sha1(old).digest(), hashlib.sha1(new).digest())
        got = self.seen.get(key)
        if got is None:
            if threading.current_thread() in self._side_by_side:
                got = self._wait(key, old, new)
            else:
                self._diff({key: (old, new)})
                got = self.seen[key]
        return [dataclasses.replace(h) for h in got]

    def each(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        """fn(item) for every item, side by side, their diffs asked together; the results
        in the items' order, the first failure (in that order) raised."""
        items = list(items)
        results: list[Any] = [None] * len(items)
        errors: list[BaseException | None] = [None] * len(items)

        def one(i: int) -> None:
            try:
                results[i] = fn(items[i])
            except BaseException as e:  # (raised again below, in the items' order)
                errors[i] = e
            finally:
                with self._turn:
                    self._running -= 1
                    self._turn.notify_all()

        threads = [threading.Thread(target=one, args=(i,), daemon=True)
                   for i in range(len(items))]
        with self._turn:
            self._running += len(threads)
        self._side_by_side.update(threads)
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            self._side_by_side.difference_update(threads)
        for e in errors:
            if e is not None:
                raise e
        return results

    def _wait(self, key: tuple[bytes, bytes], old: bytes, new: bytes) -> list[Hunk]:
        """Wait for the pair's diff; the last scenario to wait runs every pair asked."""
        with self._turn:
            self._asked[key] = (old, new)
            self._running -= 1
            try:
                while key not in self.seen:
                    if self._running == 0:
                        # (kept until answered: a failure is raised to each waiter in turn)
                        self._diff(dict(self._asked))
                        self._asked.clear()
                        self._turn.notify_all()
                    else:
                        self._turn.wait()
            finally:
                self._running += 1
            return self.seen[key]

    def _diff(self, pairs: dict[tuple[bytes, bytes], tuple[bytes, bytes]]) -> None:
        """git's hunks of every pair, into `seen`: one `git diff --no-index` of two folders."""
        import shutil

        self._batches += 1
        top = self.where / f"batch{self._batches}"
        (top / "a").mkdir(parents=True)
        (top / "b").mkdir()
        names = {}
        for n, (key, (old, new)) in enumerate(pairs.items()):
            name = f"{n:06d}"
            names[name.encode()] = key
            (top / "a" / name).write_bytes(old)
            (top / "b" / name).write_bytes(new)
        out = subprocess.run(["git", "diff", "--no-index", "-U0", *hw_git.DIFF_PINS, "a", "b"],
                             cwd=top, capture_output=True)
        assert out.returncode in (0, 1), out.stderr
        for path, (_binary, hunks) in parse_patch(out.stdout).items():
            self.seen[names[path.split(b"/", 1)[1]]] = hunks
        for key in names.values():
            self.seen.setdefault(key, [])  # (the same texts: no section)
        shutil.rmtree(top)


def view_of(differ: Differ, old: bytes, new: bytes, tasks: list[Task], evidence: Any) -> TreeView:
    from hunkwise.shared.hunks.taskview import TreeView

    hunks = differ.hunks(old, new)
    changes = ([FileChange(PATH, "M", "100644", "100644", "1" * 40, "2" * 40, False, hunks)]
               if hunks else [])
    att = attribute(changes, tasks, {PATH: old}, {PATH: evidence} if evidence else None)
    return TreeView(None, changes, att, {PATH: old})  # type: ignore[arg-type]


def report_of(tid: str, entries: list[ChangeEntry]) -> WorkReport:
    return WorkReport(schema_version=1, task_id=tid, status="done", session=None,
                      created_at="2026-01-01T00:00:00Z", base_commit=None, title=tid, expect="e",
                      summary="", changes=entries, patch_sha256="0" * 64, snapshot="", revision=1,
                      report_id=f"r-{tid}", checks=[], overlaps=[], unfinished=[],
                      proposed_commit={"subject": tid, "body": ""})  # type: ignore[arg-type]


class Story(Protocol):
    """What an oracle's scenario tells the driver: the file with a set of tasks' edits
    applied (the base with none, the tree with all), and itself, for a failure."""

    tasks: list[str]

    def text(self, accepted: set[str]) -> bytes: ...

    def describe(self) -> str: ...


# A worker's truthful answer about a contested change: its own, not its own, or (None)
# lines of both, which no answer fits.
Answer = Callable[[str, "Ambiguous"], bool | None]


def play(sc: Story, grants: dict[str, list[Grant]], differ: Differ, evidence: Any,
         answer: Answer, order_seed: int, label: str) -> tuple[int, list[str], int]:
    """Every task reports as `worker done` does, on the tree holding every edit (answering
    what it is asked with `answer`); then the tasks are accepted in a random order, and
    after every accept HEAD must be exactly the base plus the accepted tasks' edits.
    Returns (accepted, refused tasks, questions asked)."""
    from hunkwise.coordinator.validation import assess
    from hunkwise.shared.hunks.taskview import (
        decide_boundaries,
        identities_of_selection,
        select,
        task_entries,
    )

    base, final = sc.text(set()), sc.text(set(sc.tasks))
    tasks = {t: Task(id=t, title=t, expect="e", grants=gs, state=TaskState.IN_PROGRESS,
                     created_at=0.0, updated_at=0.0) for t, gs in grants.items()}
    tv = view_of(differ, base, final, list(tasks.values()), evidence)
    reports: dict[str, WorkReport] = {}
    asked = 0
    undecidable: set[str] = set()
    for tid, task in tasks.items():
        sel = select(tv, task)
        claim: list[str] = []
        disclaim: list[str] = []
        for amb in sel.claimed_ambiguous:
            asked += 1
            h = amb.hunk
            where = f"{PATH}:{h.new_start}-{h.new_start + h.new_lines - 1}"
            says = answer(tid, amb)
            if says is None:
                undecidable.add(tid)  # lines of both: no truthful answer; the worker stops
            else:
                (claim if says else disclaim).append(where)
        if any(tid in tids for _ch, _h, tids in tv.attribution.conflicts):
            undecidable.add(tid)  # `worker done` refuses: an edit it cannot claim
        if decide_boundaries(sel, claim, disclaim):
            undecidable.add(tid)
        reports[tid] = report_of(tid, task_entries(Path("."), tv, task, sel))
        task.claimed = identities_of_selection(tv, task, sel)
        for amb in sel.disclaimed_ambiguous:
            task.claimed.setdefault(PATH, []).append(DISCLAIMED + amb.canon)
    for task in tasks.values():
        task.state = TaskState.REPORTED
    _discard_each(sc, tasks, tv, final, undecidable, label, differ, evidence)

    order = list(sc.tasks)
    random.Random(order_seed).shuffle(order)
    head = base
    accepted: set[str] = set()
    refusals: list[str] = []
    for tid in order:
        if tid in undecidable:
            refusals.append(tid)
            continue
        active = [t for t in tasks.values() if t.active]
        v = assess(Path("."), view_of(differ, head, final, active, evidence), tasks,
                   tasks[tid], reports[tid])
        if v.findings:
            # A refusal is never a wrong commit. Besides the ambiguous (what the file and
            # the record cannot tell), a division that moved since the report (another
            # task's commit beside it changed which lines tie) is refused as stale, or as
            # a change the report lists and the new division no longer gives the task.
            codes = {f.code for f in v.findings}
            assert codes <= {"ambiguous", "stale-report", "missing-change"}, \
                f"{tid} refused with {v.findings}\n{sc.describe()}"
            refusals.append(tid)
            continue
        assert v.selection is not None
        mine = v.selection.changes
        new_head = splice(head, mine[0].hunks if mine else [])
        accepted.add(tid)
        want = sc.text(accepted)
        assert new_head == want, (f"{label}: accepting {tid} gives a wrong commit "
                                  f"(accepted {sorted(accepted)})\n"
                                  f"{sc.describe()}\ngot  {new_head!r}\nwant {want!r}")
        tasks[tid].state = TaskState.ACCEPTED
        moved = differ.hunks(head, new_head)
        places = placements(split_lines(head), moved)  # as sync_ranges maps them
        for t in tasks.values():
            if t.active:
                for g in t.grants:
                    map_grant(g, moved, places)
        head = new_head
    return len(accepted), refusals, asked




def _discard_each(sc: Story, tasks: dict[str, Task], tv: TreeView, final: bytes,
                  undecidable: set[str], label: str, differ: Differ, evidence: Any) -> None:
    """`coord reject --discard`, task by task on the tree holding every edit: what it
    removes is exactly the task's edits, never a line of another task (the same selection
    and inverse splice as outcomes.reject), wherever the reports were answered."""
    from hunkwise.shared.hunks.diff import inverse
    from hunkwise.shared.hunks.taskview import claims_of, may_still_claim, moved_by_discard, select

    for tid, task in tasks.items():
        if tid in undecidable:
            continue
        sel = select(tv, task, claims_of(task))
        if sel.unclaimed_ambiguous or any(
                may_still_claim(tasks[o], PATH, amb.canon)
                for amb in sel.claimed_ambiguous for o in amb.tasks if o != tid and o in tasks):
            continue  # the discard is refused (nothing written), or leaves those lines
        mine = sel.changes[0].hunks if sel.changes else []
        got = splice(final, [inverse(h) for h in mine])
        # As outcomes._refuse_moves divides it: the task and what its sessions wrote left out.
        rest = [t for t in tasks.values() if t.id != tid]
        after = view_of(differ, sc.text(set()), got, rest, evidence and {
            d: ({t: n for t, n in w.items() if t != tid}, {t: n for t, n in g.items() if t != tid})
            for d, (w, g) in evidence.items()})
        if moved_by_discard(tv, after, list(tasks.values()), tid, {PATH}):
            continue  # refused: nothing written
        want = sc.text(set(sc.tasks) - {tid})
        assert got == want, (f"{label}: discarding {tid} does not remove exactly its edits\n"
                             f"{sc.describe()}\ngot  {got!r}\nwant {want!r}")
