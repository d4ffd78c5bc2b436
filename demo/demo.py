#!/usr/bin/env python3
"""A guided run of hunkwise on a throw-away repository.

Three simulated workers edit the same file (each in its own line range) and a fourth
owns a new module; they report into the inbox; the coordinator reads it at its own
checkpoints, commits each task's hunks alone, then freezes the release and verifies it
while a deferred worker's broken edit still sits in the shared tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

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


def say(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}", flush=True)


def run(repo: Path, *argv: str, session: str | None = None, ok: tuple[int, ...] = (0,)) -> str:
    env = dict(os.environ)
    env.pop("COORD_SESSION", None)
    if session:
        env["COORD_SESSION"] = session
    shown = " ".join(a if " " not in a else repr(a) for a in argv)
    who = f"{DIM}[{session.split('-')[-1]}]{RESET} " if session else ""
    print(f"{who}$ {shown}", flush=True)
    p = subprocess.run(list(argv), cwd=repo, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    out = p.stdout.rstrip()
    if out:
        print(textwrap.indent(out, "    "), flush=True)
    if p.returncode not in ok:
        sys.exit(f"demo: unexpected exit {p.returncode} from {shown}")
    return p.stdout


def session_of(start_output: str) -> str:
    return next(line.split(": ", 1)[1] for line in start_output.splitlines()
                if line.startswith("session: "))


def edit(repo: Path, path: str, old: str, new: str) -> None:
    f = repo / path
    f.write_text(f.read_text().replace(old, new, 1))


def main() -> None:
    for tool in ("coord", "worker"):
        if not shutil.which(tool):
            sys.exit(f"demo: no `{tool}` on PATH (run `make demo`)")
    repo = Path(tempfile.mkdtemp(prefix="hunkwise-demo-"))
    env_git = ["git", "-c", "user.name=Demo", "-c", "user.email=demo@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "app.py").write_text(APP)
    (repo / "check_app.py").write_text(CHECK)
    (repo / "coord.toml").write_text('[verify]\ncommands = ["python3 check_app.py"]\n')
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*env_git, "commit", "-qm", "initial app"], cwd=repo, check=True)
    print(f"{BOLD}hunkwise demo{RESET} in {repo}")

    say("Protect the shared tree: git hooks and an agent guard")
    run(repo, "coord", "install-hooks", "--agent", "claude")

    say("The coordinator hands out tasks with line-range and path grants")
    run(repo, "coord", "assign", "greet", "--title", "Greet politely", "--expect",
        "greet() says Hello", "--write", "app.py:1-3", "--check", "python3 -c 'import app'")
    run(repo, "coord", "assign", "farewell", "--title", "Warmer goodbye", "--expect",
        "farewell() says Goodbye", "--write", "app.py:4-7")
    run(repo, "coord", "assign", "--title", "Shout louder", "--expect", "shout() adds !",
        "--write", "app.py:8-11")
    run(repo, "coord", "assign", "--title", "Add a version module", "--expect",
        "version.py exists", "--write", "version.py")
    run(repo, "coord", "assign", "--title", "Rewrite all of app.py", "--expect", "x",
        "--write", "app.py", ok=(3,))

    say("Workers claim their tasks (each gets a session id)")
    s = {}
    for tid in ("greet", "farewell", "task-001", "task-002"):
        s[tid] = session_of(run(repo, "worker", "start", tid, "--role", "build"))

    say("The greeting is user-facing: the coordinator asks for a review audit")
    run(repo, "coord", "audit", "greet", "--roles", "review")

    say("They edit the same working tree at once, and never stage or commit")
    edit(repo, "app.py", '"hi " + name', '"Hello, " + name')
    edit(repo, "app.py", '"bye " + name', '"Goodbye, " + name + "!"')
    (repo / "version.py").write_text('VERSION = "1.0"\n')
    run(repo, "git", "status", "--short")

    say("A worker about to lose its context leaves a checkpoint, then resumes from it")
    run(repo, "worker", "checkpoint", "farewell", "--next",
        "resume app.py at farewell() — context: wording agreed with the product owner",
        session=s["farewell"])
    run(repo, "worker", "start", "farewell", session=s["farewell"])

    say("Another worker hands its task over to any build session")
    run(repo, "worker", "handoff", "task-001", "--to", "build@*", "--next",
        "make shout() end with an exclamation mark", session=s["task-001"])
    s["task-001"] = session_of(run(repo, "worker", "start", "task-001", "--role", "build"))
    edit(repo, "app.py", "return text.upper()", 'return text.upper() + "!"')

    say("Each worker drops a report into the inbox and stops")
    run(repo, "worker", "done", "greet", "--summary", "polite greeting",
        "--commit-message", "Greet with Hello", session=s["greet"])
    run(repo, "worker", "done", "farewell", "--commit-message", "Say Goodbye", session=s["farewell"])
    run(repo, "worker", "done", "task-001", "--commit-message", "Shout with !", session=s["task-001"])
    run(repo, "worker", "done", "task-002", "--commit-message", "Add version module",
        session=s["task-002"])
    print("    (the version worker spots a mistake while its report still waits: it amends it)")
    (repo / "version.py").write_text('VERSION = "1.0.0"\n')
    run(repo, "worker", "done", "task-002", "--commit-message", "Add version module",
        session=s["task-002"])

    say("A careless worker tries whole-tree git commands")
    run(repo, "git", "stash", ok=(1, 128))
    run(repo, "git", "commit", "-am", "sweep everything up", ok=(1, 128))
    run(repo, "git", "reset", "--hard", "-q", ok=(0, 128))
    run(repo, "git", "status", "--short")
    print("    (reset --hard rewrites the files before it moves HEAD: the hook refused the move,\n"
          "     but the three tasks' reported edits in app.py are gone)")

    say("The coordinator's status shows what was lost; restore brings it back from the snapshots")
    run(repo, "coord", "status")
    for tid in ("greet", "farewell", "task-001"):
        run(repo, "coord", "restore", tid)
    run(repo, "git", "diff", "--stat")

    say("At a safe checkpoint the coordinator reads the inbox")
    run(repo, "coord", "inbox")
    run(repo, "coord", "next")
    print("    (the exact patch accept would commit for this task, out of the shared tree:)")
    run(repo, "coord", "diff", "greet")
    run(repo, "coord", "accept", "greet", ok=(1,))
    print("    (a reviewer starts a session of its own, reads the task's diff and answers)")
    reviewer = session_of(run(repo, "worker", "start", "--role", "review"))
    run(repo, "coord", "diff", "greet", "--stat")
    run(repo, "worker", "review", "greet", "--verdict", "approve", "--notes",
        "wording reads well", session=reviewer)
    run(repo, "coord", "accept", "greet")
    for tid in ("farewell", "task-001", "task-002"):
        run(repo, "coord", "next")
        run(repo, "coord", "accept", tid)

    say("Each commit holds exactly one task's lines")
    run(repo, "git", "log", "--reverse", "-p", "--format=%n%h %s%n%b", "HEAD~4..HEAD", "--", "app.py")
    run(repo, "coord", "index")
    run(repo, "git", "status", "--short")

    say("A new batch: one worker is still busy when the release freezes")
    run(repo, "coord", "assign", "whisper", "--title", "Quieter whisper", "--expect",
        "whisper() adds ...", "--write", "app.py:12-15", "--write", "check_app.py")
    s["whisper"] = session_of(run(repo, "worker", "start", "whisper", "--role", "build"))

    say("A fork only a human can decide: ask, report blocked, the supervisor answers, resume")
    out = run(repo, "worker", "ask", "whisper", "--question", "Should whisper() end with '...'?",
              "--kind", "scope", session=s["whisper"])
    dec = out.split()[1].rstrip(";")
    run(repo, "worker", "blocked", "whisper", "--reason", f"waiting for {dec}", session=s["whisper"])
    run(repo, "coord", "next")
    run(repo, "coord", "decisions")
    run(repo, "coord", "decide", dec, "--answer", "Yes, three dots")
    run(repo, "worker", "start", "whisper", session=s["whisper"])
    edit(repo, "check_app.py", '"x" in app.greet("x")', '"HALF-DONE" in app.greet("x")')
    run(repo, "coord", "freeze", ok=(3,))
    run(repo, "coord", "freeze", "--defer-running")
    print("    (the deferred worker is told to stop, through its signals:)")
    run(repo, "worker", "signals", session=s["whisper"])
    run(repo, "worker", "done", "whisper", session=s["whisper"], ok=(3,))

    say("verify runs the regression on exactly the frozen commit, not the shared tree")
    run(repo, "git", "diff", "--stat")
    run(repo, "coord", "verify")
    run(repo, "coord", "thaw")
    run(repo, "coord", "status")
    print(f"\n{BOLD}done.{RESET} The repository stays at {repo} for a look around.")


if __name__ == "__main__":
    main()
