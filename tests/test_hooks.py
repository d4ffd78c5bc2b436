"""The agent hooks as the agents run them: identity without setup, the after-call bracket,
provenance, the installed settings, and the user's own git hooks.

Most cases drive the hook module in-process (`hook.run(event, payload, env)`) with the
JSON Claude Code and Codex send (PreToolUse / PostToolUse: session_id, cwd, tool_name,
tool_input, tool_use_id); the process contract (the installed command through a shell)
is checked by real processes at the end.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hunkwise.coordinator import hook
from hunkwise.shared.state import provenance

from testing.cli import Cli, ok
from testing.env import BIN
from testing.repo import git, write

MakeRepo = Callable[..., Path]
AGENT_A = "0b9e2c8a-aaaa-4aaa-8aaa-00000000000a"
AGENT_B = "0b9e2c8a-bbbb-4bbb-8bbb-00000000000b"


@pytest.fixture(autouse=True)
def no_agent_in_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The suite may itself run inside an agent: its session variables must not leak in."""
    for var in ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID", "COORD_SESSION",
                "HUNKWISE_COORDINATOR"):
        monkeypatch.delenv(var, raising=False)
    yield


def payload(event: str, repo: Path, tool: str, tool_input: dict[str, Any], *,
            agent: str = AGENT_A, use: str = "toolu_1") -> bytes:
    doc: dict[str, Any] = {"session_id": agent, "transcript_path": "/tmp/t.jsonl",
                           "cwd": str(repo), "permission_mode": "default",
                           "hook_event_name": event, "tool_name": tool,
                           "tool_input": tool_input, "tool_use_id": use}
    if event == "PostToolUse":
        doc["tool_response"] = {"success": True}
    if event == "PostToolUseFailure":
        doc.update(error="Command exited with non-zero status code 1", is_interrupt=False)
    return json.dumps(doc).encode()


