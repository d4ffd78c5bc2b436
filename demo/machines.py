#!/usr/bin/env python3
"""Two machines, one run: a desktop and a laptop coordinate through a local bare remote.

The desktop coordinates. A build session there finishes a task and asks for a review;
the laptop's reviewer reads the exact diff from the pushed snapshot and approves; the
desktop accepts. Then a second task is handed over half-done: the laptop takes it with
its uncommitted edits, finishes it, and its report comes back into the desktop's tree,
replacing the desktop's copy of the handed-over edits, and is accepted as one exact commit.
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
"""

BUILD_D = "sess-20260101-0900-build@desktop"
BUILD_L = "sess-20260101-1800-build@laptop"
REVIEW_L = "sess-20260101-0930-review@laptop"


def say(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}", flush=True)


def run(repo: Path, machine: str, *argv: str, session: str | None = None,
        ok: tuple[int, ...] = (0,)) -> str:
    env = dict(os.environ)
    env.pop("COORD_SESSION", None)
    env["HUNKWISE_MACHINE"] = machine
    if session:
        env["COORD_SESSION"] = session
    shown = " ".join(a if " " not in a else repr(a) for a in argv)
    print(f"{DIM}[{machine}]{RESET} $ {shown}", flush=True)
    p = subprocess.run(list(argv), cwd=repo, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    out = p.stdout.rstrip()
    if out:
        print(textwrap.indent(out, "    "), flush=True)
    if p.returncode not in ok:
        sys.exit(f"demo: unexpected exit {p.returncode} from {shown} on the {machine}")
    return p.stdout


def edit(repo: Path, path: str, old: str, new: str) -> None:
    f = repo / path
    text = f.read_text()
    assert old in text, (path, old)
    f.write_text(text.replace(old, new, 1))


def git(repo: Path, *argv: str) -> str:
    return subprocess.run(["git", "-c", "user.name=Demo", "-c", "user.email=demo@example.com",
                           *argv], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def main() -> None:
    for tool in ("coord", "worker"):
        if not shutil.which(tool):
            sys.exit(f"demo: no `{tool}` on PATH (run `make demo-machines`)")
    top = Path(tempfile.mkdtemp(prefix="hunkwise-machines-"))
    seed, remote = top / "seed", top / "remote.git"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    (seed / "app.py").write_text(APP)
    (seed / "coord.toml").write_text('[remote]\nname = "origin"\n')
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "initial app; hunkwise syncs through origin")
    git(top, "clone", "-q", "--bare", str(seed), str(remote))
    desk, lap = top / "desktop", top / "laptop"
    for path in (desk, lap):
        git(top, "clone", "-q", str(remote), str(path))
    print(f"{BOLD}hunkwise across machines{RESET}: remote {remote}\n"
          f"desktop {desk}\nlaptop  {lap}\n"
          "(each clone is one machine: HUNKWISE_MACHINE names it; [remote] name in "
          "coord.toml makes the commands sync by themselves)")

    say("Desktop: the coordinator assigns two tasks; a build session finishes the first")
    run(desk, "desktop", "coord", "assign", "greet", "--title", "Greet politely", "--expect",
        "greet() says Hello", "--write", "app.py:1-3")
    run(desk, "desktop", "coord", "assign", "shout", "--title", "Shout louder", "--expect",
        "shout() ends with !", "--write", "app.py:8-10")
    run(desk, "desktop", "worker", "start", "greet", session=BUILD_D)
    edit(desk, "app.py", '"hi " + name', '"Hello, " + name')
    run(desk, "desktop", "worker", "done", "greet", "--commit-message", "Greet with Hello",
        session=BUILD_D)
    run(desk, "desktop", "coord", "audit", "greet", "--roles", "review")
    run(desk, "desktop", "coord", "next")

    say("Laptop: the reviewer sees the request and the exact diff, from the pushed snapshot")
    run(lap, "laptop", "worker", "start", "--role", "review", session=REVIEW_L)
    run(lap, "laptop", "worker", "signals", session=REVIEW_L)
    run(lap, "laptop", "coord", "diff", "greet")
    run(lap, "laptop", "git", "status", "--short")
    print("    (the laptop's tree is untouched: the diff came from the desktop's records)")
    run(lap, "laptop", "worker", "review", "greet", "--verdict", "approve", "--notes",
        "reads well", session=REVIEW_L)

    say("Desktop: the verdict arrives with the next sync and gates accept")
    run(desk, "desktop", "coord", "next")
    run(desk, "desktop", "coord", "accept", "greet")
    run(desk, "desktop", "git", "push", "-q", "origin", "HEAD")

    say("Desktop: the second task is half done at the end of the day; it is handed over")
    run(desk, "desktop", "worker", "start", "shout", session=BUILD_D)
    edit(desk, "app.py", "def shout(text):", "def shout(text: str) -> str:")
    run(desk, "desktop", "worker", "handoff", "shout", "--to", "build@laptop", "--next",
        "resume app.py at shout() - context: add the exclamation mark", session=BUILD_D)
    run(desk, "desktop", "git", "diff")
    print("    (the desktop keeps its copy of the handed-over edit in its tree)")

    say("Laptop: a build session takes it over; exactly those edits come into its tree")
    run(lap, "laptop", "git", "pull", "-q", "--ff-only")
    run(lap, "laptop", "worker", "start", "shout", session=BUILD_L)
    run(lap, "laptop", "git", "diff")

    say("Desktop: the supervisor sees the laptop's claim, with its machine")
    run(desk, "desktop", "coord", "sync")
    run(desk, "desktop", "coord", "index")

    say("Laptop: work continues there; the report and its snapshot travel back")
    edit(lap, "app.py", "return text.upper()", 'return text.upper() + "!"')
    run(lap, "laptop", "worker", "done", "shout", "--commit-message", "Shout with !",
        session=BUILD_L)

    say("Desktop: coord next brings exactly the task's hunks into the shared tree")
    run(desk, "desktop", "coord", "next")
    print("    (the report replaced the desktop's copy of the task: each line once)")
    run(desk, "desktop", "git", "diff")
    run(desk, "desktop", "coord", "accept", "shout")

    say("The commit holds exactly the task's hunks, typed on two machines")
    run(desk, "desktop", "git", "show", "--format=%h %s%n%b", "HEAD")
    run(desk, "desktop", "git", "status", "--short")
    run(desk, "desktop", "git", "push", "-q", "origin", "HEAD")
    run(desk, "desktop", "coord", "sync")

    say("Laptop: the task is accepted; its copy there gives way to the commit")
    run(lap, "laptop", "worker", "sync")
    run(lap, "laptop", "coord", "status", "--brief")
    print("    (the accepted task's copy is now an unowned change here: discard it, restorably,\n"
          "     and pull the commit that holds the same lines)")
    run(lap, "laptop", "coord", "discard", "app.py")
    run(lap, "laptop", "git", "pull", "-q", "--ff-only")
    run(lap, "laptop", "git", "log", "--oneline", "-3")
    run(lap, "laptop", "git", "status", "--short")
    run(lap, "laptop", "git", "for-each-ref", "refs/hunkwise/remote/", "refs/hunkwise/m/")
    print(f"\n{BOLD}done.{RESET} Everything stays in {top} for a look around.")


if __name__ == "__main__":
    main()
