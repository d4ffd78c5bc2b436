"""A SIGKILL of `coord accept` at each step: the next command leaves a consistent state.

Consistent: the task is accepted iff HEAD holds its commit, the index equals HEAD, no
journal, temporary index folder or temporary worktree is left, and a task whose commit
did not land can still be accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.cli import ok, run_cli
from testing.repo import git, numbered, set_line

STEPS = ["accept-planned", "accept-journal", "accept-recheck", "accept-head-moved",
         "accept-state-saved", "accept-index-reset", "accept-finished"]


def _state(repo: Path, tid: str) -> str:
    import json

    return str(json.loads((repo / ".git" / "coord" / "state.json").read_bytes())
               ["tasks"][tid]["state"])


def _leftovers(repo: Path) -> list[str]:
    gd = repo / ".git"
    found = [p.name for p in gd.iterdir() if p.name.startswith("hunkwise-")]
    found += [p.name for p in (gd / "coord").glob("accept.json")]
    scratch = gd / "coord" / "scratch"
    found += [p.name for p in scratch.iterdir()] if scratch.is_dir() else []
    found += [line for line in git(repo, "worktree", "list", "--porcelain").split("\n")
              if line.startswith("worktree ") and line != f"worktree {repo}"]
    return found


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("then", ["next", "accept", "status"])
def test_accept_killed_at_each_step_is_repaired_by_the_next_command(
        make_repo, coord, worker, step: str, then: str) -> None:
    repo = make_repo({"a.txt": numbered(5), "b.txt": numbered(5)})
    for tid, grant in (("A", "a.txt"), ("B", "b.txt")):
        ok(coord(repo, "assign", tid, "--title", f"{tid} task", "--expect", "e", "--write",
                 grant, "--check", "true"))
        ok(worker(repo, "start", tid))
    set_line(repo, "a.txt", 2, "A's line")
    set_line(repo, "b.txt", 4, "B's uncommitted line")
    ok(worker(repo, "done", "A"))
    head = git(repo, "rev-parse", "HEAD").strip()
    ok(coord(repo, "next"))
    r = run_cli("coord", repo, "accept", "A", "--recheck", process=True,
                env={"HUNKWISE_TEST_KILL_AT": step})
    assert r.code == -9, r.stdout + r.stderr  # killed where asked
    if then == "accept":
        r = coord(repo, "accept", "A")
        assert r.code in (0, 3), r.stdout + r.stderr  # 3: accepted already (repaired)
    else:
        ok(coord(repo, then))
    moved = git(repo, "rev-parse", "HEAD").strip() != head
    landed = moved and "Coord-Task: A" in git(repo, "log", "-1", "--format=%B")
    assert moved == landed
    assert (_state(repo, "A") == "accepted") == landed
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert _leftovers(repo) == []
    assert git(repo, "status", "--porcelain") == (" M b.txt\n" if landed else " M a.txt\n M b.txt\n")
    if not landed:
        ok(coord(repo, "accept", "A"))
    assert git(repo, "show", "HEAD:a.txt") == numbered(5).replace("line 2", "A's line")
    assert (repo / "b.txt").read_text() == numbered(5).replace("line 4", "B's uncommitted line")
    ok(worker(repo, "done", "B"))
    ok(coord(repo, "accept", "B"))
    assert git(repo, "status", "--porcelain") == ""
