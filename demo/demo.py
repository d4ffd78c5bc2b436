#!/usr/bin/env python3
"""A guided run of hunkwise on a throw-away repository, with agents it starts itself.

The workers are started with `coord launch --agent demo`: the scripted stand-in shipped in
the package (hunkwise/coordinator/standin.py), which behaves as a launched agent does
without a model or an API key. It reads its first prompt, puts each edit to the agent
guard through the hook protocol, writes, and runs `worker done` (or exits without a
report, or hangs, as its script says). Four of them edit the same file at once, each in
its own lines; the coordinator commits each task's hunks alone, sends one back with
`request-changes --relaunch`, notices an agent that died without a report, then freezes
the release and verifies it while a busy worker's broken edit still sits in the tree.

    python demo/demo.py [--keep]      (make demo)

The repository is a temporary directory, removed at the end unless --keep.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")

APP = """\
def greet(name):
    return "hi " + name


def farewell(name):
    return "bye " + name


def shout(text):
    return text.upper()


def whisper(text):
    return text.lower()


def main():
    print(greet("world"))
    print(farewell("world"))
    print(shout("ok"))
"""

CHECK = """\
import app
assert "x" in app.greet("x"), app.greet("x")
print("check ok")
"""

# What each stand-in agent does, per launch of its task (coordinator/standin.py).
SCRIPTS: dict[str, Any] = {
    "greet": {
        "edits": [{"path": "app.py", "find": '"hi " + name', "replace": '"Hello " + name'}],
        "summary": "a polite greeting",
        "on_changes": {"edits": [{"path": "app.py", "find": '"Hello " + name',
                                  "replace": '"Hello, " + name'}],
                       "summary": "comma added, as asked"}},
    "farewell": {
        # The second edit is outside its grant: the guard refuses it, as it should.
        "edits": [{"path": "app.py", "find": '"bye " + name', "replace": '"Goodbye, " + name'},
                  {"path": "check_app.py", "append": "print('farewell was here')\n"}],
        "summary": "a warmer goodbye"},
    "shout": [
        # First launch: the agent dies before it reports (a crash, a lost terminal).
        {"edits": [{"path": "app.py", "find": "return text.upper()",
                    "replace": 'return text.upper() + "!"'}], "end": "exit"},
        # Second launch, after coord stop: its edit is still in the tree; it reports.
        {"summary": "shout() ends with !"}],
    "version": {"edits": [{"path": "version.py", "write": 'VERSION = "1.0"\n'}],
                "summary": "version module"},
    "whisper": {
        "edits": [{"path": "app.py", "find": "return text.lower()",
                   "replace": 'return text.lower() + "..."'},
                  {"path": "check_app.py", "find": '"x" in app.greet("x")',
                   "replace": '"HALF-DONE" in app.greet("x")'}],
        "end": "hang"},
}
# The line of app.py each task's commit may change, as the scripts above write it.
EXPECTED = {
    "greet": ('    return "hi " + name\n', '    return "Hello, " + name\n'),
    "farewell": ('    return "bye " + name\n', '    return "Goodbye, " + name\n'),
    "shout": ("    return text.upper()\n", '    return text.upper() + "!"\n'),
}


def say(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}", flush=True)


def note(text: str) -> None:
    print(textwrap.indent(textwrap.fill(text, 92), f"   {DIM}>{RESET} "), flush=True)


def run(repo: Path, *argv: str, ok: tuple[int, ...] = (0,), quiet: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COORD_SESSION"}
    shown = " ".join(a if " " not in a else repr(a) for a in argv)
    print(f"$ {shown}", flush=True)
    p = subprocess.run(list(argv), cwd=repo, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.stdout.strip() and not quiet:
        print(textwrap.indent(p.stdout.rstrip(), "    "), flush=True)
    if p.returncode not in ok:
        sys.exit(f"demo: unexpected exit {p.returncode} from {shown}")
    return p.stdout


def state(repo: Path) -> dict[str, Any]:
    out = subprocess.run(["coord", "status", "--json"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout
    return {t["id"]: t for t in json.loads(out)["tasks"]}


class Logs:
    """Each launched agent's log, shown line by line as the agent writes it."""

    def __init__(self) -> None:
        self.read: dict[str, int] = {}

    def show(self, logs: dict[str, str]) -> None:
        for tid, path in sorted(logs.items()):
            try:
                data = Path(path).read_text()
            except OSError:
                continue
            new = data[self.read.get(path, 0):]
            if "\n" not in new:
                continue
            new = new[:new.rindex("\n") + 1]
            self.read[path] = self.read.get(path, 0) + len(new)
            for line in new.splitlines():
                print(f"    {DIM}{tid:>8} |{RESET} {line.split('] ', 1)[-1]}", flush=True)


