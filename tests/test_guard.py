"""The agent guard (`coord guard`): an allow-list for workers' shell commands and file writes.

The command table is checked on the pure function, then through the hook's JSON as an
agent sends it, then a few cases through the `coord guard` executable. Writes are checked
against the grants of a real shared tree's state; the Codex install on a real repository.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hunkwise.coordinator.applypatch import PatchError
from hunkwise.coordinator.guard import Blocked, check_command, check_writes, guard, patch_paths
from hunkwise.shared.state.models import parse_grant

from testing.cli import Cli, ok
from testing.env import BIN
from testing.repo import git, numbered, write

WORKER_ENV: dict[str, str] = {}  # no COORD_SESSION, no HUNKWISE_COORDINATOR


def call(tool: str, tool_input: dict[str, Any], cwd: str = "/tmp") -> str:
    """The JSON an agent writes on a PreToolUse hook's stdin."""
    return json.dumps({"session_id": "abc", "transcript_path": "/tmp/t.jsonl", "cwd": cwd,
                       "hook_event_name": "PreToolUse", "tool_name": tool,
                       "tool_input": tool_input, "tool_use_id": "toolu_1"})


def bash(command: str) -> str:
    return call("Bash", {"command": command, "description": "run it"})


# ---- the command table --------------------------------------------------------------------
# (command line, a word the block message must name)

BLOCKED: list[tuple[str, str]] = [
    # the bypasses of issue 10
    ("git diff | git apply -R", "git apply -R"),
    ("git diff > p && git apply -R p", "git apply -R p"),
    ("git checkout-index -f -a", "git checkout-index"),
    ("git read-tree -u --reset HEAD", "git read-tree"),
    ("git reset --har", "git reset --har"),
    ("git -c alias.s=stash s", "alias.s=stash"),
    ("git -c core.hooksPath=/dev/null commit -am x", "core.hooksPath"),
    ("git -c Alias.st=stash st", "Alias.st"),
    ("git --config-env=alias.s=X s", "config-env"),
    ("xargs git add < files", "xargs"),
    ("cat files | xargs -n1 git add", "xargs"),
    # each wrapper
    ("timeout 5 git stash", "timeout"),
    ("nice -n 10 git checkout -- .", "nice"),
    ("env git stash", "env"),
    ("env FOO=1 git switch main", "env"),
    ("nohup git reset --hard &", "nohup"),
    ("stdbuf -oL git clean -fdx", "stdbuf"),
    ("time git stash", "git stash"),
    ("command git stash", "command"),
    ("exec git stash", "exec"),
    ("sudo git reset --hard", "sudo"),
    ("find . -name '*.py' -exec git checkout {} \\;", "find"),
    ("watch git stash", "watch"),
    ("eval 'git stash'", "eval"),
    ("eval \"git \"stash", "eval"),
    ("sh -c 'git stash'", "sh"),
    ("bash -c \"git reset --hard\"", "bash"),
    ("bash -lc 'cd sub && git stash'", "bash"),
    ("echo 'git stash' | sh", "sh"),
    ("bash <<EOF\ngit stash\nEOF", "bash"),
    ("python3 -c \"import os; os.system('git stash')\"", "python3"),
    ("echo $(git stash)", "git stash"),
    ("echo \"$(git checkout -- .)\"", "git checkout"),
    ("echo `git stash`", "git stash"),
    ("x=$(git reset --hard)", "git reset --hard"),
    ("cat <(git stash)", "git stash"),
    ("cat <<EOF\n$(git stash)\nEOF", "git stash"),
    ("$(echo git) stash", "which program"),
    ("$GIT stash", "which program"),
    ("/usr/bin/gi? stash", "which program"),
    ("{git,x} stash", "which program"),
    # write commands, with and without separators, subshells, spelling tricks
    ("git stash", "git stash"),
    ("git stash push -m x", "git stash"),
    ("git stash -u", "git stash"),
    ("git stash pop", "git stash"),
    ("cd sub && git reset --hard", "git reset --hard"),
    ("git -C . checkout -- .", "git checkout"),
    ("git checkout -b other", "git checkout"),
    ("git switch main", "git switch"),
    ("git restore f.txt", "git restore"),
    ("git restore --staged f.txt", "git restore"),
    ("git clean -fdx", "git clean"),
    ("git clean -fd -en", "git clean"),
    ("git clean -i", "git clean"),
    ("git add -A", "git add"),
    ("git add f.txt", "git add"),
    ("git commit -a -m x", "git commit"),
    ("git commit --amend --no-edit", "git commit"),
    ("git rm --cached f.txt", "git rm"),
    ("git mv a b", "git mv"),
    ("git rebase main", "git rebase"),
    ("git pull", "git pull"),
    ("git merge other", "git merge"),
    ("git cherry-pick abc", "git cherry-pick"),
    ("git revert HEAD", "git revert"),
    ("git am < mail", "git am"),
    ("git apply p.diff", "git apply"),
    ("git apply --stat --apply p.diff", "git apply"),
    ("git update-index --assume-unchanged f", "git update-index"),
    ("git update-ref HEAD HEAD~1", "git update-ref"),
    ("git branch -f main HEAD~1", "git branch"),
    ("git branch -D other", "git branch"),
    ("git branch newname", "git branch"),
    ("git tag v1", "git tag"),
    ("git tag -d v1", "git tag"),
    ("git worktree add ../x", "git worktree"),
    ("git config user.name X", "git config"),
    ("git config --unset user.name", "git config"),
    ("git config alias.s stash", "git config"),
    ("git diff --output=x.patch", "--output"),
    ("git diff --out=x.patch", "--out"),
    ("git log -p --outp=x", "--outp"),
    ("git diff --ext-diff", "--ext-diff"),
    ("git grep -O vim TODO", "-O"),
    ("git stash show --output=x", "git stash"),
    ("git fetch", "git fetch"),
    ("git push", "git push"),
    ("git gc --prune=now", "git gc"),
    ("git reflog expire --all", "git reflog"),
    ("git submodule update", "git submodule"),
    ("git-stash", "git-stash"),
    ("git status && git stash", "git stash"),
    ("git status\ngit stash", "git stash"),
    ("git status; git stash", "git stash"),
    ("git status || git stash", "git stash"),
    ("(cd sub && git stash)", "git stash"),
    ("{ git stash; }", "git stash"),
    ("if true; then git stash; fi", "git stash"),
    ("for f in a b; do git checkout -- a; done", "git checkout"),
    ("g\\it stash", "git stash"),
    ("'git' stash", "git stash"),
    ("\"g\"'it' stash", "git stash"),
    ("/usr/bin/git stash", "git stash"),
    ("git --no-pager -c core.pager=cat stash", "git stash"),
    ("GIT_DIR=/tmp/x git status", "GIT_DIR"),
    ("GIT_EXTERNAL_DIFF=rm git diff", "GIT_EXTERNAL_DIFF"),
    ("PAGER='sh -c x' git log", "PAGER"),
    ("git -c core.pager='rm -rf .' log", "core.pager"),
    ("git -c diff.external=x diff", "diff.external"),
    ("git add $f", "$f"),
    ("git $SUB", "$SUB"),
    ("git status 'unterminated", "cannot parse"),
    ("echo $(", "cannot parse"),
    ("cat <<", "cannot parse"),
]

