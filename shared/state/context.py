"""What every command starts from: the repository, its state layout and its settings."""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.state import config, store
from hunkwise.shared.state.identity import session_role as session_role  # (its home)
from hunkwise.shared.state.models import ROLE_RE, SESSION_RE, State, Task, check_task_id


@dataclass
class Ctx:
    """One command's view of the repository: where it is, where its state lives."""

    repo: Path
    lay: store.Layout
    # Set once this command published the reports killed workers recorded but never
    # published (`inbox.delivery.settle`): it does that once, whichever step asks first.
    settled: bool = field(default=False, compare=False)

    @cached_property
    def config(self) -> config.Config:
        """`coord.toml` as committed at HEAD, read once, when a command first needs it."""
        return config.load(self.repo)


def open_repo(repo: str | None) -> Ctx:
    top = git.toplevel(repo)
    main = git.linked_worktree_of(top)
    if main is not None:
        # A linked worktree has its own HEAD and index, but shares the state: acting here
        # would re-map every task's ranges through another commit.
        raise UsageError(f"{top} is a linked worktree; run hunkwise from the main working "
                         f"tree at {main}")
    return Ctx(repo=top, lay=store.layout(top))


def refuse_if_frozen(state: State, what: str) -> None:
    """Every mutation checks the freeze under the lock that guards its write."""
    fz = state.freeze
    if fz is not None:
        raise StateRefused(f"{what} refused: release freeze of batch {fz.batch} in force since "
                           f"{iso(fz.at)} by {fz.by}; wait for coord thaw")


def get_task(state: State, task_id: str, lay: store.Layout | None = None, *,
             archive: store.Layout | None = None) -> Task:
    """The task; with `lay`, a finished task moved to the archive at a thaw is brought
    back into `state` (a revert of an earlier batch's task needs it). With `archive`, such
    a task is named as what it is (finished in an earlier batch, which commit) instead of
    being called unknown: refused (3), as a task in the wrong state is."""
    check_task_id(task_id)
    task = state.tasks.get(task_id)
    where = lay if lay is not None else archive
    if task is None and where is not None:
        found = [d for d in store.archived(where, "task") if d.get("id") == task_id]
        if found:
            task = Task.model_validate(found[-1])
            if lay is None:
                raise StateRefused(archived_text(task))
            state.tasks[task_id] = task
    if task is None:
        raise UsageError(f"unknown task {task_id!r} (coord status --all lists the tasks)")
    return task


def archived_text(task: Task) -> str:
    """What a task finished in an earlier batch was, for a command that asks about it."""
    what = f"{task.id} was {task.state} in batch {task.batch}"
    if task.commit:
        what += f" (commit {task.commit[:12]})"
    return (f"{what} and is archived since that batch's thaw; nothing left to do "
            "(coord status --all lists it)")


def hostname() -> str:
    """This machine's host name (os.uname: the socket module's import is not needed for it)."""
    try:
        return os.uname().nodename
    except AttributeError:  # pragma: no cover - Windows
        import socket

        return socket.gethostname()


def machine_name() -> str:
    """This machine's name in session ids and sync refs: `$HUNKWISE_MACHINE`, else the
    host name (two clones on one host act as two machines by setting it)."""
    name = os.environ.get("HUNKWISE_MACHINE", "").strip() or hostname().split(".")[0]
    return re.sub(r"[^A-Za-z0-9_-]", "-", name)[:64].strip("-") or "machine"


def check_session(session: str) -> str:
    if not SESSION_RE.fullmatch(session):
        raise UsageError(f"malformed session id {session!r}: expected "
                         "sess-YYYYMMDD-HHMM-<role>@<machine>")
    return session


def new_session(state: State, role: str) -> str:
    """`sess-YYYYMMDD-HHMM-<role>@<machine>`, unique among the sessions this state knows.

    Two sessions of one role started in the same minute on one machine get `.2`, `.3`...
    after the role; routing by `<role>@<machine>` ignores that suffix.
    """
    if not ROLE_RE.fullmatch(role):
        raise UsageError(f"malformed role {role!r}: letters, digits, '_' and '-', at most 32")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M")
    base = f"sess-{stamp}-{role}"
    host = machine_name()
    candidate = f"{base}@{host}"
    n = 1
    while candidate in state.sessions:
        n += 1
        candidate = f"{base}.{n}@{host}"
    return candidate


def env_session() -> str | None:
    """The session this environment runs: `$COORD_SESSION`, else the one the agent's own
    session variable was mapped to at `worker start` (an agent's every command is its
    worker's, nothing set at its launch)."""
    value = os.environ.get("COORD_SESSION", "").strip()
    if value:
        return value
    from hunkwise.shared.state.identity import env_agent_session

    return env_agent_session(os.environ)


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