def follow(repo: Path, logs: Logs, tids: list[str], *, until: str, timeout: float = 120) -> None:
    """Show the agents' output as it comes until each task reached `until` (a state, or
    `exited`: its agent is gone)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = state(repo)
        logs.show({t: rows[t]["agent"]["log"] for t in tids if rows[t].get("agent")})
        if all(_reached(rows[t], until) for t in tids):
            return
        if time.monotonic() > deadline:
            sys.exit(f"demo: the agents of {', '.join(tids)} did not reach {until} in {timeout}s")
        time.sleep(0.1)


def _reached(row: dict[str, Any], until: str) -> bool:
    a = row.get("agent") or {}
    if until == "exited":
        return not a.get("alive", True)
    return bool(row["state"] == until and not a.get("alive", False))


def commit_of(repo: Path, tid: str) -> str:
    return subprocess.run(["git", "log", "--format=%H", f"--grep=Coord-Task: {tid}$", "-1"],
                          cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def prove_exact(repo: Path) -> list[str]:
    """Each accepted commit changes exactly its task's line of app.py, nothing else."""
    proofs = []
    for tid, (old, new) in EXPECTED.items():
        c = commit_of(repo, tid)
        before = subprocess.run(["git", "show", f"{c}^:app.py"], cwd=repo, capture_output=True,
                                text=True, check=True).stdout
        after = subprocess.run(["git", "show", f"{c}:app.py"], cwd=repo, capture_output=True,
                               text=True, check=True).stdout
        files = subprocess.run(["git", "diff", "--name-only", f"{c}^", c], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.split()
        if files != ["app.py"] or before.replace(old, new, 1) != after or old not in before:
            sys.exit(f"demo: {tid}'s commit {c[:10]} is not exactly its own change")
        proofs.append(f"{tid} ({c[:10]}): app.py, exactly `{new.strip()}`")
    c = commit_of(repo, "version")
    files = subprocess.run(["git", "diff", "--name-only", f"{c}^", c], cwd=repo,
                           capture_output=True, text=True, check=True).stdout.split()
    if files != ["version.py"]:
        sys.exit(f"demo: the version commit holds {files}")
    proofs.append(f"version ({c[:10]}): version.py alone")
    return proofs


def main(argv: list[str]) -> None:
    keep = "--keep" in argv
    for tool in ("coord", "worker"):
        if not shutil.which(tool):
            sys.exit(f"demo: no `{tool}` on PATH (run `make demo`)")
    repo = Path(tempfile.mkdtemp(prefix="hunkwise-demo-"))
    try:
        _demo(repo)
    finally:
        subprocess.run(["coord", "stop", "whisper"], cwd=repo, capture_output=True)
        if keep:
            print(f"\nThe repository stays at {repo} (--keep).")
        else:
            shutil.rmtree(repo, ignore_errors=True)
            print(f"\n{DIM}(removed {repo}; python demo/demo.py --keep leaves it){RESET}")


def _demo(repo: Path) -> None:
    env_git = ["git", "-c", "user.name=Demo", "-c", "user.email=demo@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "app.py").write_text(APP)
    (repo / "check_app.py").write_text(CHECK)
    (repo / "coord.toml").write_text('[verify]\ncommands = ["python3 check_app.py"]\n')
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*env_git, "commit", "-qm", "initial app"], cwd=repo, check=True)
    script = repo / ".git" / "demo-scripts.json"
    script.write_text(json.dumps(SCRIPTS, indent=1))
    os.environ["HUNKWISE_STANDIN_SCRIPT"] = str(script)
    print(f"{BOLD}hunkwise demo{RESET} in {repo}")

    say("Protect the shared tree: git hooks, the agent guard, and the skills where agents read them")
    run(repo, "coord", "install-hooks", "--agent", "claude")

    say("The coordinator hands out tasks with line-range and path grants")
    note("Expected warnings: each range ends where the next begins, so an insertion exactly "
         "between two of them would be ambiguous; assign says so, and grants them anyway.")
    run(repo, "coord", "assign", "greet", "--title", "Greet politely", "--expect",
        "greet() says Hello", "--write", "app.py:1-4", "--check", "python3 -c 'import app'")
    run(repo, "coord", "assign", "farewell", "--title", "Warmer goodbye", "--expect",
        "farewell() says Goodbye", "--write", "app.py:5-8")
    run(repo, "coord", "assign", "shout", "--title", "Shout louder", "--expect", "shout() adds !",
        "--write", "app.py:9-12")
    run(repo, "coord", "assign", "version", "--title", "Add a version module", "--expect",
        "version.py exists", "--write", "version.py")
    note("Expected refusal (exit 3): a task wanting all of app.py overlaps the three ranges "
         "already granted, so it is refused, naming the task and path that hold them.")
    run(repo, "coord", "assign", "--title", "Rewrite all of app.py", "--expect", "x",
        "--write", "app.py", ok=(3,))

    say("coord launch starts one agent per task, each claimed for its own session")
    note("`--agent demo` is the scripted stand-in; `--agent claude` or `--agent codex` start "
         "Claude Code or Codex the same way (docs/launch.md). Here each runs as a background "
         "process with its log under the state directory; with tmux there, in a window.")
    workers = ["greet", "farewell", "shout", "version"]
    run(repo, "coord", "launch", *workers, "--agent", "demo", "--no-tmux")
    note("Their edits, as they happen (each agent's log). Expected refusal: farewell's agent "
         "also tries check_app.py, outside its grant; the guard blocks that write.")
    logs = Logs()
    follow(repo, logs, workers, until="exited")
    run(repo, "git", "diff", "--stat")

    say("Dead or done? status tells them apart")
    note("Expected flag: shout's agent exited without a report (its script says so): it is "
         "flagged at once, with its log's tail, while the three that reported are 'reported', "
         "never stale claims.")
    run(repo, "coord", "status", ok=(0,))
    run(repo, "coord", "stop", "shout")
    note("coord stop ended nothing (the agent was gone) and released the claim with a "
         "retroactive handoff; a new launch resumes it, its edit still in the tree.")
    run(repo, "coord", "launch", "shout", "--agent", "demo", "--no-tmux")
    follow(repo, logs, ["shout"], until="reported")

    say("At a safe checkpoint the coordinator reads the inbox and commits each task alone")
    run(repo, "coord", "inbox")
    run(repo, "coord", "next")
    note("The greeting lacks a comma: send it back. --relaunch starts its agent again with "
         "the note first in its prompt; its session gets a CHANGES_REQUESTED signal.")
    run(repo, "coord", "request-changes", "greet", "--note", "write 'Hello, ' with a comma",
        "--relaunch")
    follow(repo, logs, ["greet"], until="reported")
    for tid in ("farewell", "shout", "version", "greet"):
        run(repo, "coord", "next", quiet=True)
        run(repo, "coord", "accept", tid)

    say("Each commit holds exactly one task's lines")
    run(repo, "git", "log", "--reverse", "-p", "--format=%n%h %s", "HEAD~4..HEAD", "--", "app.py")
    proofs = prove_exact(repo)

    say("A new batch: one agent is still busy when the release freezes")
    run(repo, "coord", "assign", "whisper", "--title", "Quieter whisper", "--expect",
        "whisper() adds ...", "--write", "app.py:13-16", "--write", "check_app.py")
    run(repo, "coord", "launch", "whisper", "--agent", "demo", "--no-tmux")
    deadline = time.monotonic() + 60
    while "HALF-DONE" not in (repo / "check_app.py").read_text():
        logs.show({"whisper": state(repo)["whisper"]["agent"]["log"]})
        if time.monotonic() > deadline:
            sys.exit("demo: the whisper agent made no edit")
        time.sleep(0.1)
    logs.show({"whisper": state(repo)["whisper"]["agent"]["log"]})
    note("Expected refusal (exit 3): whisper is in progress, so the freeze refuses and names "
         "it; --defer-running moves it to the next batch. Its half-done edit breaks "
         "check_app.py in the shared tree.")
    run(repo, "coord", "freeze", ok=(3,))
    run(repo, "coord", "freeze", "--defer-running")
    run(repo, "git", "diff", "--stat")
    note("verify runs [verify] commands on exactly the frozen commit, in a clean checkout: "
         "the broken edit in the shared tree cannot pollute the proof.")
    run(repo, "coord", "verify")
    run(repo, "coord", "stop", "whisper")
    run(repo, "coord", "thaw")

    say("What this run proved")
    for p in proofs:
        print(f"  - commit of {p}")
    print("  - the guard refused farewell's write outside its grant; the ownership check "
          "refused an overlapping task")
    print("  - an agent that died without a report was flagged at once, stopped and resumed")
    print("  - request-changes --relaunch sent the greeting back to a new agent with the note")
    print("  - verify passed on exactly the frozen commit while the tree held a broken, "
          "deferred edit")
    print(f"\n{BOLD}done.{RESET}")


if __name__ == "__main__":
    main(sys.argv[1:])