ALLOWED = [
    "git status", "git status --porcelain=v2 -z", "git diff", "git diff --cached",
    "git diff HEAD~1 -- f.txt", "git diff --stat", "git diff --output-indicator-new=+",
    "git log -p", "git log --oneline -5 2>/dev/null | head -3", "git show HEAD:f.txt",
    "git blame -L 1,5 f.txt", "git grep -n TODO", "git ls-files -z", "git ls-tree HEAD",
    "git cat-file -p HEAD", "git rev-parse --show-toplevel", "git describe --tags",
    "git merge-base HEAD main", "git for-each-ref refs/heads", "git branch", "git branch -a",
    "git branch -av", "git branch --list 'feat*'", "git branch --show-current", "git tag",
    "git tag -l 'v*'", "git tag -n5", "git stash list", "git stash show -p",
    "git worktree list", "git worktree list --porcelain", "git config user.name",
    "git config --get user.email", "git config --list", "git config get user.name",
    "git config --show-origin --get-regexp alias", "git apply --check p.diff",
    "git apply --stat p.diff", "git apply --numstat -R p.diff", "git diff | git apply --check -R",
    "git clean -n", "git clean -nf", "git clean --dry-run -d", "git clean -fdn",
    "git -C sub status", "git --no-pager log", "git -c color.ui=always diff",
    "git -c core.pager=cat log", "GIT_PAGER=cat git log", "LC_ALL=C git status",
    "git reflog", "git remote -v", "git --version", "git", "git help stash",
    "git diff -- \"$file\"", "git log --format='%H %s'", "git status # and no stash",
    "ls; echo git stash", "echo 'git reset --hard'", "grep -r 'git stash' docs",
    "cat .gitignore", "command -v git", "which git", "pytest -q tests/test_guard.py",
    "python -m pytest -x", "make test", "sed -n 1,10p f.txt > /tmp/x", "echo $HOME",
    "for f in *.py; do wc -l \"$f\"; done", "export A=1", "cd sub && ls -la",
    "find . -name '*.py' -newer f.txt", "ls | xargs wc -l", "timeout 60 pytest -q",
    "git log | awk '{print $1}'", "echo hi | bash", "worker done t1 --summary 'x'",
    "coord status", "watch git status", "echo \"$(git status)\"",
    "cd \"$(git rev-parse --show-toplevel)\" && pytest -q",
]


def test_the_table_is_large_enough() -> None:
    assert len(BLOCKED) + len(ALLOWED) >= 60
    assert len(set(c for c, _ in BLOCKED)) == len(BLOCKED)
    assert len(set(ALLOWED)) == len(ALLOWED)


@pytest.mark.parametrize("command,names", BLOCKED, ids=[c for c, _ in BLOCKED])
def test_blocked_commands(command: str, names: str) -> None:
    found = check_command(command)
    assert found is not None, f"not blocked: {command!r}"
    message = found.message()
    assert names in message, message
    # the way out names a hunkwise command
    assert "worker done" in message
    assert any(w in found.instead for w in ("worker ", "coord ", "directly", "literally",
                                             "write")), found.instead


@pytest.mark.parametrize("command", ALLOWED)
def test_allowed_commands(command: str) -> None:
    found = check_command(command)
    assert found is None, f"{command!r}: {found and found.message()}"


