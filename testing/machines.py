"""Machines coordinating through a git remote: a bare repository in a temp dir is the
remote, clones are machines (told apart by HUNKWISE_MACHINE, each with its own state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testing.cli import Cli, Result, ok
from testing.repo import MakeRepo, git, numbered, set_line

REVIEWER = "sess-20260101-0900-review@laptop"
BUILDER = "sess-20260101-0900-build@desktop"
# The seed's coord.toml: sync through the remote named origin.
REMOTE_TOML = '[remote]\nname = "origin"\n'


class Machines:
    def __init__(self, tmp: Path, make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
        seed = make_repo({"app.py": numbered(20), "coord.toml": REMOTE_TOML})
        self.remote = tmp / "remote.git"
        git(tmp, "clone", "-q", "--bare", str(seed), str(self.remote))
        self.tmp, self._coord, self._worker = tmp, coord, worker
        self.repos: dict[str, Path] = {}

    def clone(self, machine: str) -> Path:
        path = self.tmp / machine
        git(self.tmp, "clone", "-q", str(self.remote), str(path))
        git(path, "config", "user.name", "Test Author")
        git(path, "config", "user.email", "author@example.com")
        self.repos[machine] = path
        return path

    def coord(self, machine: str, *args: str, **kw: Any) -> Result:
        kw.setdefault("env", {})["HUNKWISE_MACHINE"] = machine
        return self._coord(self.repos[machine], *args, **kw)

    def worker(self, machine: str, *args: str, **kw: Any) -> Result:
        kw.setdefault("env", {})["HUNKWISE_MACHINE"] = machine
        return self._worker(self.repos[machine], *args, **kw)


def desktop_and_laptop(tmp: Path, make_repo: MakeRepo, coord: Cli, worker: Cli) -> Machines:
    """Two machines, `desktop` and `laptop`, each a clone of the remote."""
    m = Machines(tmp, make_repo, coord, worker)
    m.clone("desktop")
    m.clone("laptop")
    return m


def built_task(m: Machines) -> None:
    """task-001 on the desktop: edited by a desktop build session and reported."""
    ok(m.coord("desktop", "assign", "--title", "Greet", "--expect", "hello",
               "--write", "app.py:1-5"))
    ok(m.worker("desktop", "start", "task-001", "--session", BUILDER))
    set_line(m.repos["desktop"], "app.py", 2, "hello")
    ok(m.worker("desktop", "done", "task-001", "--session", BUILDER, "--commit-message", "Greet"))
