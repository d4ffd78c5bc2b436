"""Scenes set by editing the coordinator's state rather than by waiting."""

from __future__ import annotations

from pathlib import Path


def age_claims(repo: Path, *task_ids: str) -> None:
    """Make these tasks' claims stale by moving their heartbeat back past their TTL, as a
    worker that stopped beating would leave them: no test sleeps out a TTL."""
    from hunkwise.shared.state import store
    from hunkwise.shared.state.context import open_repo

    with store.transaction(open_repo(str(repo)).lay) as state:
        for tid in task_ids:
            claim = state.tasks[tid].claim
            assert claim is not None, f"{tid} has no claim to age"
            claim.heartbeat -= claim.ttl + 1
            claim.opened = min(claim.opened, claim.heartbeat)