@pytest.mark.parametrize("command,instead", [
    ("git stash", "coord restore"), ("git checkout -- f.txt", "coord restore"),
    ("git reset --hard", "coord restore"), ("git commit -am x", "worker done"),
    ("git add -A", "coord accept"), ("git rebase main", "worker blocked"),
    ("git fetch", "worker blocked"),
])
def test_the_message_names_the_hunkwise_command_to_use_instead(command: str,
                                                                instead: str) -> None:
    found = check_command(command)
    assert found is not None and instead in found.instead


# ---- the hook's JSON ----------------------------------------------------------------------

def test_guard_blocks_and_allows_through_the_hook_json() -> None:
    code, message = guard(bash("git reset --har"), WORKER_ENV)
    assert code == 2 and "git reset --har" in message
    assert guard(bash("git status"), WORKER_ENV) == (0, "")


@pytest.mark.parametrize("env", [{"HUNKWISE_COORDINATOR": "1"},
                                 {"COORD_SESSION": "sess-20260101-0000-coord@host"},
                                 {"COORD_SESSION": "sess-20260101-0000-coordinator.2@host"}])
def test_the_coordinators_session_is_not_restricted(env: dict[str, str]) -> None:
    assert guard(bash("git stash"), env) == (0, "")


def test_a_worker_session_is_restricted() -> None:
    env = {"COORD_SESSION": "sess-20260101-0000-backend@host", "HUNKWISE_COORDINATOR": "0"}
    assert guard(bash("git stash"), env)[0] == 2


@pytest.mark.parametrize("stdin", ["{not json", "", "[1, 2]", "null",
                                   json.dumps({"tool_name": "Bash"}),
                                   json.dumps({"tool_name": "Bash", "tool_input": "git status"}),
                                   json.dumps({"tool_name": "apply_patch", "tool_input": {}})],
                         ids=["not-json", "empty", "list", "null", "no-input",
                              "input-not-object", "patch-missing"])
def test_what_the_guard_cannot_read_is_blocked(stdin: str) -> None:
    code, message = guard(stdin, WORKER_ENV)
    assert code == 2 and "hunkwise guard" in message


@pytest.mark.parametrize("tool", ["Read", "Grep", "Glob", "WebFetch", "TodoWrite"])
def test_other_tools_pass(tool: str) -> None:
    assert guard(call(tool, {"file_path": "coord.toml", "command": "git stash"}),
                 WORKER_ENV) == (0, "")


def test_codex_shell_argv_is_judged_as_a_command_line() -> None:
    stdin = call("Bash", {"command": ["bash", "-lc", "git stash"]})
    assert guard(stdin, WORKER_ENV)[0] == 2
    stdin = call("Bash", {"command": ["git", "status"]})
    assert guard(stdin, WORKER_ENV) == (0, "")


def test_coord_guard_executable_exit_codes_and_streams(tmp_path: Path) -> None:
    """`coord guard` as an agent runs it: 2 and a reason on stderr, or 0 and silence."""
    cases = [(bash("git diff | git apply -R"), 2), (bash("timeout 5 git stash"), 2),
             (bash("git clean -nf"), 0), (bash("git stash list"), 0), ("{not json", 2)]
    procs = [subprocess.Popen([str(BIN / "coord"), "guard"], cwd=tmp_path, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in cases]
    for p, (stdin, code) in zip(procs, cases, strict=True):
        out, err = p.communicate(stdin, timeout=60)
        assert (p.returncode, out) == (code, ""), f"{stdin}: {p.returncode} {err}"
        assert (err == "") == (code == 0), err
        if code == 2:
            assert err.startswith("hunkwise")


# ---- writes against grants: the pure part -------------------------------------------------

G = parse_grant
HELD = [("t1", [G("src/api/**"), G("app.py:10-20")]), ("t2", [G("docs/*.md")])]


@pytest.mark.parametrize("path,allowed", [
    ("src/api/x.py", True), ("src/api/deep/y.py", True), ("app.py", True),
    ("docs/a.md", True), ("src/other.py", False), ("coord.toml", False),
    ("docs/sub/a.md", False), ("app.pyc", False), (".git/config", False),
    (".claude/settings.local.json", False),
])
def test_check_writes_against_glob_and_range_grants(path: str, allowed: bool) -> None:
    found = check_writes([path], HELD, "sess-x")
    assert (found is None) == allowed, found and found.message()
    if found is not None:
        assert "worker blocked" in found.instead
        assert "src/api/**" in found.why and "app.py:10-20" in found.why
        assert ("coord.toml holds" in found.why) == (path == "coord.toml")


def test_a_session_holding_no_task_may_not_write() -> None:
    found = check_writes(["a.py"], [], "sess-x")
    assert isinstance(found, Blocked) and "worker start" in found.instead


def test_patch_paths() -> None:
    patch = ("*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: new/b.py\n"
             "+hello\n*** Delete File: old.py\n*** Update File: c.py\n*** Move to: d/c.py\n"
             "@@\n-a\n+b\n*** End Patch\n")
    assert patch_paths(patch) == ["src/a.py", "new/b.py", "old.py", "c.py", "d/c.py"]
    with pytest.raises(PatchError):
        patch_paths("no patch here")


# ---- writes against grants: a real shared tree ---------------------------------------------

@pytest.fixture
def shared(make_repo: Callable[..., Path], coord: Cli, worker: Cli) -> tuple[Path, str]:
    """t1 holds src/** and f.txt:1-5, started by a session; t2 holds g.txt, not started."""
    repo = make_repo({"src/a.py": "a\n", "f.txt": numbered(10), "g.txt": "g\n",
                      "coord.toml": ""})
    ok(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "src/**",
             "--write", "f.txt:1-5"))
    ok(coord(repo, "assign", "t2", "--title", "t", "--expect", "e", "--write", "g.txt"))
    session = ok(worker(repo, "start", "t1", "--role", "backend"))["session"]
    return repo, session


