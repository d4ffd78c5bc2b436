"""The git processes a command starts, counted as bench/startup.py counts them: the command
runs as a real process under GIT_TRACE2_PERF, and every git it starts itself is listed."""

from __future__ import annotations

import re
from pathlib import Path

from testing.cli import ok, run_cli


class Traced:
    """Runs commands as processes and lists the git commands each one started."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.n = 0

    def __call__(self, tool: str, repo: Path, *args: str) -> list[str]:
        self.n += 1
        trace = self.where / f"trace-{self.n}"
        ok(run_cli(tool, repo, *args, process=True, env={"GIT_TRACE2_PERF": str(trace)}))
        started = []
        for line in trace.read_text(errors="replace").splitlines() if trace.exists() else []:
            p = [x.strip() for x in line.split("|")]
            if len(p) >= 9 and p[1] == "d0" and p[3] == "start":
                started.append(re.sub(r"^git (-c \S+ )*", "", p[8]))
        return started


def traced(tmp_path: Path) -> Traced:
    where = tmp_path / "traces"
    where.mkdir()
    return Traced(where)


def named(started: list[str], sub: str) -> list[str]:
    """The commands of `started` that run git subcommand `sub`."""
    return [s for s in started if s.split(" ")[0] == sub]
