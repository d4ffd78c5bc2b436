"""What the attribution oracles share: real `git diff -U0` between two texts, the tree
view of one file, and a report as `worker done` writes it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunkwise.shared import git as hw_git
from hunkwise.shared.hunks.diff import FileChange, Hunk, parse_patch
from hunkwise.shared.hunks.ownership import attribute
from hunkwise.shared.state.models import ChangeEntry, Task, WorkReport

if TYPE_CHECKING:
    from hunkwise.shared.hunks.taskview import TreeView

PATH = "m.py"


class Differ:
    """Real `git diff -U0` between two texts, with the product's pinned options."""

    def __init__(self, where: Path) -> None:
        self.a, self.b, self.where = where / "a", where / "b", where

    def hunks(self, old: bytes, new: bytes) -> list[Hunk]:
        self.a.write_bytes(old)
        self.b.write_bytes(new)
        out = subprocess.run(["git", "diff", "--no-index", "-U0", *hw_git.DIFF_PINS, "a", "b"],
                             cwd=self.where, capture_output=True).stdout
        return next(iter(parse_patch(out).values()), (False, []))[1]


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