def edit(tool: str, path: str, repo: Path) -> str:
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    return call(tool, {key: path, "old_string": "a", "new_string": "b", "content": "x"},
                cwd=str(repo))


@pytest.mark.parametrize("tool", ["Edit", "Write", "MultiEdit", "NotebookEdit"])
@pytest.mark.parametrize("path,allowed", [
    ("src/a.py", True), ("src/new/b.py", True), ("f.txt", True), ("g.txt", False),
    ("coord.toml", False), ("elsewhere.txt", False),
])
def test_edit_tools_inside_and_outside_grants(shared: tuple[Path, str], tool: str, path: str,
                                              allowed: bool) -> None:
    repo, session = shared
    for where in (path, str(repo / path)):  # relative to cwd, and absolute as Claude sends it
        code, message = guard(edit(tool, where, repo), {"COORD_SESSION": session})
        assert (code == 0) == allowed, message
        if not allowed:
            assert "worker blocked" in message and "src/**" in message and "t1" in message


def test_edits_without_a_session_or_outside_the_tree_are_not_judged(
        shared: tuple[Path, str], tmp_path: Path) -> None:
    repo, session = shared
    assert guard(edit("Write", "coord.toml", repo), {}) == (0, "")
    outside = tmp_path / "scratch.txt"
    assert guard(edit("Write", str(outside), repo), {"COORD_SESSION": session}) == (0, "")


def test_a_session_with_no_task_in_this_tree_is_blocked(shared: tuple[Path, str]) -> None:
    repo, _session = shared
    code, message = guard(edit("Edit", "src/a.py", repo),
                          {"COORD_SESSION": "sess-20260101-0000-other@host"})
    assert code == 2 and "worker start" in message


def test_the_coordinator_may_edit_coord_toml(shared: tuple[Path, str]) -> None:
    repo, _session = shared
    assert guard(edit("Edit", "coord.toml", repo), {"HUNKWISE_COORDINATOR": "1"}) == (0, "")


def test_apply_patch_inside_and_outside_grants(shared: tuple[Path, str]) -> None:
    repo, session = shared
    env = {"COORD_SESSION": session}
    inside = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-a\n+b\n*** End Patch\n"
    stdin = call("apply_patch", {"command": inside}, cwd=str(repo))
    assert guard(stdin, env) == (0, "")
    moved = ("*** Begin Patch\n*** Update File: src/a.py\n*** Move to: g.txt\n@@\n-a\n+b\n"
             "*** End Patch\n")
    code, message = guard(call("apply_patch", {"command": moved}, cwd=str(repo)), env)
    assert code == 2 and "g.txt" in message
    added = "*** Begin Patch\n*** Add File: coord.toml\n+x = 1\n*** End Patch\n"
    code, message = guard(call("apply_patch", {"command": added}, cwd=str(repo)), env)
    assert code == 2 and "coord.toml" in message
    # apply_patch typed into the shell is checked the same way
    heredoc = f"apply_patch <<'EOF'\n{added}EOF\n"
    assert guard(call("Bash", {"command": heredoc}, cwd=str(repo)), env)[0] == 2


# ---- install-hooks --agent codex ---------------------------------------------------------

def _guard_entries(path: Path) -> list[dict[str, Any]]:
    pre = json.loads(path.read_text())["hooks"]["PreToolUse"]
    return [e for e in pre if any("hunkwise.coordinator.hook" in str(h.get("command", ""))
                                  for h in e["hooks"])]


