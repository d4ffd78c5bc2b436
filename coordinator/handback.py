"""`coord next` on a report delivered on another machine: bring its changes into this tree.

The report replaces what this tree holds of the task (shared/machines/handover.py, `bring_in`);
afterwards the state records the tree's copy as the task's work (for `coord restore` and
for the next report that comes back), and validation runs as for any report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.hunks.taskview import active_tasks, identities_of_selection, select, view
from hunkwise.shared.machines.handover import bring_in
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx
from hunkwise.shared.work import recovery

if TYPE_CHECKING:
    from hunkwise.shared.state.models import WorkReport


def bring_back(ctx: Ctx, task_id: str, report: WorkReport) -> list[str]:
    with store.locked(ctx.lay, name="commit"):
        state = store.load(ctx.lay)
        task = state.tasks[task_id]
        written = bring_in(ctx, state, task, report)
        tv = view(ctx.repo, active_tasks(state))
        sel = select(tv, task)
        ref = f"{recovery.SNAPSHOT_REFS}/{git.ref_component(task_id)}/r{report.revision}"
        saved = recovery.saved_of(ctx.repo, tv, sel, kind="report", revision=report.revision,
                                  ref=ref)
        git.run(ctx.repo, "update-ref", "--stdin",
                input=recovery.ref_updates(ref, saved).encode())
        with store.transaction(ctx.lay) as st:
            t = st.tasks[task_id]
            assert t.handover is not None
            t.handover = t.handover.model_copy(update={
                "brought": report.revision, "pending": None,
                "held": saved.model_copy(update={"base": tv.snap.head_tree})})
            t.claimed = identities_of_selection(tv, t, sel)
            t.saved = saved
    return written
