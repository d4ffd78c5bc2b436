"""Clean temporary checkouts of one commit, for checks that must not see the shared tree."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hunkwise.shared import git


@contextlib.contextmanager
def clean_checkout(repo: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of `commit` in a temp dir, removed afterwards."""
    parent = Path(tempfile.mkdtemp(prefix="hunkwise-checkout-"))
    where = parent / "tree"
    try:
        git.run(repo, "worktree", "add", "--detach", "--force", "-q", str(where), commit,
                env={"HUNKWISE_COORDINATOR": "1"})
        yield where
    finally:
        git.run_rc(repo, "worktree", "remove", "--force", str(where))
        shutil.rmtree(parent, ignore_errors=True)
        git.run_rc(repo, "worktree", "prune")
