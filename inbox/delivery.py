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
from pathlib import Path

from hunkwise.shared import git
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx
from hunkwise.shared.state.models import State, TaskState
from hunkwise.shared.work.recovery import WIP_REFS

from . import maildir


def land(ctx: Ctx, task_id: str, ref: str, tree: str, staged: maildir.Staged) -> Path:
    """What follows the state's record of a report: its snapshot ref (and the task's
    unreported records dropped) in one ref transaction, then the report into `new/`."""
    try:
        old = git.list_refs(ctx.repo, f"{WIP_REFS}/{git.ref_component(task_id)}/")
        moves = f"update {ref} {tree}\n" + "".join(f"delete {r}\n" for r in old)
        git.run(ctx.repo, "update-ref", "--stdin", input=moves.encode())
    finally:
        # Recorded, so delivered: a failed ref update costs the snapshot its protection
        # from gc, not the report.
        path = maildir.publish(staged)
    return path


def settle(ctx: Ctx, state: State | None = None) -> list[str]:
    """Publish the reports the state recorded whose writers were killed before publishing
    them; their names. Costs one listing of `tmp/` when there are none."""
    try:
        staged = set(os.listdir(ctx.lay.inbox / "tmp"))
    except FileNotFoundError:
        return []
    if not staged:
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
            land(ctx, task.id, saved.ref, saved.tree, taken)
            done.append(task.last_report)
    return done
