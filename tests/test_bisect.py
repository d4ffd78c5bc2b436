"""`coord verify --bisect`: a failed batch names the task commit that broke it.

The suite logs each run to a file outside the repository, so a test counts how many times
bisect ran the failing command after verify did.
"""

from __future__ import annotations

from pathlib import Path

from testing.cli import Cli, ok
from testing.generated import accept_task, generated_project, lines_of, toml, worktrees
from testing.repo import MakeRepo, git


def suite(log: Path) -> str:
    """Fails when any f*.txt says `bad`, or when both halves of a clash are in."""
    return (f"echo run >> {log}; ! grep -l bad f*.txt && "
            "! { grep -q clash-1 f*.txt && grep -q clash-2 f*.txt; }")


def batch(make_repo: MakeRepo, coord: Cli, worker: Cli, log: Path, contents: list[str],
          extra: str = "") -> tuple[Path, list[str]]:
    files = {f"f{i}.txt": "fine\n" for i in range(1, len(contents) + 1)}
    repo = generated_project(make_repo, toml(verify=[suite(log)], extra=extra), files)
    commits = [accept_task(coord, worker, repo, f"T{i}", f"f{i}.txt", text)
               for i, text in enumerate(contents, 1)]
    ok(coord(repo, "freeze"))
    return repo, commits


def test_the_third_of_five_task_commits_breaks_the_suite_and_bisect_names_it(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    repo, commits = batch(make_repo, coord, worker, log,
                          ["one\n", "two\n", "bad three\n", "four\n", "five\n"])
    r = coord(repo, "verify", "--bisect")
    assert r.code == 1
    doc = r.doc
    assert doc["ok"] is False
    assert doc["culprit"] == "T3"
    b = doc["bisect"]
    assert b["commit"] == commits[2] and b["alone"] is True
    assert b["tasks"] == ["T1", "T2", "T3", "T4", "T5"]
    assert b["base"] == git(repo, "rev-parse", f"{commits[0]}^").strip()
    assert lines_of(log) - 1 <= 3  # verify's run, then at most three more
    assert len(b["ran"]) == lines_of(log) - 1
    assert {p["task"] for p in b["ran"]} <= {"T1", "T2", "T3", "T4"}
    assert len(worktrees(repo)) <= 2  # the shared tree, and at most the cached checkout


def test_bisect_says_what_it_ran_in_the_verdict(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                                tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    repo, _ = batch(make_repo, coord, worker, log, ["one\n", "bad two\n", "three\n"])
    r = coord(repo, "verify", "--bisect", json_out=False)
    assert r.code == 1
    out = r.stdout
    assert "bisect: ran " in out and "on T2" in out
    assert "bisect: culprit T2" in out
    assert out.rstrip().splitlines()[-1].startswith("verify FAILED")


def test_a_task_that_fails_only_together_with_an_earlier_one_is_named_and_not_alone(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    repo, commits = batch(make_repo, coord, worker, log,
                          ["one\n", "clash-1\n", "three\n", "clash-2\n", "five\n"])
    doc = coord(repo, "verify", "--bisect").doc
    assert doc["culprit"] == "T4"
    assert doc["bisect"]["alone"] is False
    assert "fails only together" in doc["bisect"]["note"]
    alone = [p for p in doc["bisect"]["ran"] if p["alone"]]
    assert len(alone) == 1 and alone[0]["passed"] is True


def test_the_setting_bisects_and_a_passing_verify_does_not(make_repo: MakeRepo, coord: Cli,
                                                           worker: Cli, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    repo, _ = batch(make_repo, coord, worker, log, ["bad one\n", "two\n"],
                    extra="bisect = true\n")
    doc = coord(repo, "verify").doc
    assert doc["culprit"] == "T1" and doc["bisect"]["alone"] is True
    assert coord(repo, "verify", "--no-bisect").doc.get("culprit", "absent") == "absent"
    log2 = tmp_path / "runs2.log"
    repo2, _ = batch(make_repo, coord, worker, log2, ["one\n", "two\n"], extra="bisect = true\n")
    doc2 = ok(coord(repo2, "verify"))
    assert "culprit" not in doc2 and lines_of(log2) == 1


def test_a_failure_after_the_last_task_commit_has_no_culprit(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    files = {"f1.txt": "fine\n", "f2.txt": "fine\n"}
    repo = generated_project(make_repo, toml(verify=[suite(log)]), files)
    accept_task(coord, worker, repo, "T1", "f1.txt", "one\n")
    accept_task(coord, worker, repo, "T2", "f2.txt", "two\n")
    (repo / "f3.txt").write_text("bad\n")
    git(repo, "add", "f3.txt")
    git(repo, "commit", "-qm", "a commit that is no task's")
    ok(coord(repo, "freeze"))
    doc = coord(repo, "verify", "--bisect").doc
    assert doc["culprit"] is None
    assert "after the last one" in doc["bisect"]["note"]


def test_bisect_needs_a_freeze(make_repo: MakeRepo, coord: Cli) -> None:
    repo = make_repo({"coord.toml": toml(verify=["true"])})
    assert coord(repo, "verify", "--bisect").code == 3
    assert coord(repo, "verify", "--dry", "--bisect").code == 2


def test_bisect_runs_only_the_failing_commands(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                               tmp_path: Path) -> None:
    log, passing = tmp_path / "runs.log", tmp_path / "passing.log"
    files = {f"f{i}.txt": "fine\n" for i in range(1, 5)}
    repo = generated_project(make_repo, toml(verify=[f"echo run >> {passing}", suite(log)]),
                             files)
    for i, text in enumerate(["one\n", "two\n", "bad\n", "four\n"], 1):
        accept_task(coord, worker, repo, f"T{i}", f"f{i}.txt", text)
    ok(coord(repo, "freeze"))
    doc = coord(repo, "verify", "--bisect").doc
    assert doc["culprit"] == "T3"
    assert lines_of(passing) == 1  # verify's own run only
    assert {p["command"] for p in doc["bisect"]["ran"]} == {suite(log)}
    assert lines_of(log) - 1 == len(doc["bisect"]["ran"]) <= 3
