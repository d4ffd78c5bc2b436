"""Protection and recovery: no worker can destroy or sweep up another's uncommitted work.

Every test stands on a real shared tree with three tasks: t1 (f.txt:1-10) and t2 (g.txt and
new/**) have edited and reported; t3 (f.txt:11-20) is in progress with no edit yet. A
"worker" runs plain git in a subprocess without HUNKWISE_COORDINATOR; the coordinator's own
commands run through the `coord` CLI. The tree is built once (CLI calls cost ~0.5 s each)
and copied for every test. The guard's parsing is checked in-process and then once more,
every case at once, through `coord guard` as Claude Code runs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testing.cli import Cli, ok, run_cli
from testing.repo import git, git_bytes, numbered, set_line, write

REPORTED_PATHS = ("f.txt", "g.txt", "new/n.txt")
STASH_GONE = "refs/stash"


# ---- helpers ----------------------------------------------------------------------------

def _env(coordinator: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HUNKWISE_COORDINATOR"}
    env["GIT_EDITOR"] = "true"  # `commit --amend` and `rebase -i` never wait for a person
    if coordinator:
        env["HUNKWISE_COORDINATOR"] = "1"
    return env


def wgit(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as a worker runs it: a plain subprocess, not marked as the coordinator."""
    return subprocess.run(["git", *args], check=False, cwd=repo, env=_env(False),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)