def env_of(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COORD_SESSION", "HUNKWISE_COORDINATOR")}
    env.update(extra)
    return env


def two_tasks(make_repo: MakeRepo, coord: Cli, worker: Cli,
              monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    """A holds a.txt, B holds b.txt; B's worker has an uncommitted edit; each agent ran
    `worker start` with its own session variable and nothing else set."""
    repo = make_repo({"a.txt": "a1\na2\n", "b.txt": "b1\nb2\n", "c.txt": "c\n"})
    for tid, path in (("A", "a.txt"), ("B", "b.txt")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "it works", "--write", path))
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", AGENT_A)
    sa = ok(worker(repo, "start", "A"))
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", AGENT_B)
    sb = ok(worker(repo, "start", "B"))
    monkeypatch.delenv("CLAUDE_CODE_SESSION_ID")
    assert sa["guard"] == {"known": True, "agent": "claude", "by": "CLAUDE_CODE_SESSION_ID"}
    write(repo, "b.txt", "b1\nB's own line\nb2\n")
    return repo, sa["session"], sb["session"]


def bash(repo: Path, command: str, *, agent: str = AGENT_A, use: str = "toolu_sh",
         env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """One shell tool call as the agent makes it: PreToolUse, the command, PostToolUse."""
    e = env_of() if env is None else env
    code, _out, err = hook.run("pre", payload("PreToolUse", repo, "Bash", {"command": command},
                                              agent=agent, use=use), e)
    if code != 0:
        return code, "", err
    subprocess.run(command, shell=True, cwd=repo, check=True)
    return hook.run("post", payload("PostToolUse", repo, "Bash", {"command": command},
                                    agent=agent, use=use), e)


# ---- identity without setup ---------------------------------------------------------------

def test_worker_start_maps_the_agent_session_so_the_guard_judges_its_edits(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    edit = {"file_path": str(repo / "b.txt"), "old_string": "b1", "new_string": "x"}
    code, _, err = hook.run("pre", payload("PreToolUse", repo, "Edit", edit), env_of())
    assert code == 2 and "b.txt is outside the grants of A" in err
    mine = {**edit, "file_path": str(repo / "a.txt")}
    assert hook.run("pre", payload("PreToolUse", repo, "Edit", mine), env_of())[0] == 0
    # `coord guard` (the click entry point) resolves the worker the same way.
    r = subprocess.run([str(BIN / "coord"), "guard"], cwd=repo, env=env_of(), check=False,
                       input=payload("PreToolUse", repo, "Edit", edit), capture_output=True)
    assert r.returncode == 2 and b"outside the grants" in r.stderr
    # An agent that never ran worker start is no known worker: its writes are not judged.
    other = payload("PreToolUse", repo, "Edit", edit, agent="never-started")
    assert hook.run("pre", other, env_of())[0] == 0


def test_worker_start_says_whether_the_guard_knows_the_session(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    for tid in ("A", "B", "C"):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", f"{tid}.txt"))
    unknown = worker(repo, "start", "A", json_out=False)
    assert unknown.code == 0 and "do not know this session" in unknown.stdout
    known = ok(worker(repo, "start", "B", session="sess-20260101-0000-worker@m"))
    assert known["guard"] == {"known": True, "agent": None, "by": "COORD_SESSION"}
    monkeypatch.setenv("CODEX_THREAD_ID", "0199a1b2-codex-thread")
    codex = ok(worker(repo, "start", "C"))
    assert codex["guard"] == {"known": True, "agent": "codex", "by": "CODEX_THREAD_ID"}


# ---- the bracket: writes outside the grants are put back ---------------------------------

def test_a_shell_write_onto_another_task_s_file_is_put_back_at_once(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    theirs = (repo / "b.txt").read_bytes()
    script = ("python3 -c \"import pathlib as p; [p.Path(f).write_text('mine\\n') "
              "for f in ('a.txt', 'b.txt', 'new.txt')]; p.Path('c.txt').unlink()\"")
    code, out, _err = bash(repo, script)
    assert code == 0
    doc = json.loads(out)
    # Told as context the agent reads and works on (a PostToolUse block would end its turn).
    assert "decision" not in doc and doc["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    told = doc["hookSpecificOutput"]["additionalContext"]
    assert doc["systemMessage"] == told
    for path in ("b.txt", "c.txt", "new.txt"):
        assert path in told
    assert (repo / "b.txt").read_bytes() == theirs  # B's uncommitted edit is back
    assert (repo / "c.txt").read_text() == "c\n"
    assert not (repo / "new.txt").exists()
    assert (repo / "a.txt").read_text() == "mine\n"  # inside A's grant: kept
    # What the command wrote there is not lost either (an editor's save during it looks
    # the same): it is kept in a tree the message names.
    kept = git(repo, "for-each-ref", "--format=%(objectname)", "refs/hunkwise/calls/undone/")
    assert kept.strip() and kept.strip()[:12] in told
    assert git(repo, "show", f"{kept.strip()}:b.txt") == "mine\n"


def test_a_failed_shell_call_is_checked_and_closed_as_a_successful_one(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code sends a call that fails (a command exiting non-zero) to
    PostToolUseFailure, never to PostToolUse: what it wrote outside its grants is put back
    all the same, and its record closes (an open one would make every other session's
    call look overlapped, and nothing would be put back)."""
    import time

    from hunkwise.coordinator import bracket

    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    theirs = (repo / "b.txt").read_bytes()
    command = ("python3 -c \"import pathlib as p; p.Path('b.txt').write_text('mine\\n')\"; "
               "exit 1")
    e = env_of()
    assert hook.run("pre", payload("PreToolUse", repo, "Bash", {"command": command}), e)[0] == 0
    subprocess.run(command, shell=True, cwd=repo, check=False)
    code, out, _err = hook.run("post", payload("PostToolUseFailure", repo, "Bash",
                                               {"command": command}), e)
    doc = json.loads(out)
    assert code == 0 and doc["hookSpecificOutput"]["hookEventName"] == "PostToolUseFailure"
    assert "b.txt" in doc["systemMessage"] and (repo / "b.txt").read_bytes() == theirs
    calls = bracket._calls(str(repo / ".git" / "coord"))
    assert not [n for n in os.listdir(calls) if n.startswith("open-")]
    # Closed: a call that starts after it does not overlap it.
    after = time.time() + 1
    assert bracket.overlapping(str(repo / ".git" / "coord"), "else", after, after) == (False, set())


def test_a_call_whose_after_hook_never_came_stops_counting(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from hunkwise.coordinator import bracket

    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    e = env_of()
    assert hook.run("pre", payload("PreToolUse", repo, "Bash", {"command": "sleep 1"},
                                   use="toolu_lost"), e)[0] == 0  # the agent dies mid-call
    root = str(repo / ".git" / "coord")
    now = time.time()
    assert bracket.overlapping(root, "someone else", now, now)[0] is True
    later = now + bracket.OPEN_S + 60
    assert bracket.overlapping(root, "someone else", later, later) == (False, set())


def test_a_change_while_another_session_s_call_ran_is_reported_never_undone(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    edit = {"file_path": str(repo / "b.txt"), "old_string": "b1", "new_string": "B again"}
    e = env_of()
    assert hook.run("pre", payload("PreToolUse", repo, "Bash", {"command": "true"},
                                   use="toolu_a"), e)[0] == 0
    # B's Edit runs while A's shell call is still running.
    assert hook.run("pre", payload("PreToolUse", repo, "Edit", edit, agent=AGENT_B,
                                   use="toolu_b"), e)[0] == 0
    write(repo, "b.txt", "B again\nB's own line\nb2\n")
    assert hook.run("post", payload("PostToolUse", repo, "Edit", edit, agent=AGENT_B,
                                    use="toolu_b"), e)[0] == 0
    code, out, _ = hook.run("post", payload("PostToolUse", repo, "Bash", {"command": "true"},
                                            use="toolu_a"), e)
    assert code == 0 and "not undone: b.txt" in json.loads(out)["systemMessage"]
    assert (repo / "b.txt").read_text() == "B again\nB's own line\nb2\n"


def test_the_before_record_keeps_the_uncommitted_files_reachable(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    bash(repo, "true")
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/hunkwise/calls/")
    assert len(refs.split()) == 1
    tree = refs.split()[0]
    assert git(repo, "show", f"{tree}:b.txt") == "b1\nB's own line\nb2\n"


def test_every_before_record_of_a_session_stays_reachable_after_its_next_call(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: each call's record replaced the session's last one, so B's uncommitted line,
    destroyed by a write no hook saw (a script that ran on after the call), was gone for
    good once A made one more call: `coord restore` had nothing, only a dangling blob was
    left. The ref keeps its reflog: every record stays reachable."""
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    # (Records dated now, not at the suite's pinned date: git's gc expires older entries.)
    monkeypatch.delenv("GIT_COMMITTER_DATE", raising=False)
    bash(repo, "true")
    write(repo, "b.txt", "clobbered\n")  # by something no hook saw
    bash(repo, "true", use="toolu_sh2")
    ref = git(repo, "for-each-ref", "--format=%(refname)", "refs/hunkwise/calls/").split()[0]
    assert git(repo, "show", f"{ref}:b.txt") == "clobbered\n"
    assert git(repo, "show", f"{ref}@{{1}}:b.txt") == "b1\nB's own line\nb2\n"
    # git's own tools read them, and gc keeps them and says nothing about them.
    assert len(git(repo, "log", "-g", "--format=%H", ref).split()) == 2
    gc = subprocess.run(["git", "gc", "--quiet", "--prune=now"], cwd=repo, capture_output=True,
                        text=True, check=True)
    assert gc.stderr == "", gc.stderr
    assert git(repo, "show", f"{ref}@{{1}}:b.txt") == "b1\nB's own line\nb2\n"


# ---- provenance -----------------------------------------------------------------------------

def test_tool_calls_record_the_lines_they_wrote(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    root = repo / ".git" / "coord"
    e = env_of()
    edit = {"file_path": str(repo / "a.txt"), "old_string": "a1", "new_string": "@cache\na1"}
    hook.run("pre", payload("PreToolUse", repo, "Edit", edit, use="t1"), e)
    hook.run("post", payload("PostToolUse", repo, "Edit", edit, use="t1"), e)
    patch = ("*** Begin Patch\n*** Update File: a.txt\n@@\n a2\n+from a patch\n"
             "*** End Patch\n")
    hook.run("post", payload("PostToolUse", repo, "apply_patch", {"command": patch}, use="t2"), e)
    bash(repo, "printf 'a1\\na2\\nby shell\\n' > a.txt", use="t3")
    got = provenance.writers(root, "a.txt")
    for line in (b"@cache", b"from a patch", b"by shell"):
        assert set(got[provenance.line_digest(line)]) == {sa}, line
    assert provenance.line_digest(b"a2") not in got  # unchanged lines are nobody's evidence
    assert provenance.line_digest(b"a1") not in got  # nor the context an Edit repeats


def test_a_write_records_only_what_it_changed_and_an_edit_what_it_removed(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Write replaces the whole file: the lines it kept (a neighbour's among them) are
    nobody's evidence; what an Edit took out is on record as removed."""
    repo, sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    root = repo / ".git" / "coord"
    e = env_of()
    before = (repo / "a.txt").read_text()
    content = before.replace("a1", "a1 rewritten")
    write_ = {"file_path": str(repo / "a.txt"), "content": content}
    hook.run("pre", payload("PreToolUse", repo, "Write", write_, use="w1"), e)
    write(repo, "a.txt", content)
    hook.run("post", payload("PostToolUse", repo, "Write", write_, use="w1"), e)
    edit = {"file_path": str(repo / "a.txt"), "old_string": "a2\n", "new_string": ""}
    hook.run("pre", payload("PreToolUse", repo, "Edit", edit, use="w2"), e)
    hook.run("post", payload("PostToolUse", repo, "Edit", edit, use="w2"), e)
    got = provenance.writers(root, "a.txt")
    assert set(got) == {provenance.line_digest(b"a1 rewritten")}, got
    gone = provenance.all_removers(root)["a.txt"]
    assert set(gone) == {provenance.line_digest(b"a1"), provenance.line_digest(b"a2")}
    assert all(set(v) == {sa} for v in gone.values())
    assert not [n for n in os.listdir(root / "calls") if n.startswith("was-")]


def test_an_apply_patch_record_names_the_files_it_deletes(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another session's shell call running meanwhile must see the deletion as this call's
    (reported, never undone), not as its own write outside its grants."""
    from hunkwise.coordinator import bracket

    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    patch = "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch\n"
    assert hook.run("pre", payload("PreToolUse", repo, "apply_patch", {"command": patch},
                                   use="p1"), env_of())[0] == 0
    import time

    now = time.time()
    named = bracket.overlapping(str(repo / ".git" / "coord"), "someone else", now, now)[1]
    assert named == {"a.txt"}


# ---- payloads, install, fail closed -------------------------------------------------------

def test_a_write_over_4_mb_inside_the_grants_is_allowed(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    big = payload("PreToolUse", repo, "Write",
                  {"file_path": str(repo / "a.txt"), "content": "x" * 5_000_000})
    r = subprocess.run([str(BIN / "coord"), "guard"], cwd=repo, env=env_of(), check=False,
                       input=big, capture_output=True)
    assert r.returncode == 0, r.stderr
    assert hook.run("pre", big, env_of())[0] == 0


def test_install_writes_every_hook_with_a_timeout_and_a_wrapper_that_fails_closed(
        make_repo: MakeRepo, coord: Cli) -> None:
    repo = make_repo({"a.txt": "a\n"})
    doc = ok(coord(repo, "install-hooks", "--agent", "claude", "--agent", "codex"))
    assert any("exits 2" in n for n in doc["notes"])
    claude = json.loads((repo / ".claude" / "settings.local.json").read_text())["hooks"]
    assert set(claude) == {"PreToolUse", "PostToolUse", "PostToolUseFailure", "ConfigChange"}
    pre = claude["PreToolUse"][0]
    assert pre["matcher"].split("|") == ["Bash", "PowerShell", "Monitor", "Edit", "Write",
                                         "NotebookEdit"]
    assert pre["hooks"][0]["onFailure"] == "block"
    codex = json.loads((repo / ".codex" / "hooks.json").read_text())["hooks"]
    assert set(codex) == {"PreToolUse", "PostToolUse"}
    for events in (claude, codex):
        for entries in events.values():
            for h in entries[0]["hooks"]:
                assert isinstance(h["timeout"], int) and h["timeout"] > 0
    command = pre["hooks"][0]["command"]
    py = str(Path(sys.executable).absolute())
    assert command.startswith(py)
    # It runs without `site` (-S), the folders it imports from written in.
    assert " -I -S -c " in command
    from hunkwise.coordinator.hooks import import_path

    assert import_path() and all(p in command for p in import_path())
    # A moved virtualenv (its interpreter, or the folders it imported from, gone), or an
    # interpreter without hunkwise: blocked, and said why.
    moved = command
    for p in import_path():
        moved = moved.replace(p, "/nonexistent/venv/lib")
    for broken in (command.replace(py, "/nonexistent/venv/bin/python", 1), moved,
                   moved.replace(py, "/usr/bin/python3", 1)):
        if "/usr/bin/python3" in broken and not os.path.exists("/usr/bin/python3"):
            continue
        r = subprocess.run(broken, shell=True, cwd=repo, check=False,
                           input=b"{}", capture_output=True, env=env_of())
        assert r.returncode == 2 and b"could not run" in r.stderr, (broken, r.stderr)


def test_uninstall_leaves_exactly_what_was_there(make_repo: MakeRepo, coord: Cli) -> None:
    repo = make_repo({"a.txt": "a\n"})
    exclude = repo / ".git" / "info" / "exclude"
    before = exclude.read_bytes() if exclude.exists() else None
    listing = sorted(p.name for p in (repo / ".git" / "hooks").iterdir())
    ok(coord(repo, "install-hooks", "--agent", "claude", "--agent", "codex"))
    ok(coord(repo, "uninstall-hooks"))
    assert not (repo / ".claude").exists() and not (repo / ".codex").exists()
    assert not (repo / ".agents").exists()
    assert (exclude.read_bytes() if exclude.exists() else None) == before
    assert sorted(p.name for p in (repo / ".git" / "hooks").iterdir()) == listing


def test_config_change_that_drops_the_hooks_is_refused(make_repo: MakeRepo, coord: Cli) -> None:
    repo = make_repo({"a.txt": "a\n"})
    ok(coord(repo, "install-hooks", "--agent", "claude"))
    change = json.dumps({"session_id": AGENT_A, "cwd": str(repo),
                         "hook_event_name": "ConfigChange", "source": "local_settings"}).encode()
    assert hook.run("config", change, env_of())[0] == 0
    (repo / ".claude" / "settings.local.json").write_text("{}\n")
    code, _, err = hook.run("config", change, env_of())
    assert code == 2 and "uninstall-hooks" in err
    assert hook.run("config", change, env_of(HUNKWISE_COORDINATOR="1"))[0] == 0


# ---- the user's own git hooks -------------------------------------------------------------

def _commit(repo: Path, coordinator: bool = False) -> subprocess.CompletedProcess[str]:
    env = env_of(**({"HUNKWISE_COORDINATOR": "1"} if coordinator else {}))
    return subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "x"], cwd=repo,
                          env=env, check=False, capture_output=True, text=True)


def test_a_global_hooks_folder_is_never_written(make_repo: MakeRepo, coord: Cli,
                                                tmp_path: Path) -> None:
    shared = tmp_path / "dotfiles-hooks"
    shared.mkdir()
    log = tmp_path / "global.log"
    (shared / "pre-commit").write_text(f"#!/bin/sh\necho ran >> '{log}'\n")
    (shared / "pre-commit").chmod(0o755)
    git(tmp_path, "config", "--global", "core.hooksPath", str(shared))
    repo, other = make_repo({"a.txt": "a\n"}), make_repo({"b.txt": "b\n"})
    # Their first commits ran it, unless this process had built those repositories before
    # (make_repo copies them then): either way, the log starts empty here.
    log.unlink(missing_ok=True)
    doc = ok(coord(repo, "install-hooks"))
    assert sorted(p.name for p in shared.iterdir()) == ["pre-commit"]
    assert any("left alone" in n for n in doc["notes"])
    assert _commit(repo).returncode != 0  # a worker's commit here is refused
    assert _commit(repo, coordinator=True).returncode == 0
    assert log.read_text() == "ran\n"  # the user's global hook still runs, chained
    assert _commit(other).returncode == 0  # every other repository is untouched
    listing = sorted(p.name for p in (repo / ".git" / "hooks").iterdir())
    ok(coord(repo, "uninstall-hooks"))
    assert git(repo, "config", "--local", "--get-all", "core.hooksPath", check=False) == ""
    left = sorted(p.name for p in (repo / ".git" / "hooks").iterdir())
    assert left == [n for n in listing if n not in (
        "pre-commit", "reference-transaction", "pre-commit.hunkwise-chained")]
    assert _commit(repo).returncode == 0


def test_a_tracked_hooks_folder_is_refused_with_the_reason(make_repo: MakeRepo,
                                                           coord: Cli) -> None:
    repo = make_repo({"githooks/pre-commit": "#!/bin/sh\nexit 0\n", "a.txt": "a\n"})
    git(repo, "config", "core.hooksPath", "githooks")
    r = coord(repo, "install-hooks")
    assert r.code == 3 and "tracked" in r.doc["error"]["message"]
    assert git(repo, "status", "--porcelain") == ""


def test_uninstall_after_pre_commit_install_leaves_commits_working(make_repo: MakeRepo,
                                                                    coord: Cli) -> None:
    repo = make_repo({"a.txt": "a\n"})
    ok(coord(repo, "install-hooks"))
    hooks_dir = repo / ".git" / "hooks"
    # What `pre-commit install` does to a hook it finds: keeps it as .legacy and runs it.
    os.rename(hooks_dir / "pre-commit", hooks_dir / "pre-commit.legacy")
    (hooks_dir / "pre-commit").write_text(
        "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n"
        'here="$(dirname "$0")"\n'
        'if [ -x "$here/pre-commit.legacy" ]; then "$here/pre-commit.legacy" || exit $?; fi\n')
    (hooks_dir / "pre-commit").chmod(0o755)
    assert _commit(repo).returncode != 0
    ok(coord(repo, "uninstall-hooks"))
    assert _commit(repo).returncode == 0
    assert "pre-commit.com" in (hooks_dir / "pre-commit").read_text()  # theirs stays


# ---- the real-process evidence ------------------------------------------------------------

def _installed(repo: Path, event: str) -> str:
    data = json.loads((repo / ".claude" / "settings.local.json").read_text())
    return str(data["hooks"][event][0]["hooks"][0]["command"])


def _hook_process(repo: Path, event: str, body: bytes, env: dict[str, str]
                  ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(_installed(repo, event), shell=True, cwd=repo, input=body, env=env,
                          capture_output=True, check=False)


def test_an_agent_started_without_coord_session_is_guarded_after_worker_start(
        make_repo: MakeRepo, coord: Cli) -> None:
    """Claude Code as documented: the hook commands of .claude/settings.local.json run
    through a shell with the call on stdin; the agent's Bash tool has CLAUDE_CODE_SESSION_ID
    and nothing hunkwise set."""
    repo = make_repo({"a.txt": "a1\n", "b.txt": "b1\nb2\n"})
    ok(coord(repo, "install-hooks", "--agent", "claude"))
    for tid, path in (("A", "a.txt"), ("B", "b.txt")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", path))
    agent_env = env_of(CLAUDE_CODE_SESSION_ID=AGENT_A)
    b_env = env_of(CLAUDE_CODE_SESSION_ID=AGENT_B)
    for tid, env in (("B", b_env), ("A", agent_env)):
        started = subprocess.run([str(BIN / "worker"), "start", tid], cwd=repo, env=env,
                                 capture_output=True, text=True, check=False)
        assert started.returncode == 0 and "know this session from its next tool call" in \
            started.stdout, started.stdout + started.stderr
    write(repo, "b.txt", "b1\nB's work\nb2\n")
    theirs = (repo / "b.txt").read_bytes()

    edit = {"file_path": str(repo / "b.txt"), "old_string": "b1", "new_string": "A's"}
    blocked = _hook_process(repo, "PreToolUse", payload("PreToolUse", repo, "Edit", edit),
                            agent_env)
    assert blocked.returncode == 2 and b"outside the grants" in blocked.stderr

    # A shell line whose target the guard reads is refused before it runs...
    sed = {"command": "sed -i 's/b1/A was here/' b.txt"}
    pre = _hook_process(repo, "PreToolUse", payload("PreToolUse", repo, "Bash", sed,
                                                    use="toolu_sed"), agent_env)
    assert pre.returncode == 2 and b"b.txt" in pre.stderr
    # ...one whose targets it cannot read runs, and the bracket puts back what it wrote.
    script = {"command": "python3 -c \"import pathlib; pathlib.Path('b.txt').write_text('A')\""}
    pre = _hook_process(repo, "PreToolUse", payload("PreToolUse", repo, "Bash", script,
                                                    use="toolu_py"), agent_env)
    assert pre.returncode == 0, pre.stderr
    subprocess.run(script["command"], shell=True, cwd=repo, check=True, env=agent_env)
    post = _hook_process(repo, "PostToolUse", payload("PostToolUse", repo, "Bash", script,
                                                      use="toolu_py"), agent_env)
    assert post.returncode == 0
    assert "b.txt" in json.loads(post.stdout)["hookSpecificOutput"]["additionalContext"]
    assert (repo / "b.txt").read_bytes() == theirs  # nothing lost


def test_the_coordinator_s_coord_watch_leaves_the_workers_put_back_on(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long `coord watch` of the coordinator writes no file: a worker's shell call that
    overlaps it still has what it wrote outside its grants put back (a coord command that
    does write the tree, `coord discard`, still counts as an overlap)."""
    import time

    from hunkwise.coordinator import bracket

    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    boss = env_of(HUNKWISE_COORDINATOR="1")
    root = str(repo / ".git" / "coord")
    watch = payload("PreToolUse", repo, "Bash", {"command": "coord watch --timeout 600"},
                    agent="coordinator", use="toolu_watch")
    assert hook.run("pre", watch, boss)[0] == 0
    now = time.time()
    assert bracket.overlapping(root, "someone else", now, now) == (False, set())
    theirs = (repo / "b.txt").read_bytes()
    script = "python3 -c \"import pathlib; pathlib.Path('b.txt').write_text('A')\""
    code, out, _ = bash(repo, script)
    assert code == 0 and "b.txt" in json.loads(out)["systemMessage"]
    assert (repo / "b.txt").read_bytes() == theirs  # put back, not only reported
    discard = payload("PreToolUse", repo, "Bash", {"command": "coord discard B"},
                      agent="coordinator", use="toolu_discard")
    assert hook.run("pre", discard, boss)[0] == 0
    now = time.time()
    assert bracket.overlapping(root, "someone else", now, now)[0] is True


# ---- what a hook call costs: the modules it imports ------------------------------------

# Each costs every tool call milliseconds (re with enum and functools ~6 ms, typing ~4 ms,
# json, pathlib, shutil ~2 ms each, against ~8 ms for the bare interpreter): a plain shell
# line and an Edit inside the grants need none of them.
HEAVY = ("re", "typing", "enum", "json", "shutil", "shlex", "pathlib", "subprocess",
         "dataclasses", "tempfile", "functools", "collections", "inspect", "click", "hashlib")
# hashlib loads OpenSSL (~10 ms on a small machine); the interpreter's own SHA-256 gives the
# digests provenance records, where it was built with one (CPython is, by default).
_OWN_SHA256 = any(importlib.util.find_spec(m) for m in ("_sha2", "_sha256"))


@pytest.mark.parametrize("event, tool, tool_input, agent, more", [
    ("PreToolUse", "Bash", {"command": "ls -la src 2>/dev/null | head -n 5 && pwd"},
     "not-a-worker", ()),
    ("PreToolUse", "Bash", {"command": 'grep -rn "git stash" docs/ tests/git > a.txt 2>&1'},
     "not-a-worker", ()),
    # a worker's shell call: git status before and after it, without the door's imports
    ("PreToolUse", "Bash", {"command": "ls"}, AGENT_A, ("select",)),
    ("PostToolUse", "Bash", {"command": "ls"}, AGENT_A, ("select",)),
    ("PreToolUse", "Edit", {"file_path": "a.txt", "old_string": "a1", "new_string": "x"},
     AGENT_A, ()),
    ("PostToolUse", "Edit", {"file_path": "a.txt", "old_string": "a1", "new_string": "x"},
     AGENT_A, () if _OWN_SHA256 else ("hashlib",)),
    ("PreToolUse", "Write", {"file_path": "a.txt", "content": "x\n"}, AGENT_A, ()),
])
def test_a_plain_hook_call_imports_nothing_heavy(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch,
        event: str, tool: str, tool_input: dict[str, Any], agent: str,
        more: tuple[str, ...]) -> None:
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    ok(coord(repo, "install-hooks", "--agent", "claude"))
    doc = json.loads((repo / ".claude" / "settings.local.json").read_text())
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    # The installed command, its module's main swapped for one that also lists the modules.
    probe = command.replace(
        "sys.exit(main())",
        'code = main(); print("loaded:", *sorted(m for m in sys.modules if m.split(".")[0] in '
        f'{json.dumps(HEAVY)}), file=sys.stderr); sys.exit(code)')
    assert probe != command
    body = payload(event, repo, tool, {**tool_input, **(
        {"file_path": str(repo / tool_input["file_path"])} if "file_path" in tool_input else {})},
        agent=agent)
    if tool == "Bash" and agent == AGENT_A:
        # The steady state: the tree's uncommitted files are on record from an earlier call
        # (the first one writes their tree, through the door).
        assert bash(repo, "true")[0] == 0
    if event == "PostToolUse":  # its call was opened by its PreToolUse
        pre = body.replace(b'"PostToolUse"', b'"PreToolUse"')
        assert hook.run("pre", pre, env_of())[0] == 0
    arg = "pre" if event == "PreToolUse" else "post"
    r = subprocess.run(probe.replace(" pre ", f" {arg} ", 1), shell=True, cwd=repo, input=body,
                       capture_output=True, env=env_of(), check=False)
    assert r.returncode == 0, r.stderr
    loaded = r.stderr.decode().strip().splitlines()[-1].split()
    assert loaded[0] == "loaded:"
    assert [m for m in loaded[1:] if m.split(".")[0] not in more] == []


# ---- a worker's shell, known by its agent's own session id ----------------------------------

def _as_agent(agent: str, *args: str, repo: Path, hunkwise_coordinator: bool = False
              ) -> subprocess.CompletedProcess[str]:
    """A command run in the agent's own shell: its session variable set, nothing else (and
    the coordinator's mark, when asked: any shell can set it)."""
    env = env_of(CLAUDE_CODE_SESSION_ID=agent)
    if hunkwise_coordinator:
        env["HUNKWISE_COORDINATOR"] = "1"
    return subprocess.run(list(args), cwd=repo, env=env, capture_output=True, text=True,
                          check=False)


def test_coord_refuses_a_worker_known_by_its_agent_id_whatever_marks_it_sets(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: from worker A's shell (CLAUDE_CODE_SESSION_ID only, as Claude Code sets it),
    `coord reject B --discard` destroyed B's work; with HUNKWISE_COORDINATOR=1 too."""
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    before = (repo / "b.txt").read_bytes()
    for mark in (False, True):
        r = _as_agent(AGENT_A, str(BIN / "coord"), "reject", "B", "--note", "x", "--discard",
                      repo=repo, hunkwise_coordinator=mark)
        assert r.returncode == 3 and "coord reject is the coordinator's" in r.stderr, r.stderr
    assert (repo / "b.txt").read_bytes() == before
    r = _as_agent(AGENT_A, str(BIN / "coord"), "status", repo=repo)
    assert r.returncode == 0, r.stderr  # reading passes


def test_a_worker_command_never_acts_on_another_worker_s_task(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: `worker failed B` from A's shell (no COORD_SESSION: the agent's id alone) took
    B's claim for its own and failed B's task."""
    repo, _sa, sb = two_tasks(make_repo, coord, worker, monkeypatch)
    for args in (["failed", "B", "--reason", "x"], ["done", "B"], ["blocked", "B", "--reason", "x"]):
        r = _as_agent(AGENT_A, str(BIN / "worker"), *args, repo=repo)
        assert r.returncode == 3 and "is claimed by" in r.stderr, (args, r.stderr)
    state = json.loads((repo / ".git" / "coord" / "state.json").read_text())
    assert state["tasks"]["B"]["state"] == "in_progress"
    assert state["tasks"]["B"]["claim"]["session"] == sb
    # The guard says so before it runs.
    code, _out, err = hook.run("pre", payload("PreToolUse", repo, "Bash",
                                              {"command": "worker failed B --reason x"}),
                               env_of())
    assert code == 2 and "a task this session does not hold" in err


def test_the_git_hooks_refuse_a_worker_s_shell_that_sets_the_coordinator_s_mark(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: `HUNKWISE_COORDINATOR=1 git commit -qam x` (run through code the guard cannot
    read) committed B's uncommitted edit from A's shell."""
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    ok(coord(repo, "install-hooks"))
    head = git(repo, "rev-parse", "HEAD").strip()
    r = _as_agent(AGENT_A, "git", "commit", "-qam", "x", repo=repo, hunkwise_coordinator=True)
    assert r.returncode != 0 and "coordinator" in r.stderr
    r = _as_agent(AGENT_A, "git", "stash", repo=repo, hunkwise_coordinator=True)
    assert r.returncode != 0
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert b"B's own line" in (repo / "b.txt").read_bytes()


def test_a_call_from_outside_the_tree_is_judged_in_the_tree_the_hook_guards(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """Was: with the call's cwd outside the tree (or in a nested repository) the worker was
    not known, and a Write onto B's file passed."""
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    ok(coord(repo, "install-hooks", "--agent", "claude"))
    doc = json.loads((repo / ".claude" / "settings.local.json").read_text())
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert str(repo) in command  # the tree it guards is written in
    for cwd in (tmp_path, Path("/")):
        body = json.dumps({"session_id": AGENT_A, "cwd": str(cwd), "tool_name": "Write",
                           "hook_event_name": "PreToolUse", "tool_use_id": "t9",
                           "tool_input": {"file_path": str(repo / "b.txt"), "content": "x"}})
        r = subprocess.run(command, shell=True, cwd=cwd, input=body.encode(),
                           capture_output=True, env=env_of(), check=False)
        assert r.returncode == 2 and b"outside the grants of A" in r.stderr, r.stderr


def test_a_write_that_puts_size_and_time_back_is_still_seen(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: rewriting B's edited file in place with the same size, then setting its mtime
    back (utime), hid the write from the check after the call."""
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    theirs = (repo / "b.txt").read_bytes()
    script = ("python3 -c \"import os; p='b.txt'; s=os.stat(p); "
              "open(p, 'r+').write('#' * (s.st_size - 1) + chr(10)); "
              "os.utime(p, ns=(s.st_atime_ns, s.st_mtime_ns))\"")
    e = env_of()
    code, _out, _err = hook.run("pre", payload("PreToolUse", repo, "Bash", {"command": "true"},
                                               use="u-warm"), e)
    hook.run("post", payload("PostToolUse", repo, "Bash", {"command": "true"}, use="u-warm"), e)
    # (the guard refuses such code as a line; run it as a script would, between the hooks)
    assert hook.run("pre", payload("PreToolUse", repo, "Bash", {"command": "./x"}, use="u2"),
                    e)[0] == 0
    subprocess.run(script, shell=True, cwd=repo, check=True)
    hook.run("post", payload("PostToolUse", repo, "Bash", {"command": "./x"}, use="u2"), e)
    assert (repo / "b.txt").read_bytes() == theirs


def test_the_hook_settings_a_shell_call_removes_are_put_back(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: code the guard could not read (or `git clean -x` under another name) removed
    .claude/settings.local.json, which git ignores: the check after the call never saw it,
    and the guard was off for good."""
    repo, _sa, _sb = two_tasks(make_repo, coord, worker, monkeypatch)
    ok(coord(repo, "install-hooks", "--agent", "claude", "--agent", "codex"))
    settings = repo / ".claude" / "settings.local.json"
    codex = repo / ".codex" / "hooks.json"
    kept = settings.read_bytes(), codex.read_bytes()
    e = env_of()
    body = {"command": "./cleanup"}
    assert hook.run("pre", payload("PreToolUse", repo, "Bash", body, use="u-s"), e)[0] == 0
    settings.unlink()  # what the call did, past the guard
    codex.write_text("{}\n")
    code, out, _err = hook.run("post", payload("PostToolUse", repo, "Bash", body, use="u-s"), e)
    assert code == 0 and "hook settings" in json.loads(out)["systemMessage"]
    assert (settings.read_bytes(), codex.read_bytes()) == kept
