"""`coord verify --dry`: the commands on HEAD, in a scratch checkout, without a freeze.

It refuses nothing (no freeze, a freeze in force, tasks in progress, a dirty tree) and
records nothing; its exit code is verify's.
"""

from __future__ import annotations

from testing.cli import Cli, ok
from testing.generated import begin, generated_project, session, toml, worktrees
from testing.repo import MakeRepo, git, write


def test_dry_runs_head_without_a_freeze_and_records_nothing(make_repo: MakeRepo,
                                                            coord: Cli) -> None:
    repo = generated_project(make_repo, toml(carry=["build"]))
    write(repo, "suite.sh", "exit 1\n")  # an uncommitted edit: not what runs
    doc = ok(coord(repo, "verify", "--dry"))
    assert doc["dry"] is True and doc["ok"] is True
    assert doc["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert [c["passed"] for c in doc["commands"]] == [True]
    assert not (repo / ".git" / "coord" / "verifications").exists()
    assert ok(coord(repo, "status"))["freeze"] is None
    assert len(worktrees(repo)) == 1


def test_dry_exits_as_verify_does_when_a_command_fails(make_repo: MakeRepo, coord: Cli) -> None:
    repo = generated_project(make_repo, toml())  # no setup, no carry: the suite fails
    r = coord(repo, "verify", "--dry")
    assert r.code == 1
    assert r.doc["ok"] is False and r.doc["problems"] == ["'sh suite.sh' failed (exit 1)"]
    text = coord(repo, "verify", "--dry", json_out=False)
    assert text.code == 1
    assert "missing generated file build/version.txt" in text.stdout
    assert text.stdout.rstrip().splitlines()[-1].startswith("verify --dry FAILED")


def test_dry_refuses_nothing_a_freeze_and_running_tasks_included(make_repo: MakeRepo,
                                                                 coord: Cli, worker: Cli) -> None:
    repo = generated_project(make_repo, toml(setup=["sh gen.sh"]))
    begin(coord, worker, repo, "A", "src.txt")
    write(repo, "src.txt", "half done\n")
    assert ok(coord(repo, "verify", "--dry"))["ok"] is True  # a task in progress
    ok(worker(repo, "done", "A", session=session("A")))
    frozen = ok(coord(repo, "freeze"))["freeze"]
    assert ok(coord(repo, "verify", "--dry"))["ok"] is True  # frozen
    assert ok(coord(repo, "status"))["freeze"]["commit"] == frozen["commit"]
    assert ok(coord(repo, "verify"))["ok"] is True  # the freeze still holds


def test_dry_without_commands_fails(make_repo: MakeRepo, coord: Cli) -> None:
    repo = make_repo({"a.txt": "x\n"})
    r = coord(repo, "verify", "--dry")
    assert r.code == 1 and "no [verify] commands" in r.doc["problems"][0]
