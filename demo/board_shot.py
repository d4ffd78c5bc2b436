#!/usr/bin/env python3
"""A screenshot of `coord board` for the README: eight tasks in mixed states.

    make board-shot            # writes build/board.png (docs/board.png is the tracked copy)
    .venv/bin/python demo/board_shot.py [--out PATH] [--keep]

Builds a throw-away repository with the real `coord` and `worker` commands (one task
accepted, one ready for review, one sent back, one blocked on a decision, two in progress
of which one with a stale claim, one assigned, one rejected), serves `coord board` on a
free loopback port and has headless Chromium (Debian's `chromium`) photograph the page.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1"]

APP = "".join(f"def step_{i}(x):\n    return x + {i}\n\n\n" for i in range(1, 9))
FILES = {
    "app.py": APP,
    "config.py": "import json\n\n\ndef load(path):\n    return json.load(open(path))\n",
    "upload.py": "def upload(blob, send):\n    return send(blob)\n",
    "cache.py": "CACHE = {}\n",
    "metrics.py": "",
    "sessions.py": "STORE = {}\n",
    "README.md": "# shop\n",
    "coord.toml": "[claims]\nttl_seconds = 2\n",
}


class Scene:
    def __init__(self, repo: Path, env: dict[str, str]) -> None:
        self.repo, self.env = repo, env

    def run(self, *argv: str, session: str | None = None, ok: tuple[int, ...] = (0,)) -> Any:
        env = dict(self.env)
        if session:
            env["COORD_SESSION"] = session
        p = subprocess.run([*argv, "--json"], cwd=self.repo, env=env, capture_output=True,
                           text=True, timeout=120)
        if p.returncode not in ok:
            sys.exit(f"board-shot: {' '.join(argv)} exited {p.returncode}: "
                     f"{p.stderr.strip() or p.stdout.strip()}")
        return json.loads(p.stdout) if p.stdout.strip() else {}

    def coord(self, *argv: str, **kw: Any) -> Any:
        return self.run("coord", *argv, **kw)

    def worker(self, *argv: str, **kw: Any) -> Any:
        return self.run("worker", *argv, **kw)

    def edit(self, path: str, old: str, new: str) -> None:
        f = self.repo / path
        text = f.read_text()
        f.write_text(text.replace(old, new, 1) if old else text + new)


def build(repo: Path, env: dict[str, str]) -> Scene:
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    for path, text in FILES.items():
        (repo / path).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "shop: first cut"], cwd=repo, check=True, env=env)
    s = Scene(repo, env)
    s.coord("init")

    def sess(name: str) -> str:
        return f"sess-20260301-0900-{name}@laptop"

    def assign(tid: str, title: str, *grants: str) -> None:
        s.coord("assign", tid, "--title", title, "--expect", title.lower(),
                *[a for g in grants for a in ("--write", g)])

    # A claim that will go stale: taken while claims live 2 s, never beaten again.
    assign("session-store", "Move sessions to SQLite", "sessions.py")
    s.worker("start", "session-store", session=sess("worker-6"))
    s.edit("sessions.py", "STORE = {}", "STORE = None  # sqlite3 next")
    (repo / "coord.toml").write_text("[claims]\nttl_seconds = 1800\n")
    s.coord("commit", "coord.toml", "-m", "Claims live 30 minutes")

    assign("parse-config", "Parse config with tomllib", "config.py")
    assign("cli-help", "Friendlier step help", "app.py:1-8")
    assign("upload-retry", "Retry failed uploads with backoff", "upload.py")
    assign("cache-flag", "Ship the new cache behind a flag", "cache.py")
    assign("metrics", "Export Prometheus metrics", "metrics.py", "app.py:13-16")
    assign("docs-board", "Document the board in the README", "README.md")
    assign("step-rename", "Rename step_8 to finish", "app.py:29-31")

    # Accepted: done, read at a checkpoint, committed.
    s.worker("start", "parse-config", session=sess("worker-1"))
    s.edit("config.py", "import json\n", "import tomllib\n")
    s.edit("config.py", "json.load(open(path))", 'tomllib.load(open(path, "rb"))')
    s.worker("done", "parse-config", "--summary", "tomllib instead of json",
             "--commit-message", "Parse config with tomllib", session=sess("worker-1"))
    s.coord("next")
    s.coord("accept", "parse-config")
    # Sent back with a note.
    s.worker("start", "upload-retry", session=sess("worker-3"))
    s.edit("upload.py", "    return send(blob)\n", "    for _ in range(3):\n"
           "        if send(blob):\n            return True\n    return False\n")
    s.worker("done", "upload-retry", "--summary", "three tries", session=sess("worker-3"))
    s.coord("next")
    s.coord("request-changes", "upload-retry", "--note", "back off between tries (1 s, 2 s, 4 s)")
    # Blocked on a decision for the supervisor.
    s.worker("start", "cache-flag", session=sess("worker-4"))
    s.edit("cache.py", "CACHE = {}\n", "CACHE = {}\nENABLED = False\n")
    s.worker("ask", "cache-flag", "--kind", "deploy", "--question",
             "Turn the new cache on for everyone, or behind HUNKWISE_CACHE=1 first?",
             session=sess("worker-4"))
    s.worker("blocked", "cache-flag", "--reason", "waiting for the deploy decision",
             session=sess("worker-4"))
    # Rejected.
    s.worker("start", "step-rename", session=sess("worker-7"))
    s.coord("reject", "step-rename", "--note", "step_8 is public API; keep the name")
    # In progress, with a question of its own.
    s.worker("start", "metrics", session=sess("worker-5"))
    s.edit("metrics.py", "", "from prometheus_client import Counter\n")
    s.worker("ask", "metrics", "--kind", "architecture", "--question",
             "One /metrics endpoint per worker, or one aggregated by the coordinator?",
             session=sess("worker-5"))
    # Ready for review, last so it waits in the inbox.
    s.worker("start", "cli-help", session=sess("worker-2"))
    s.edit("app.py", "def step_1(x):\n", 'def step_1(x):\n    """Add one."""\n')
    s.worker("done", "cli-help", "--summary", "docstrings for the steps",
             "--commit-message", "Document step_1", session=sess("worker-2"))
    # docs-board stays assigned.
    return s


def wait_until(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := pred()):
        if time.monotonic() > deadline:
            sys.exit(f"board-shot: timed out waiting for {what}")
        time.sleep(0.1)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "board.png")
    ap.add_argument("--size", default="1280,1100", help="window WIDTH,HEIGHT (1280,1100)")
    ap.add_argument("--keep", action="store_true", help="keep the repository and print its path")
    args = ap.parse_args()
    chromium = os.environ.get("HUNKWISE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(chromium, os.X_OK):
        sys.exit("board-shot: no chromium (apt-get install chromium)")
    for tool in ("coord", "worker"):
        if not shutil.which(tool):
            sys.exit(f"board-shot: no `{tool}` on PATH (run `make board-shot`)")
    root = Path(tempfile.mkdtemp(prefix="hunkwise-board-shot-"))
    home = root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "COORD_"))}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
                "GIT_AUTHOR_NAME": "Shop Dev", "GIT_AUTHOR_EMAIL": "dev@shop.example",
                "GIT_COMMITTER_NAME": "Shop Dev", "GIT_COMMITTER_EMAIL": "dev@shop.example",
                "TZ": "UTC"})
    repo = root / "shop"
    board = None
    try:
        s = build(repo, env)
        wait_until(lambda: any(t["id"] == "session-store" and t["stale"]
                               for t in s.coord("status")["tasks"]), 30, "the stale claim")
        board = subprocess.Popen(["coord", "board", "--port", "0"], cwd=repo, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert board.stderr is not None
        line = board.stderr.readline()
        if "board: ready at " not in line:
            sys.exit(f"board-shot: coord board said {line!r}")
        url = line.split("board: ready at ", 1)[1].strip()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        p = subprocess.run([chromium, *FLAGS, f"--user-data-dir={root / 'profile'}",
                            f"--window-size={args.size}", "--virtual-time-budget=1500",
                            f"--screenshot={args.out.resolve()}", url],
                           capture_output=True, text=True, timeout=120, env={**env, "HOME": str(home)})
        if p.returncode != 0 or not args.out.exists():
            sys.exit(f"board-shot: chromium failed: {p.stderr[-1500:]}")
        print(f"board-shot: {args.out} ({args.out.stat().st_size // 1024} KB)")
    finally:
        if board is not None:
            board.send_signal(signal.SIGINT)
            board.wait(timeout=30)
        if args.keep:
            print(f"board-shot: repository kept at {repo}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