def test_install_codex_writes_hooks_json_and_skills_idempotently(
        make_repo: Callable[..., Path], coord: Cli) -> None:
    repo = make_repo({"a.txt": "a\n"})
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo stop"}]}]}}
    write(repo, ".codex/hooks.json", json.dumps(theirs, indent=2) + "\n")
    git(repo, "add", ".codex/hooks.json")
    git(repo, "commit", "-q", "-m", "codex settings")
    doc = ok(coord(repo, "install-hooks", "--agent", "codex"))
    hooks_json = repo / ".codex" / "hooks.json"
    assert doc["agents"]["codex"]["hook"] == str(hooks_json)
    ours = _guard_entries(hooks_json)
    assert len(ours) == 1 and ours[0]["matcher"] == "Bash|apply_patch"
    assert json.loads(hooks_json.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"] == \
        "echo stop"
    skill = repo / ".agents" / "skills" / "hunkwise-worker" / "SKILL.md"
    assert skill.read_text().startswith("---\nname: hunkwise-worker")
    assert (repo / ".agents" / "skills" / "hunkwise-coordinator" / "SKILL.md").is_file()
    assert not git(repo, "status", "--porcelain", "--untracked-files=all", "--", ".agents")

    # the installed command blocks as Codex runs it: through a shell, the call on stdin
    hook = ours[0]["hooks"][0]["command"]
    p = subprocess.run(hook, shell=True, cwd=repo, capture_output=True, text=True,
                       input=bash("git stash"), check=False)
    assert p.returncode == 2 and "git stash" in p.stderr

    first = hooks_json.read_bytes()
    ok(coord(repo, "install-hooks", "--agent", "codex"))
    assert hooks_json.read_bytes() == first

    out = ok(coord(repo, "uninstall-hooks"))
    assert out["agents"]["codex"] == str(hooks_json)
    assert json.loads(hooks_json.read_text()) == theirs
    assert not skill.exists()
    assert git(repo, "status", "--porcelain") == ""  # the tracked file is back as it was


def test_agent_is_repeatable_and_installs_both(make_repo: Callable[..., Path],
                                               coord: Cli) -> None:
    repo = make_repo({"a.txt": "a\n"})
    doc = ok(coord(repo, "install-hooks", "--agent", "claude", "--agent", "codex",
                   "--agent", "claude"))
    assert sorted(doc["agents"]) == ["claude", "codex"]
    claude = _guard_entries(repo / ".claude" / "settings.local.json")
    assert [e["matcher"] for e in claude] == ["Bash|PowerShell|Monitor|Edit|Write|NotebookEdit"]
    assert len(_guard_entries(repo / ".codex" / "hooks.json")) == 1
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    out = ok(coord(repo, "uninstall-hooks"))
    assert out["agents"]["claude"] and out["agents"]["codex"]
    assert not (repo / ".codex" / "hooks.json").exists()


def test_unknown_agent_changes_nothing(make_repo: Callable[..., Path], coord: Cli) -> None:
    repo = make_repo({"a.txt": "a\n"})
    r = coord(repo, "install-hooks", "--agent", "codex", "--agent", "cursor")
    assert r.code == 2 and "cursor" in r.doc["error"]["message"]
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (repo / ".codex").exists()


# ---- coord refuses the coordinator's commands in a worker's session -------------------------

@pytest.mark.parametrize("args", [["reject", "t2", "--note", "x", "--discard"],
                                  ["grant", "t1", "--write", "*"], ["accept", "t2"],
                                  ["thaw"], ["uninstall-hooks"], ["next"],
                                  ["signals", "--ack", "all"], ["status", "--brief", "--send"]])
def test_coord_refuses_the_coordinators_commands_to_a_worker_session(
        shared: tuple[Path, str], coord: Cli, args: list[str]) -> None:
    repo, session = shared
    before = (repo / "g.txt").read_bytes()
    write(repo, "g.txt", "t2's edit\n")
    r = coord(repo, *args, session=session)
    assert r.code == 3, r.stdout + r.stderr
    assert f"coord {args[0]} is the coordinator's" in r.doc["error"]["message"]
    assert (repo / "g.txt").read_text() == "t2's edit\n"  # nothing was discarded
    tasks = {t["id"]: t for t in ok(coord(repo, "status", session=session))["tasks"]}
    assert tasks["t2"]["state"] == "assigned"
    assert tasks["t1"]["grants"] == ["src/**", "f.txt:1-5"]
    assert before != (repo / "g.txt").read_bytes()


def test_coord_reads_pass_in_a_worker_session_and_the_coordinator_is_not_refused(
        shared: tuple[Path, str], coord: Cli) -> None:
    repo, session = shared
    for args in (["status"], ["inbox"], ["diff", "t1"], ["index"], ["signals"], ["decisions"]):
        assert coord(repo, *args, session=session).code == 0, args
    # The coordinator's mark does not make a worker's session the coordinator's: any
    # shell can set it.
    r = coord(repo, "thaw", session=session, env={"HUNKWISE_COORDINATOR": "1"})
    assert r.code == 3 and "coord thaw is the coordinator's" in r.stdout
    assert coord(repo, "thaw", session="sess-20260101-0000-coord@host").code == 0
    assert coord(repo, "thaw").code == 0  # no session in the environment: not a worker's shell


def test_coord_refusal_as_a_process_prints_one_line_and_exits_3(shared: tuple[Path, str],
                                                                 coord: Cli) -> None:
    repo, session = shared
    r = coord(repo, "reject", "t2", "--note", "x", session=session, json_out=False, process=True)
    assert r.code == 3 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"coord: coord reject is the coordinator's: a worker may run only the reading coord "
        f"commands (decisions, diff, inbox, index, signals, status); this shell runs worker "
        f"session {session}"]
    # the guard itself stays runnable from a worker's shell
    p = subprocess.run([str(BIN / "coord"), "guard"], cwd=repo, input=bash("git status"),
                       capture_output=True, text=True, env={**os.environ, "COORD_SESSION": session},
                       check=False)
    assert (p.returncode, p.stderr) == (0, "")


# ---- apply_patch, read as Codex reads it (codex-rs/apply-patch/src/parser.rs) --------------

@pytest.mark.parametrize("patch,paths", [
    ("*** Begin Patch\n  *** Update File: a.py\n@@\n-a\n+b\n*** End Patch", ["a.py"]),
    ("  *** Begin Patch \n*** Add File: n.py\n+x\n\t*** Delete File: old.py\n *** End Patch  \n",
     ["n.py", "old.py"]),
    ("<<'EOF'\n*** Begin Patch\n*** Update File: a.py\n@@\n-a\n+b\n*** End Patch\nEOF",
     ["a.py"]),
    ("*** Begin Patch\n*** Update File: a.py\n*** Move to: b/a.py\n@@\n-a\n+b\n*** End Patch",
     ["a.py", "b/a.py"]),
    # Move to is read from its line untrimmed: indented, it is a context line of the chunk
    ("*** Begin Patch\n*** Update File: a.py\n x\n *** Move to: g.txt\n+y\n*** End Patch",
     ["a.py"]),
    ("*** Begin Patch\n*** Update File: a.py\n@@\n-a\n+b\n\n@@ def f\n-c\n+d\n"
     "*** Update File: c.py\n@@\n+e\n*** End of File\n*** End Patch\r\n", ["a.py", "c.py"]),
])
def test_apply_patch_paths_as_codex_reads_them(patch: str, paths: list[str]) -> None:
    assert patch_paths(patch) == paths