def cgit(repo: Path, *args: str) -> str:
    """git marked as the coordinator (HUNKWISE_COORDINATOR=1): the hooks let it through."""
    p = subprocess.run(["git", *args], check=False, cwd=repo, env=_env(True), capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"git {' '.join(args)}: {p.stderr}"
    return p.stdout


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def has_ref(repo: Path, ref: str) -> bool:
    return git(repo, "rev-parse", "-q", "--verify", ref, check=False).strip() != ""


def branches(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split())


def snapshot_refs(repo: Path) -> dict[str, tuple[str, str]]:
    """{refname: (object type, object id)} under refs/hunkwise/."""
    out = git(repo, "for-each-ref", "--format=%(refname) %(objecttype) %(objectname)",
              "refs/hunkwise/")
    return {ref: (kind, oid) for ref, kind, oid in (line.split() for line in out.splitlines())}


def contents(repo: Path, paths: tuple[str, ...] = REPORTED_PATHS) -> dict[str, bytes | None]:
    return {p: (repo / p).read_bytes() if (repo / p).exists() else None for p in paths}


def porcelain(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "--untracked-files=all")


def report_of(repo: Path, task_id: str) -> dict[str, Any]:
    """The newest report the inbox received for the task (SPEC: coord/inbox in the common dir)."""
    docs = []
    for sub in ("new", "cur"):
        d = repo / ".git" / "coord" / "inbox" / sub
        for p in d.iterdir() if d.is_dir() else ():
            doc = json.loads(p.read_bytes())
            if doc["task_id"] == task_id:
                docs.append(doc)
    assert docs, f"no report for {task_id}"
    return max(docs, key=lambda d: d["revision"])


def _ctx(repo: Path) -> Any:
    from hunkwise.shared.state.context import open_repo

    return open_repo(str(repo))


def lost(repo: Path) -> list[dict[str, Any]]:
    """`coord status`'s "lost", computed in-process (the CLI is driven in its own tests)."""
    from hunkwise.coordinator import tasks

    found: list[dict[str, Any]] = tasks.status(_ctx(repo))["lost"]
    return found


def restore(repo: Path, task_id: str) -> dict[str, Any]:
    from hunkwise.coordinator import restore as recover

    return recover.restore(_ctx(repo), task_id)


# ---- the shared tree --------------------------------------------------------------------

@dataclass
class Shared:
    repo: Path
    reported: dict[str, bytes | None]  # the reported files' bytes at report time
    status: str  # `git status --porcelain` right after the reports


_TEMPLATES: dict[str, Shared] = {}


def _cli(tool: str, repo: Path, *args: str) -> Any:
    return ok(run_cli(tool, repo, *args))


def _build_plain(root: Path) -> Shared:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Test Author")
    git(repo, "config", "user.email", "author@example.com")
    write(repo, "f.txt", numbered(20))
    write(repo, "g.txt", numbered(5, "g"))
    write(repo, "h.txt", "h\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    for tid, grants in (("t1", ["f.txt:1-10"]), ("t2", ["g.txt", "new/**"]),
                        ("t3", ["f.txt:11-20"])):
        args = ["assign", tid, "--title", f"title of {tid}", "--expect", f"{tid} works"]
        for g in grants:
            args += ["--write", g]
        _cli("coord", repo, *args)
        _cli("worker", repo, "start", tid)
    set_line(repo, "f.txt", 3, "line three, by t1")
    set_line(repo, "g.txt", 2, "g two, by t2")
    write(repo, "new/n.txt", "a new file of t2\n")
    _cli("worker", repo, "done", "t1")
    _cli("worker", repo, "done", "t2")
    return Shared(repo, contents(repo), porcelain(repo))


def _build_hooked(root: Path, plain: Shared) -> Shared:
    repo = root / "repo"
    shutil.copytree(plain.repo, repo, symlinks=True)
    _cli("coord", repo, "install-hooks")
    # A second commit, so that HEAD~1 is another commit; the hooks let it through only
    # because it is marked as the coordinator's.
    write(repo, "h.txt", "h, second version\n")
    refused = wgit(repo, "commit", "-q", "-m", "second", "--", "h.txt")
    assert refused.returncode != 0, "a worker's commit went through the pre-commit hook"
    cgit(repo, "commit", "-q", "-m", "second", "--", "h.txt")
    return Shared(repo, contents(repo), porcelain(repo))


def _copy(kind: str, tmp_path: Path, factory: pytest.TempPathFactory) -> Shared:
    if "plain" not in _TEMPLATES:
        _TEMPLATES["plain"] = _build_plain(factory.mktemp("template-plain"))
    if kind == "hooked" and "hooked" not in _TEMPLATES:
        _TEMPLATES["hooked"] = _build_hooked(factory.mktemp("template-hooked"), _TEMPLATES["plain"])
    tpl = _TEMPLATES[kind]
    repo = tmp_path / "shared"
    shutil.copytree(tpl.repo, repo, symlinks=True)
    return Shared(repo, dict(tpl.reported), tpl.status)


@pytest.fixture
def plain(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Shared:
    """Two reported tasks and one in progress; no hooks; HEAD is the only commit."""
    return _copy("plain", tmp_path, tmp_path_factory)


@pytest.fixture
def hooked(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Shared:
    """The same tree after `coord install-hooks` and a second (coordinator) commit of h.txt."""
    return _copy("hooked", tmp_path, tmp_path_factory)


def test_the_shared_tree_is_what_the_tests_assume(hooked: Shared) -> None:
    assert hooked.status == " M f.txt\n M g.txt\n?? new/n.txt\n"
    assert hooked.reported["f.txt"] == numbered(20).replace(
        "line 3\n", "line three, by t1\n").encode()
    assert git(hooked.repo, "log", "--format=%s").split("\n")[:2] == ["second", "init"]
    assert lost(hooked.repo) == []


# ---- whole-tree commands that git runs a hook for: refused --------------------------------

def _side_branch(repo: Path) -> None:
    """A branch `side` that diverged from main at HEAD~1 (made by the coordinator)."""
    tree = git(repo, "rev-parse", "HEAD~1^{tree}").strip()
    side = cgit(repo, "commit-tree", tree, "-p", "HEAD~1", "-m", "side").strip()
    cgit(repo, "update-ref", "refs/heads/side", side)


def _upstream(repo: Path) -> None:
    """An upstream clone with one more commit; main tracks it, so `git pull` would fast-forward."""
    up = repo.parent / "upstream"
    git(repo.parent, "clone", "-q", str(repo), str(up))
    write(up, "up.txt", "from upstream\n")
    git(up, "add", "up.txt")
    git(up, "commit", "-q", "-m", "upstream work")
    for key, value in (("remote.origin.url", str(up)),
                       ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
                       ("branch.main.remote", "origin"), ("branch.main.merge", "refs/heads/main"),
                       ("pull.rebase", "false")):
        git(repo, "config", key, value)


REFUSED = [
    # (git arguments, set-up, refused by our hook rather than by git itself)
    pytest.param(("stash",), None, True, id="stash"),
    pytest.param(("stash", "-u"), None, True, id="stash-u"),
    pytest.param(("stash", "push", "-m", "x"), None, True, id="stash-push-m"),
    pytest.param(("commit", "-am", "x"), None, True, id="commit-am"),
    pytest.param(("commit", "--no-verify", "-am", "x"), None, True, id="commit-no-verify-am"),
    pytest.param(("commit", "--amend"), None, True, id="commit-amend"),
    pytest.param(("commit", "--amend", "--no-verify", "-m", "y"), None, True,
                 id="commit-amend-no-verify"),
    pytest.param(("checkout", "-b", "other"), None, True, id="checkout-b"),
    pytest.param(("switch", "-c", "other"), None, True, id="switch-c"),
    pytest.param(("rebase", "side"), _side_branch, False, id="rebase"),
    pytest.param(("pull",), _upstream, True, id="pull"),
    pytest.param(("branch", "-f", "main", "HEAD~1"), None, False, id="branch-f-main"),
    pytest.param(("branch", "-f", "side", "HEAD"), _side_branch, True, id="branch-f-side"),
    pytest.param(("update-ref", "refs/heads/main", "HEAD~1"), None, True, id="update-ref-main"),
]


@pytest.mark.parametrize("args,setup,by_hook", REFUSED)
def test_whole_tree_command_by_a_worker_is_refused_and_moves_nothing(
        hooked: Shared, args: tuple[str, ...], setup: Callable[[Path], None] | None,
        by_hook: bool) -> None:
    repo = hooked.repo
    if setup:
        setup(repo)
    before_head, before_branches = head(repo), {b: git(repo, "rev-parse", b).strip()
                                                for b in branches(repo)}
    p = wgit(repo, *args)
    assert p.returncode != 0, f"git {' '.join(args)} went through: {p.stdout}{p.stderr}"
    if by_hook:
        assert "hunkwise" in p.stderr, p.stderr
    assert head(repo) == before_head
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert {b: git(repo, "rev-parse", b).strip() for b in branches(repo)} == before_branches
    assert not has_ref(repo, STASH_GONE)
    assert contents(repo) == hooked.reported  # every worker's uncommitted edit is still there
    assert lost(repo) == []


# Git rewrites the tree and index before it asks reference-transaction about the ref move
# (reset --hard <other>, rebase --autostash, pull): the hook refuses the move, but too late
# for the files. Those are recovered with coord restore, as here; only the agent guard can
# stop such commands before they run.
def test_after_a_refused_reset_to_another_commit_restore_recovers_the_work(hooked: Shared) -> None:
    repo = hooked.repo
    p = wgit(repo, "reset", "--hard", "HEAD~1")
    assert p.returncode != 0
    assert git(repo, "log", "-1", "--format=%s").strip() == "second"
    gone = {d["task"]: d["paths"] for d in lost(repo)}
    assert gone.get("t1") == ["f.txt"] and gone.get("t2") == ["g.txt"]
    restore(repo, "t1")
    restore(repo, "t2")
    assert contents(repo) == hooked.reported
    assert lost(repo) == []


# Switching to an existing branch is a symbolic-ref update of HEAD, which git 2.39 does
# not pass to reference-transaction: only the agent guard refuses it (tested below).


def test_coordinator_marked_git_commit_goes_through(hooked: Shared) -> None:
    repo = hooked.repo
    before = head(repo)
    write(repo, "h.txt", "h, third version\n")
    assert wgit(repo, "commit", "-q", "-m", "third", "--", "h.txt").returncode != 0
    assert head(repo) == before
    cgit(repo, "commit", "-q", "-m", "third", "--", "h.txt")
    assert git(repo, "rev-parse", "HEAD~1").strip() == before
    assert contents(repo) == hooked.reported


# ---- whole-tree commands that no hook sees: lost, then restored ----------------------------

DESTROYERS: list[tuple[str, tuple[str, ...], dict[str, list[str]]]] = [
    ("checkout-path", ("checkout", "--", "f.txt"), {"t1": ["f.txt"]}),
    ("restore-path", ("restore", "f.txt"), {"t1": ["f.txt"]}),
    ("reset-hard-HEAD~0", ("reset", "--hard", "HEAD~0"), {"t1": ["f.txt"], "t2": ["g.txt"]}),
    ("reset-hard", ("reset", "--hard"), {"t1": ["f.txt"], "t2": ["g.txt"]}),
    ("clean-fd", ("clean", "-fd"), {"t2": ["new/n.txt"]}),
]


@pytest.mark.parametrize("args,gone", [d[1:] for d in DESTROYERS], ids=[d[0] for d in DESTROYERS])
def test_destroyed_work_is_reported_lost_and_restored_byte_for_byte(
        hooked: Shared, args: tuple[str, ...], gone: dict[str, list[str]]) -> None:
    repo = hooked.repo
    before_head = head(repo)
    wgit(repo, *args)  # exit code irrelevant: reset --hard HEAD~0 rewrites the tree, then fails
    assert head(repo) == before_head
    assert contents(repo) != hooked.reported, "the command destroyed nothing: test is moot"
    assert {d["task"]: d["paths"] for d in lost(repo)} == gone
    for tid, paths in gone.items():
        assert restore(repo, tid)["restored"] == paths
    assert contents(repo) == hooked.reported
    assert porcelain(repo) == hooked.status
    assert lost(repo) == []


def test_status_names_lost_work_and_restore_touches_nothing_else(hooked: Shared,
                                                                 coord: Cli) -> None:
    repo = hooked.repo
    assert wgit(repo, "checkout", "--", "f.txt").returncode == 0
    st = ok(coord(repo, "status"))
    assert st["lost"] == [{"task": "t1", "paths": ["f.txt"]}]
    human = coord(repo, "status", json_out=False)
    assert human.code == 0 and "t1" in human.stdout and "f.txt" in human.stdout
    # Meanwhile t3 edits its own lines of the same file, and g.txt changes again.
    set_line(repo, "f.txt", 15, "line fifteen, by t3 after the accident")
    set_line(repo, "g.txt", 4, "g four, edited after the report")
    g_now = (repo / "g.txt").read_bytes()
    doc = ok(coord(repo, "restore", "t1"))
    assert doc["task"] == "t1" and doc["restored"] == ["f.txt"]
    want = hooked.reported["f.txt"]
    assert want is not None
    assert (repo / "f.txt").read_bytes() == want.replace(
        b"line 15\n", b"line fifteen, by t3 after the accident\n")
    assert (repo / "g.txt").read_bytes() == g_now
    assert (repo / "new/n.txt").read_bytes() == hooked.reported["new/n.txt"]
    assert lost(repo) == []
    assert restore(repo, "t1")["restored"] == []  # nothing missing: nothing written
    assert (repo / "f.txt").read_bytes() == want.replace(
        b"line 15\n", b"line fifteen, by t3 after the accident\n")


def test_restore_refuses_where_someone_changed_the_same_lines(hooked: Shared, coord: Cli) -> None:
    repo = hooked.repo
    assert wgit(repo, "checkout", "--", "f.txt").returncode == 0
    set_line(repo, "f.txt", 3, "line 3, rewritten by someone else")
    before = contents(repo)
    r = coord(repo, "restore", "t1")
    assert r.code == 3, r.stdout + r.stderr
    msg = r.doc["error"]["message"]
    assert r.doc["error"]["code"] == 3
    assert "f.txt" in msg and re.search(r"\blines? 3\b", msg), msg
    assert contents(repo) == before
    human = coord(repo, "restore", "t1", json_out=False)
    assert human.code == 3 and "f.txt" in human.stderr and human.stdout == ""


def test_restore_refuses_a_new_file_someone_else_recreated_and_restores_nothing(
        hooked: Shared) -> None:
    from hunkwise.shared.errors import StateRefused

    repo = hooked.repo
    wgit(repo, "reset", "--hard")
    assert wgit(repo, "clean", "-fd").returncode == 0
    assert {d["task"]: d["paths"] for d in lost(repo)} == {"t1": ["f.txt"],
                                                           "t2": ["g.txt", "new/n.txt"]}
    write(repo, "new/n.txt", "someone else's file\n")
    before = contents(repo)
    with pytest.raises(StateRefused, match=r"new/n\.txt") as e:
        restore(repo, "t2")
    assert e.value.exit_code == 3
    assert contents(repo) == before  # g.txt, which nobody touched, is not half-restored either


# ---- snapshots --------------------------------------------------------------------------

def test_each_report_keeps_its_snapshot_tree_under_refs_hunkwise(plain: Shared) -> None:
    repo = plain.repo
    refs = snapshot_refs(repo)
    # Each report's snapshot, and the tree of the base and the task's changes alone.
    assert set(refs) == {f"refs/hunkwise/snapshots/{tid}/r1{tail}" for tid in ("t1", "t2")
                         for tail in ("", "-own")}
    state = json.loads((repo / ".git" / "coord" / "state.json").read_bytes())
    for tid in ("t1", "t2"):
        kind, oid = refs[f"refs/hunkwise/snapshots/{tid}/r1"]
        assert kind == "tree"
        assert oid == report_of(repo, tid)["snapshot"]
        assert refs[f"refs/hunkwise/snapshots/{tid}/r1-own"] == ("tree",
                                                                 state["tasks"][tid]["saved"]["own"])
    snap = refs["refs/hunkwise/snapshots/t2/r1"][1]
    for path in REPORTED_PATHS:
        assert git_bytes(repo, "cat-file", "blob", f"{snap}:{path}") == plain.reported[path]


def test_worker_done_with_hooks_installed_still_keeps_a_snapshot(hooked: Shared,
                                                                 worker: Cli) -> None:
    repo = hooked.repo
    set_line(repo, "f.txt", 15, "line fifteen, by t3")
    doc = ok(worker(repo, "done", "t3"))
    assert doc["task"]["state"] == "reported"
    kind, oid = snapshot_refs(repo)["refs/hunkwise/snapshots/t3/r1"]
    assert kind == "tree" and oid == report_of(repo, "t3")["snapshot"]


def test_snapshot_survives_gc_and_restores_after_a_hard_reset(plain: Shared) -> None:
    repo = plain.repo
    snap = report_of(repo, "t2")["snapshot"]
    wgit(repo, "reset", "--hard")
    assert wgit(repo, "clean", "-fd").returncode == 0
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    assert git(repo, "cat-file", "-t", snap).strip() == "tree"
    assert git_bytes(repo, "cat-file", "blob", f"{snap}:new/n.txt") == plain.reported["new/n.txt"]
    restore(repo, "t1")
    restore(repo, "t2")
    assert contents(repo) == plain.reported
    assert porcelain(repo) == plain.status


def test_git_gc_still_works_with_hooks_installed(hooked: Shared) -> None:
    p = wgit(hooked.repo, "gc", "-q", "--prune=now")
    assert p.returncode == 0, p.stderr


# ---- the coordinator's own commits ------------------------------------------------------

def test_coordinator_accepts_and_reverts_with_hooks_installed(hooked: Shared, coord: Cli) -> None:
    repo = hooked.repo
    before = head(repo)
    doc = ok(coord(repo, "accept", "t1"))
    assert doc["commit"] == head(repo) != before
    assert git(repo, "rev-parse", "HEAD~1").strip() == before
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git_bytes(repo, "show", "HEAD:f.txt") == hooked.reported["f.txt"]
    assert git_bytes(repo, "show", "HEAD:g.txt") == numbered(5, "g").encode()
    assert "Coord-Task: t1" in git(repo, "log", "-1", "--format=%B")
    assert contents(repo) == hooked.reported  # the tree is untouched, t2's edits among it
    # t1's snapshot refs are pruned once it is committed; t2's stay.
    assert set(snapshot_refs(repo)) == {"refs/hunkwise/snapshots/t2/r1",
                                        "refs/hunkwise/snapshots/t2/r1-own"}
    assert not has_ref(repo, STASH_GONE)

    accepted = head(repo)
    rev = ok(coord(repo, "revert", "t1"))
    assert rev["commit"] == head(repo) and rev["reverts"] == accepted
    assert git(repo, "rev-parse", "HEAD~1").strip() == accepted
    assert git_bytes(repo, "show", "HEAD:f.txt") == numbered(20).encode()
    assert (repo / "g.txt").read_bytes() == hooked.reported["g.txt"]
    assert (repo / "new/n.txt").read_bytes() == hooked.reported["new/n.txt"]


# ---- installing, chaining and removing the git hooks ----------------------------------

def _hook(path: Path, body: str) -> bytes:
    data = body.encode()
    path.write_bytes(data)
    path.chmod(0o755)
    return data


def test_existing_hooks_are_chained_kept_running_and_restored(plain: Shared, coord: Cli,
                                                              tmp_path: Path) -> None:
    repo = plain.repo
    hooks = repo / ".git" / "hooks"
    pre_log, tx_log = tmp_path / "pre-commit.log", tmp_path / "reference-transaction.log"
    pre = _hook(hooks / "pre-commit", f'#!/bin/sh\necho "pre-commit ran" >> "{pre_log}"\n')
    tx = _hook(hooks / "reference-transaction",
               f'#!/bin/sh\nwhile read -r old new ref; do echo "$1 $ref" >> "{tx_log}"; done\n')

    doc = ok(coord(repo, "install-hooks"))
    assert sorted(doc["chained"]) == ["pre-commit", "reference-transaction"]
    assert (hooks / "pre-commit.hunkwise-chained").read_bytes() == pre
    assert (hooks / "reference-transaction.hunkwise-chained").read_bytes() == tx
    ours = {n: (hooks / n).read_bytes() for n in ("pre-commit", "reference-transaction")}
    assert ours["pre-commit"] != pre and ours["reference-transaction"] != tx
    for n in ours:
        assert os.access(hooks / n, os.X_OK)

    # Installing twice changes nothing: ours is never chained to itself.
    again = ok(coord(repo, "install-hooks"))
    assert again["chained"] == []
    assert {n: (hooks / n).read_bytes() for n in ours} == ours
    assert (hooks / "pre-commit.hunkwise-chained").read_bytes() == pre
    assert (hooks / "reference-transaction.hunkwise-chained").read_bytes() == tx

    # A worker's stash is still refused, and the chained hook never saw it go through.
    assert wgit(repo, "stash").returncode != 0
    assert contents(repo) == plain.reported

    # The coordinator's accept moves HEAD with update-ref: the chained hook runs.
    tx_log.unlink(missing_ok=True)
    ok(coord(repo, "accept", "t1"))
    logged = tx_log.read_text().splitlines()
    assert "prepared refs/heads/main" in logged and "committed refs/heads/main" in logged

    # The user's pre-commit ran once, on the accepted commit (in a scratch checkout).
    assert pre_log.read_text() == "pre-commit ran\n"
    # pre-commit: the chained hook runs for the coordinator, not for a worker.
    env = _env(True)
    run_hook = [str(hooks / "pre-commit")]
    assert subprocess.run(run_hook, check=False, cwd=repo, env=env).returncode == 0
    assert pre_log.read_text() == "pre-commit ran\n" * 2
    assert subprocess.run(run_hook, check=False, cwd=repo, env=_env(False),
                          capture_output=True).returncode != 0
    assert pre_log.read_text() == "pre-commit ran\n" * 2
    cgit(repo, "commit", "-q", "--allow-empty", "-m", "coordinator's own commit")
    assert pre_log.read_text() == "pre-commit ran\n" * 3

    out = ok(coord(repo, "uninstall-hooks"))
    assert sorted(out["restored"]) == ["pre-commit", "reference-transaction"]
    assert (hooks / "pre-commit").read_bytes() == pre
    assert (hooks / "reference-transaction").read_bytes() == tx
    assert os.access(hooks / "pre-commit", os.X_OK)
    assert os.access(hooks / "reference-transaction", os.X_OK)
    assert not list(hooks.glob("*.hunkwise-chained"))
    # Back to plain git: a worker's commit is no longer refused by hunkwise.
    p = wgit(repo, "commit", "-q", "--allow-empty", "-m", "x")
    assert p.returncode == 0 and "hunkwise" not in p.stderr


@pytest.mark.parametrize("agent_id", ["0199a1b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b",
                                      " 0199a1b2-3c4d-7e8f-9a0b-padded ", "thread:7/a b"])
def test_a_worker_shell_is_known_to_the_hooks_by_its_agent_session(plain: Shared, coord: Cli,
                                                                   agent_id: str) -> None:
    """A shell whose agent session variable `worker start` mapped to a worker is a
    worker's, whatever marks it sets: its commit and its branch move are refused even
    with HUNKWISE_COORDINATOR=1. The id is looked up as it was recorded: surrounding
    blanks dropped, an id that is no plain name under its digest."""
    repo = plain.repo
    ok(coord(repo, "install-hooks"))
    ok(coord(repo, "assign", "t9", "--title", "t9", "--expect", "e", "--write", "n9.txt"))
    ok(run_cli("worker", repo, "start", "t9", env={"CLAUDE_CODE_SESSION_ID": agent_id}))
    env = {**_env(True), "CLAUDE_CODE_SESSION_ID": agent_id}
    before = head(repo)
    ahead = git(repo, "commit-tree", f"{before}^{{tree}}", "-p", before, "-m", "x").strip()
    for args in (["commit", "-q", "--allow-empty", "-m", "x"], ["branch", "-f", "main2"],
                 ["update-ref", "refs/heads/main", ahead]):
        p = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
        assert p.returncode != 0 and "hunkwise:" in p.stderr, (args, p.stderr)
    assert head(repo) == before
    # The coordinator's own shell, another session: its moves pass.
    other = {**_env(True), "CLAUDE_CODE_SESSION_ID": "0199a1b2-coordinator"}
    assert subprocess.run(["git", "branch", "-f", "main2"], cwd=repo, env=other,
                          capture_output=True).returncode == 0


def test_the_hooks_start_no_process_but_git(plain: Shared, coord: Cli, tmp_path: Path) -> None:
    """The hooks run at every ref update and commit in the shared tree, the coordinator's
    own included (an accept's HEAD move runs the reference-transaction hook twice): they
    find their folder with the shell's own means and hand their input on as it comes.
    With nothing on PATH but git, the coordinator's moves pass in silence and the chained
    hook gets its input line for line; a worker's move of HEAD is still refused."""
    repo = plain.repo
    hooks = repo / ".git" / "hooks"
    seen = tmp_path / "chained.log"
    _hook(hooks / "reference-transaction",
          f'#!/bin/sh\nwhile read -r old new ref; do echo "$1 $old $new $ref" >> "{seen}"; done\n')
    ok(coord(repo, "install-hooks"))
    only_git = tmp_path / "bin"
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git") or "git")
    lines = f"{'0' * 40} {'1' * 40} refs/heads/main\n{'2' * 40} {'3' * 40} refs/heads/other\n"

    def run(phase: str, coordinator: bool) -> subprocess.CompletedProcess[str]:
        env = {**_env(coordinator), "PATH": str(only_git)} if coordinator else _env(False)
        return subprocess.run(["/bin/sh", str(hooks / "reference-transaction"), phase],
                              cwd=repo, env=env, input=lines, capture_output=True, text=True)

    for phase in ("prepared", "committed", "aborted"):
        done = run(phase, coordinator=True)
        assert (done.returncode, done.stderr) == (0, ""), (phase, done.stderr)
    assert seen.read_text().splitlines() == [
        f"{phase} {line}" for phase in ("prepared", "committed", "aborted")
        for line in lines.splitlines()]
    refused = run("prepared", coordinator=False)
    assert refused.returncode == 1 and "refusing to move refs/heads/main" in refused.stderr
    pre = subprocess.run(["/bin/sh", str(hooks / "pre-commit")], cwd=repo, capture_output=True,
                         text=True, env={**_env(True), "PATH": str(only_git)})
    assert (pre.returncode, pre.stderr) == (0, "")


def test_a_failing_chained_hook_still_fails_the_coordinator_s_commit(plain: Shared,
                                                                     coord: Cli) -> None:
    repo = plain.repo
    hooks = repo / ".git" / "hooks"
    _hook(hooks / "pre-commit", "#!/bin/sh\necho 'lint failed' >&2\nexit 1\n")
    ok(coord(repo, "install-hooks"))
    before = head(repo)
    p = subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "x"], check=False, cwd=repo,
                       env=_env(True), capture_output=True, text=True)
    assert p.returncode != 0 and "lint failed" in p.stderr
    assert head(repo) == before


def test_install_twice_then_uninstall_leaves_no_hook(plain: Shared, coord: Cli) -> None:
    repo = plain.repo
    hooks = repo / ".git" / "hooks"
    samples = sorted(p.name for p in hooks.iterdir())
    first = ok(coord(repo, "install-hooks"))
    assert first["chained"] == [] and len(first["hooks"]) == 2
    body = (hooks / "pre-commit").read_bytes()
    ok(coord(repo, "install-hooks"))
    assert (hooks / "pre-commit").read_bytes() == body
    assert not list(hooks.glob("*.hunkwise-chained"))
    assert wgit(repo, "stash").returncode != 0
    out = ok(coord(repo, "uninstall-hooks"))
    assert len(out["removed"]) == 2 and out["restored"] == []
    assert sorted(p.name for p in hooks.iterdir()) == samples
    assert wgit(repo, "branch", "other").returncode == 0


# ---- the Claude Code hook in .claude/settings.local.json -------------------------------

def _pre_tool_use(command: str, tool: str = "Bash") -> str:
    """The JSON Claude Code writes on a PreToolUse hook's stdin."""
    tool_input: dict[str, Any] = ({"command": command, "description": "run it"} if tool == "Bash"
                                  else {"file_path": "f.txt", "old_string": "a", "new_string": "b"})
    return json.dumps({"session_id": "abc", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                       "hook_event_name": "PreToolUse", "tool_name": tool,
                       "tool_input": tool_input})


def _settings(repo: Path) -> Path:
    return repo / ".claude" / "settings.local.json"


def _ours(entries: list[Any]) -> list[dict[str, Any]]:
    return [e for e in entries if "Bash" in str(e.get("matcher")).split("|") and any(
        "hunkwise.coordinator.hook" in str(h.get("command", "")) for h in e.get("hooks", []))]


def test_agent_claude_writes_a_working_pretooluse_hook_git_does_not_see(plain: Shared,
                                                                       coord: Cli) -> None:
    repo = plain.repo
    doc = ok(coord(repo, "install-hooks", "--agent", "claude"))
    path = _settings(repo)
    assert doc["agent"] == str(path)
    data = json.loads(path.read_text())
    pre = data["hooks"]["PreToolUse"]
    assert len(pre) == 1 and _ours(pre) == pre
    hook = pre[0]["hooks"][0]
    assert hook["type"] == "command"
    # Claude Code runs the command through a shell in the project, the tool call on stdin.
    blocked = subprocess.run(hook["command"], check=False, shell=True, cwd=repo,
                             capture_output=True, text=True, input=_pre_tool_use("git stash"))
    assert blocked.returncode == 2 and "git stash" in blocked.stderr
    allowed = subprocess.run(hook["command"], check=False, shell=True, cwd=repo,
                             capture_output=True, text=True, input=_pre_tool_use("git status"))
    assert (allowed.returncode, allowed.stdout, allowed.stderr) == (0, "", "")
    # A local settings file: not a change in the shared tree.
    assert porcelain(repo) == plain.status
    assert ".claude" not in json.dumps(ok(coord(repo, "status"))["unowned"])


def test_agent_claude_merges_into_existing_settings_idempotently(plain: Shared, coord: Cli) -> None:
    repo = plain.repo
    existing: dict[str, Any] = {
        "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
        "env": {"FOO": "1"},
        "hooks": {
            "PreToolUse": [{"matcher": "Edit",
                            "hooks": [{"type": "command", "command": "echo edit"}]},
                           {"matcher": "Bash",
                            "hooks": [{"type": "command", "command": "my-own-bash-check"}]}],
            "PostToolUse": [{"matcher": "Bash",
                             "hooks": [{"type": "command", "command": "echo post"}]}],
        },
    }
    write(repo, ".claude/settings.local.json", json.dumps(existing))
    ok(coord(repo, "install-hooks", "--agent", "claude"))
    data = json.loads(_settings(repo).read_text())
    assert {k: v for k, v in data.items() if k != "hooks"} == {
        k: v for k, v in existing.items() if k != "hooks"}
    post = data["hooks"]["PostToolUse"]
    assert post[:1] == existing["hooks"]["PostToolUse"] and len(_ours(post)) == 1
    pre = data["hooks"]["PreToolUse"]
    assert pre[:2] == existing["hooks"]["PreToolUse"]
    assert len(_ours(pre)) == 1 and len(pre) == 3

    first = _settings(repo).read_bytes()
    ok(coord(repo, "install-hooks", "--agent", "claude"))
    assert _settings(repo).read_bytes() == first

    ok(coord(repo, "uninstall-hooks"))
    assert json.loads(_settings(repo).read_text()) == existing


MALFORMED = [
    pytest.param("{not json", id="not-json"),
    pytest.param("[1, 2]", id="not-an-object"),
    pytest.param('{"hooks": {"PreToolUse": {"matcher": "Bash"}}}', id="pretooluse-not-a-list"),
    pytest.param('{"hooks": []}', id="hooks-not-an-object"),
]


@pytest.mark.parametrize("text", MALFORMED)
def test_agent_claude_refuses_malformed_settings_and_leaves_them_alone(plain: Shared, coord: Cli,
                                                                      text: str) -> None:
    repo = plain.repo
    path = write(repo, ".claude/settings.local.json", text)
    r = coord(repo, "install-hooks", "--agent", "claude")
    assert r.code == 2, r.stdout + r.stderr
    msg = r.doc["error"]["message"]
    assert "settings.local.json" in msg and "internal error" not in msg, msg
    assert path.read_bytes() == text.encode()


def test_agent_claude_with_malformed_settings_changes_nothing(plain: Shared, coord: Cli) -> None:
    repo = plain.repo
    write(repo, ".claude/settings.local.json", "{not json")
    r = coord(repo, "install-hooks", "--agent", "claude")
    assert r.code == 2
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert wgit(repo, "branch", "other").returncode == 0
