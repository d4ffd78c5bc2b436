"""A worker's report: staged before the state lock, recorded under it, published after it.

The state is the commit point. `worker done` writes and fsyncs its report into the inbox's
`tmp/` before taking the lock, and holds a lock on that file while it lives. Under the
state lock it only re-checks the task and records the new revision and the report's name
(nothing there runs git or fsyncs anything but the state). After the lock it writes the
snapshot ref and links the report into `new/`. So:

- a report in `new/` is always one the state recorded (readers that list the inbox and
  then read the state never see a revision the state has not handed out);
- two dones of one task never both deliver: the second finds the revision it prepared
  taken and delivers nothing;
- a writer killed before the state recorded its report leaves a `tmp/` file nobody reads
  (Maildir sweeps it); one killed after leaves a report the state says was delivered:
  the next coordinator command finishes the delivery (`settle`), once the file lock shows
  that its writer is gone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, TypeVar

from hunkwise.shared import git
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx
from hunkwise.shared.state.models import Saved, State, TaskState
from hunkwise.shared.work.recovery import WIP_REFS, ref_updates

from . import maildir

R = TypeVar("R")


class Draft(NamedTuple):
    """A report to deliver: its bytes, its task, and the revision the state hands it."""

    payload: bytes
    task_id: str
    revision: int


class Delivery:
    """Reports staged in `tmp/` on their way to `new/`: what `deliver` hands the step that
    records them."""

    def __init__(self, staged: list[maildir.Staged]) -> None:
        self.staged = staged
        self.linked: dict[str, Path] = {}

    def link(self, staged: maildir.Staged) -> Path:
        """Into `new/` now, under the caller's state lock, so that the report appears with
        the state that records it (a link, no fsync: cheap enough under the lock)."""
        path = maildir.link(staged)
        self.linked[staged.name] = path
        return path


def deliver(inbox: Path, drafts: Sequence[Draft], record: Callable[[Delivery], R], *,
            lasting: bool = True, publish: Callable[[maildir.Staged], Path] | None = None
            ) -> tuple[R, dict[str, Path]]:
    """Deliver reports in the three steps this module's docstring describes.

    1. Stage: each draft is written and fsynced into `tmp/` under a new name, and locked
       (`lasting`: its name made durable too, for a state that records it before it is
       published).
    2. Record: `record(delivery)` runs the caller's state transaction; nothing slow runs
       there. A report it links (`delivery.link`) appears in `new/` with that state.
    3. Publish: each linked report is made durable; each other one is published by
       `publish` when given (after the lock: `land` writes the snapshot ref first), else
       dropped, as the record step did not take it. If `record` raises, only the linked
       ones stay.

    Returns what `record` returned, and the path in `new/` of each report delivered by name.
    """
    staged: list[maildir.Staged] = []
    try:
        for d in drafts:
            staged.append(maildir.stage(inbox, d.payload, d.task_id, d.revision,
                                        lasting=lasting))
    except BaseException:
        for st in staged:
            maildir.drop(st)
        raise
    delivery = Delivery(staged)
    try:
        result = record(delivery)
    except BaseException:
        _publish(delivery, None)
        raise
    return result, _publish(delivery, publish)


def _publish(delivery: Delivery,
             publish: Callable[[maildir.Staged], Path] | None) -> dict[str, Path]:
    paths: dict[str, Path] = {}
    for st in delivery.staged:
        if st.name in delivery.linked:
            maildir.published(st)
            paths[st.name] = delivery.linked[st.name]
        elif publish is not None:
            paths[st.name] = publish(st)
        else:
            maildir.drop(st)
    return paths


def land(ctx: Ctx, task_id: str, ref: str, saved: Saved, staged: maildir.Staged) -> Path:
    """What follows the state's record of a report: its snapshot ref and its own tree's
    (and the task's unreported records dropped) in one ref transaction, then the report
    into `new/`."""
    try:
        old = git.list_refs(ctx.repo, f"{WIP_REFS}/{git.ref_component(task_id)}/")
        moves = ref_updates(ref, saved) + "".join(f"delete {r}\n" for r in old)
        git.run(ctx.repo, "update-ref", "--stdin", input=moves.encode())
    finally:
        # Recorded, so delivered: a failed ref update costs the snapshot its protection
        # from gc, not the report.
        path = maildir.publish(staged)
    return path


def settle(ctx: Ctx, state: State | None = None) -> list[str]:
    """Publish the reports the state recorded whose writers were killed before publishing
    them; their names. Costs one listing of `tmp/` when there are none.

    Once per command: the coordinator's commands that read the inbox call it first (accept,
    next, review, inbox, status), and a later call with the same context does nothing."""
    if ctx.settled:
        return []
    try:
        staged = set(os.listdir(ctx.lay.inbox / "tmp"))
    except FileNotFoundError:
        staged = set()
    if not staged:
        ctx.settled = True
        return []
    state = store.load(ctx.lay) if state is None else state
    done = []
    for task in state.tasks.values():
        saved = task.saved
        if task.state != TaskState.REPORTED or task.last_report not in staged or saved is None \
                or saved.kind != "report" or saved.revision != task.revision:
            continue
        taken = maildir.adopt(ctx.lay.inbox, task.last_report)
        if taken is not None:
            land(ctx, task.id, saved.ref, saved, taken)
            done.append(task.last_report)
    ctx.settled = True
    return done
