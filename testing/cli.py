"""Running `coord` and `worker` as a test does, and reading what they answered."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testing.env import BIN


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> Any:
        return json.loads(self.stdout)


# The `coord` and `worker` fixtures: cli(repo, *args, **run_cli's keywords) -> Result.
Cli = Callable[..., Result]


def run_cli(tool: str, repo: Path, *args: str, session: str | None = None,
            env: dict[str, str] | None = None, json_out: bool = True, timeout: float = 120,
            process: bool = False) -> Result:
    """Run `coord` or `worker` in `repo`: in this process by default (`main(argv)`, as
    pre-commit's tests do), or as a real process with `process=True` for the process
    contract (exit codes of the executable, signals, kills, concurrency).
    HUNKWISE_TEST_PROCESS=1 runs every call as a process."""
    e: dict[str, str] = {}
    if session:
        e["COORD_SESSION"] = session
    if env:
        e.update(env)
    argv = [*args] + (["--json"] if json_out else [])
    if process or os.environ.get("HUNKWISE_TEST_PROCESS") == "1":
        p = subprocess.run([str(BIN / tool), *argv], cwd=repo, env={**os.environ, **e},
                           capture_output=True, text=True, timeout=timeout)
        return Result(p.returncode, p.stdout, p.stderr)
    return _run_here(tool, repo, argv, e)


def _run_here(tool: str, repo: Path, argv: list[str], env: dict[str, str]) -> Result:
    main: Callable[[list[str]], int]
    if tool == "coord":
        from hunkwise.coordinator.cli import main
    else:
        from hunkwise.worker.cli import main
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.environ.update(env)
    os.chdir(repo)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return Result(code, out.getvalue(), err.getvalue())


def _failed(r: Result) -> str:
    return f"exit {r.code}\nstdout: {r.stdout}\nstderr: {r.stderr}"


def ok(r: Result) -> Any:
    """The JSON document of a command that exited 0."""
    assert r.code == 0, _failed(r)
    return r.doc


def ok_doc_or_text(r: Result) -> Any:
    """What a command that exited 0 printed: its JSON document if it printed one (run with
    `--json`), else its text."""
    assert r.code == 0, _failed(r)
    return r.doc if r.stdout.lstrip().startswith("{") else r.stdout


def succeeded(r: Result) -> Result:
    """The result of a command that exited 0, itself."""
    assert r.code == 0, _failed(r)
    return r


def error_message(r: Result) -> str:
    """The message of the `{"error": ...}` document a failing command printed."""
    return str(r.doc["error"]["message"])


def assign_and_start(coord: Cli, worker: Cli, repo: Path, tid: str, grant: str,
                     edit: Callable[[], object] = lambda: None, *, check: str | None = None,
                     session: str | None = None) -> None:
    """Assign a task of one grant (and one check), start it (as `session`), then `edit`."""
    args = ["assign", tid, "--title", tid, "--expect", "e", "--write", grant]
    if check:
        args += ["--check", check]
    assert coord(repo, *args).code == 0
    assert worker(repo, "start", tid, *(["--session", session] if session else [])).code == 0
    edit()