@pytest.mark.parametrize("patch", [
    "*** Update File: a.py\n@@\n-a\n+b\n*** End Patch",  # no Begin
    "*** Begin Patch\n*** Update File: a.py\n@@\n-a\n+b\n",  # no End
    "*** Begin Patch\n*** Update File: a.py\n*** End Patch",  # empty update
    "*** Begin Patch\n*** Frobnicate File: a.py\n*** End Patch",
    "*** Begin Patch\n*** Update File: a.py\n@@\n-a\nbad line\n*** End Patch",
])
def test_a_patch_codex_would_refuse_is_refused(patch: str) -> None:
    with pytest.raises(PatchError):
        patch_paths(patch)


@pytest.mark.parametrize("grant", ["**", "*", ".git*/**", ".[g]it/**", "**/config", ".*/**"])
def test_no_glob_grant_makes_git_the_state_or_the_hook_settings_writable(
        make_repo: Callable[..., Path], coord: Cli, worker: Cli, grant: str) -> None:
    repo = make_repo({"a.txt": "a\n", ".claude/settings.json": "{}\n"})
    ok(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", grant))
    session = ok(worker(repo, "start", "t1"))["session"]
    env = {"COORD_SESSION": session}
    for path in (".git/config", ".git/hooks/pre-commit", ".GIT/config", ".git/coord/state.json",
                 ".claude/settings.json", ".claude/settings.local.json", ".codex/hooks.json"):
        code, message = guard(edit("Write", str(repo / path), repo), env)
        assert code == 2 and "hunkwise blocked" in message, (path, message)
    for line in ("rm -rf .claude", "echo {} > .claude/settings.json", "rm -rf .git/hooks"):
        code, message = guard(call("Bash", {"command": line}, cwd=str(repo)), env)
        assert code == 2 and "hunkwise blocked" in message, (line, message)
    if grant in ("**", "*"):
        assert guard(call("Bash", {"command": "echo x > a.txt"}, cwd=str(repo)), env) == (0, "")


def test_the_guard_s_light_state_reader_agrees_with_the_state_layer(make_repo, coord,
                                                                    worker) -> None:  # type: ignore[no-untyped-def]
    """The hooks read the grants a session holds with json alone (the state layer's imports
    cost every call): the same (task, grants) as the state layer, or None to fall back."""
    from hunkwise.coordinator import guard
    from hunkwise.shared.state import store
    from hunkwise.shared.state.context import open_repo
    from hunkwise.shared.state.models import STATE_VERSION

    assert guard.LIGHT_STATE_VERSION == STATE_VERSION
    repo = make_repo({"a.txt": "a\n", "b.txt": "1\n2\n3\n4\n", "c.txt": "c\n"})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "a.txt"))
    ok(coord(repo, "assign", "B", "--title", "B", "--expect", "e", "--write", "b.txt:1-2",
             "--write", "b.txt:+4"))
    ok(coord(repo, "assign", "C", "--title", "C", "--expect", "e", "--write", "c.txt"))
    sa = ok(worker(repo, "start", "A"))["session"]
    sb = ok(worker(repo, "start", "B"))["session"]
    ok(coord(repo, "reject", "C", "--note", "no"))
    ctx = open_repo(str(repo))
    state = store.load(ctx.lay)
    for session in (sa, sb, "sess-20260101-0000-nobody@m"):
        light = guard._held_light(str(ctx.lay.root), session)
        assert light is not None
        full = [(t.id, [str(g) for g in t.grants]) for t in sorted(state.tasks.values(),
                                                                     key=lambda t: t.id)
                if t.active and (t.session == session or (t.claim is not None
                                                          and t.claim.session == session))]
        assert [(t, [str(g) for g in gs]) for t, gs in light] == full
    # Anything but the plain current document: the state layer reads it.
    (ctx.lay.root / "state.json").write_text('{"version": 1, "tasks": {}}')
    assert guard._held_light(str(ctx.lay.root), sa) is None


# ---- the lexer without `re`: hand-written checks equal the patterns they replace -------------

def _texts(seed: int, alphabet: str, n: int = 20000, most: int = 14) -> list[str]:
    import random

    r = random.Random(seed)
    return ["".join(r.choice(alphabet) for _ in range(r.randrange(most))) for _ in range(n)]


def test_names_git_equals_its_regular_expressions() -> None:
    import re

    from hunkwise.coordinator import codescan

    token = re.compile(r"(?<![A-Za-z0-9_.])git(?![A-Za-z0-9_])")

    def reference(text: str) -> bool:
        return any(token.search(t) for t in codescan.readings(text))

    cases = _texts(1, "git '\"+.|,\\x67_-/ \tG1é\n", most=16)
    cases += ["git", "digit", ".git", "git_x", "github", "'g'+'it'", '"g" "it"', "g\\it",
              "$'\\x67it'", "g'i't", "'g','i','t'", "x.git", "git.", "-git-", "gi t"]
    for text in cases:
        assert codescan.names_git(text) == reference(text), text


def test_interpreter_names_equal_their_regular_expression() -> None:
    import re

    from hunkwise.coordinator.runners import LANGS, lang_of

    pattern = re.compile(r"(python|pypy|perl|ruby|node|php|lua)[0-9.]*(-dbg|m)?")

    def reference(base: str) -> object:
        if base in LANGS:
            return LANGS[base]
        m = pattern.fullmatch(base)
        return LANGS.get("python" if m and m.group(1) == "pypy" else m.group(1)) if m else None

    words = ["python", "pypy", "perl", "ruby", "node", "php", "lua", "python3.11m",
             "python3-dbg", "python3m-dbg", "pythonmm", "nodem", "python.m", "pypy3", "mpython"]
    words += [w + t for w in ("python", "perl", "lua", "pypy") for t in _texts(2, "0.3m-dbgx",
                                                                              n=3000, most=6)]
    for base in words:
        assert lang_of(base) == reference(base), base


def test_session_roles_and_ids_equal_their_regular_expressions() -> None:
    import re

    from hunkwise.coordinator import bracket
    from hunkwise.shared.state import identity

    def role(session: str) -> str:
        m = re.match(r"sess-\d{8}-\d{4}-(?P<role>[^@]+)@(?P<host>.+)$", session)
        return m["role"].split(".")[0] if m else ""

    for text in ["sess-" + t for t in _texts(3, "0123456789-@.\na٣", most=24)] + [
            "sess-20260101-1200-worker@box", "sess-20260101-1200-coord@a\n",
            "sess-20260101-1200-a@b\n\n", "sess-２０２６０１０１-1200-a@b"]:
        assert identity.session_role(text) == role(text), text
    plain_id = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
    plain = re.compile(r"[A-Za-z0-9_.@-]{1,100}")
    for text in _texts(4, "aZ9_.-@ /é", most=8) + ["a" * 100, "a" * 101, "-x", ".x"]:
        assert identity._plain_id(text) == bool(plain_id.fullmatch(text)), text
        assert (bracket._digest(text) == text.replace("@", "_at_")) == bool(
            plain.fullmatch(text) and not text.startswith(".")), text


def test_redirection_targets_and_options_equal_their_regular_expressions() -> None:
    import re

    from hunkwise.coordinator import gitallow, shellwrites

    not_files = re.compile(r"^(/dev/(null|stdout|stderr|tty|fd/\d+)|/proc/self/fd/\d+|-)$")
    texts = _texts(5, "-/devnulfdprocsel0123١", most=18) + [
        "-", "/dev/null", "/dev/fd/3", "/proc/self/fd/12", "/dev/fd/", "/dev/tty", "/dev/ttyS0"]
    for text in texts:
        assert shellwrites._not_a_file(text) == bool(not_files.match(text)), text
        assert shellwrites._descriptor(text) == bool(re.fullmatch(r"\d+-?|-", text)), text
        assert gitallow._letters(text) == bool(re.fullmatch(r"-[a-z]+", text)), text


# ---- what lies outside the tree, calls that outlive the check, links made on the line ------

def _home(tmp_path: Path, session: str) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    return home, {"COORD_SESSION": session, "HOME": str(home)}


@pytest.mark.parametrize("where", [
    "~/.gitconfig", "~/.gitconfig.lock", "~/.config/git/config", "~/.config/git/attributes",
    "~/.bashrc", "~/.profile", "~/.zshenv", "<install>/coordinator/hook.py", "<prefix>/x.pth",
])
def test_what_runs_code_in_every_session_is_never_a_workers_to_write(
        shared: tuple[Path, str], tmp_path: Path, where: str) -> None:
    """A worker that wrote git's global settings (a `diff.external`, a clean filter), a
    shell's startup file, or hunkwise's own installation ran code inside other sessions'
    calls, or switched the guard off for everyone: each was allowed, being outside the
    tree. By an edit tool and by a shell line alike."""
    import sys

    import hunkwise.coordinator.guard as guard_module

    repo, session = shared
    home, env = _home(tmp_path, session)
    install = os.path.dirname(os.path.dirname(os.path.realpath(guard_module.__file__)))
    path = (where.replace("~", str(home)).replace("<install>", install)
            .replace("<prefix>", os.path.realpath(sys.prefix)))
    code, message = guard(edit("Write", path, repo), env)
    assert code == 2 and "leave it alone" in message, message
    if where.startswith("~/"):
        for line in (f"printf '[diff]\\n' >> {where}", f"echo x > $HOME/{where[2:]}",
                     f"tee -a ${{HOME}}/{where[2:]} < /dev/null"):
            code, message = guard(call("Bash", {"command": line}, cwd=str(repo)), env)
            assert code == 2, line
    # A folder holding one goes whole or not at all.
    code, _ = guard(call("Bash", {"command": "rm -rf ~/.config"}, cwd=str(repo)), env)
    assert code == 2


def test_other_files_outside_the_tree_stay_the_workers_to_write(
        shared: tuple[Path, str], tmp_path: Path) -> None:
    repo, session = shared
    home, env = _home(tmp_path, session)
    for line in ("echo x > ~/notes.txt", "echo x > $HOME/notes.txt", f"echo x > {tmp_path}/y"):
        assert guard(call("Bash", {"command": line}, cwd=str(repo)), env) == (0, ""), line
    assert guard(edit("Write", str(home / ".config" / "other.toml"), repo), env) == (0, "")
    # `~` quoted is no home: a folder of that name in the tree, outside the grants.
    assert guard(call("Bash", {"command": "echo x > '~/notes.txt'"}, cwd=str(repo)), env)[0] == 2


def test_a_call_that_runs_on_in_the_background_is_blocked(shared: tuple[Path, str]) -> None:
    """Claude Code's `run_in_background` and its Monitor tool run a command on after the
    call returns: a script that wrote another task's files seconds later escaped the check
    that follows every call, as `cmd &` would (which is refused)."""
    repo, session = shared
    env = {"COORD_SESSION": session}
    line = "python3 src/gen.py"
    assert guard(call("Bash", {"command": line}, cwd=str(repo)), env) == (0, "")
    for tool, ti in (("Bash", {"command": line, "run_in_background": True}),
                     ("Monitor", {"command": line, "description": "watch"})):
        code, message = guard(call(tool, ti, cwd=str(repo)), env)
        assert code == 2 and "background" in message and "foreground" in message, message


@pytest.mark.parametrize("line,allowed", [
    ("ln -sf ../../g.txt src/a/n1 && echo clobbered > src/a/n1", False),
    ("ln -s ../g.txt src/n2; cp /dev/null src/n2", False),
    ("mkdir -p src/d && ln -s ../../g.txt src/d/ && echo x > src/d/g.txt", False),
    ("ln -s ../f.txt src/n3", True),
    ("ln -s a.py src/n4", True),
])
def test_a_link_made_on_the_line_is_judged_where_it_points(
        shared: tuple[Path, str], line: str, allowed: bool) -> None:
    """A symbolic link made and written through on one line wrote another task's file: at
    judging time the link did not exist for the guard to follow. Making one is judged as
    writing where it points (a relative link from its own folder)."""
    repo, session = shared
    code, message = guard(call("Bash", {"command": line}, cwd=str(repo)), {"COORD_SESSION": session})
    assert (code == 0) == allowed, message
    if not allowed:
        assert "g.txt" in message


@pytest.mark.parametrize("line", [
    "ln -sr g.txt src/n5 && echo x > src/n5",
    "ln -s --relative g.txt src/n5 && echo x > src/n5",
    "ln -s ../.. src/up && echo x > src/up/r/g.txt",
    "ln -s / src/root && echo x > src/root/tmp/g.txt",
    "ln -s .. src/here && echo x > src/here/g.txt",
])
def test_a_link_to_another_task_s_file_or_a_folder_holding_the_tree_is_blocked(
        shared: tuple[Path, str], line: str) -> None:
    """`ln -r` names its target from here, not from the link's folder; a link to a folder
    that holds the tree let a write through it land on any file, under a path inside the
    grants (found by a review of the first version of the rule)."""
    repo, session = shared
    code, message = guard(call("Bash", {"command": line}, cwd=str(repo)), {"COORD_SESSION": session})
    assert code == 2, message


@pytest.mark.parametrize("line", ["echo x >> ~//.gitconfig", "cp /tmp/x/.gitconfig ~",
                                  "cp /tmp/x/.bashrc $HOME", "echo x >> ~/.bash_aliases",
                                  "echo x > ~/.bashrc.d/x.sh", "cp /tmp/x ~/.gitconfig",
                                  "mv /tmp/x ~/.bashrc", "cp /tmp/x $HOME/.gitconfig",
                                  "install -m644 /tmp/x ~/.profile",
                                  "ln -sf /tmp/evil ~/.bashrc"])
def test_other_spellings_of_the_home_folder_are_judged_where_the_shell_puts_them(
        shared: tuple[Path, str], tmp_path: Path, line: str) -> None:
    repo, session = shared
    _home_dir, env = _home(tmp_path, session)
    code, message = guard(call("Bash", {"command": line}, cwd=str(repo)), env)
    assert code == 2, message


def test_background_only_when_the_call_says_so(shared: tuple[Path, str]) -> None:
    repo, session = shared
    ti = {"command": "python3 src/gen.py", "run_in_background": "false"}
    assert guard(call("Bash", ti, cwd=str(repo)), {"COORD_SESSION": session}) == (0, "")


@pytest.mark.parametrize("line,allowed", [
    ("bash", False), ("sh -s", False), ("bash -i", False), ("python3", False),
    ("python3 -", False), ("node", False), ("perl", False),
    # (a flag after the program's own options is the script's: it still reads its input)
    ("bash -h", False), ("python3 - --help", False), ("bash -s -- --version", False),
    ("python3 -i x.py", False), ("python3 -i -c pass", False), ("python3 < /dev/tty", False),
    ("sh < /dev/pts/0", False), ("python3 < script.py", True),
    ("python3 --version", True), ("node -v", True), ("bash -c 'ls'", True),
    ("python3 -c 'print(1)'", True), ("echo ls | bash", True), ("python3 script.py", True),
])
def test_a_shell_or_interpreter_reading_the_call_s_own_input_is_blocked(line: str,
                                                                         allowed: bool) -> None:
    """Codex types into a shell or a REPL it opened with `exec_command` later, by
    `write_stdin`, and no hook is asked about that input (openai/codex#46372): `bash` or
    `python3` alone ran whatever came next, unjudged and after the call's check (found by
    an adversarial review). Input the line gives it (a pipe, a here-document) is judged."""
    code, message = guard(bash(line), {})
    assert (code == 0) == allowed, message
    if not allowed:
        assert "write_stdin" in message
