"""The hermetic seal and the repository fixtures every test stands on.

Tests use real git in temporary repositories. HOME, XDG and git's system config are
pointed away from the user's, and author, committer and dates are pinned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def pytest_configure(config: pytest.Config) -> None:
    """Children get SIGINT as a terminal or a CI cancel sends it, whatever ran the suite.

    A script that starts `make test` in the background without job control (`make test &`
    in a plain shell script) starts it with SIGINT ignored, and an ignored signal stays
    ignored across fork and exec: every `coord watch` / `coord board` / `coord verify` a
    test interrupts would then ignore the SIGINT the test sends. A handled signal is reset
    to its default at exec, so handling it here gives every child the default again.
    """
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the CPUs this process may use.

    A good share of the suite waits rather than computes (on real processes, locks, the
    backoff of commands retrying against a writer), and a spare worker runs meanwhile.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return cpus + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests marked slow first, shared out among the xdist workers.

    xdist (`--dist worksteal`) hands each worker a run of the collection in this order,
    and a worker that ran out takes the last tests of another's run. So each run starts
    with its share of the slow tests (dealt in turn) and goes on with the fast ones in
    file order: the suite ends on short tests on every worker, instead of one worker
    running a long test alone at the end.
    """
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    fast = [item for item in items if item.get_closest_marker("slow") is None]
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    sizes, left = [], len(items)
    for i in range(workers):  # as xdist splits the collection among idle workers
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    runs: list[list[pytest.Item]] = [[] for _ in sizes]
    for i, item in enumerate(slow):
        runs[i % workers].append(item)
    for run, size in zip(runs, sizes, strict=True):
        while len(run) < size and fast:
            run.append(fast.pop(0))
    items[:] = [item for run in runs for item in run] + fast


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith(("GIT_", "COORD_")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.com")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    yield
    # A test that calls the core directly (not through a command, which closes them at its
    # end) leaves this process's `cat-file` readers open: end them, so no test inherits
    # another's readers, and the suite's processes do not pile up.
    git_module = sys.modules.get("hunkwise.shared.git")
    if git_module is not None:
        git_module.close_readers()


def git(repo: Path, *args: str, input: bytes | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode("utf-8", "surrogateescape")


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def write(repo: Path, path: str, content: str | bytes) -> Path:
    p = repo / path
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    p.write_bytes(content)
    return p


def numbered(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))


def set_line(repo: Path, path: str, n: int, text: str) -> None:
    p = repo / path
    rows = p.read_bytes().split(b"\n")
    rows[n - 1] = text.encode()
    p.write_bytes(b"\n".join(rows))


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[..., Path]:
    """make_repo({"path": content, ...}) -> a repo with one commit holding those files."""
    counter = iter(range(1000))

    def make(files: dict[str, str | bytes] | None = None, *, commit: bool = True) -> Path:
        repo = tmp_path / f"repo{next(counter)}"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        # What `git config user.name/user.email` would write, without two more processes.
        with open(repo / ".git" / "config", "a") as config:
            config.write("[user]\n\tname = Test Author\n\temail = author@example.com\n")
        for path, content in (files or {}).items():
            write(repo, path, content)
        if commit:
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "--allow-empty", "-m", "init")
        return repo

    return make


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> Any:
        return json.loads(self.stdout)


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
    import contextlib
    import io

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


@pytest.fixture
def coord() -> Callable[..., Result]:
    return lambda repo, *a, **k: run_cli("coord", repo, *a, **k)


@pytest.fixture
def worker() -> Callable[..., Result]:
    return lambda repo, *a, **k: run_cli("worker", repo, *a, **k)


class Lines:
    """A process's output read line by line in the background, to wait for a condition
    (a readiness line, an event) instead of sleeping for a fixed time."""

    def __init__(self, stream: Any) -> None:
        import queue
        import threading

        self.seen: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            for raw in iter(stream.readline, b""):
                self._q.put(raw.decode("utf-8", "replace"))
            self._q.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def wait_for(self, needle: str, timeout: float = 60.0) -> str:
        import queue
        import time

        deadline = time.monotonic() + timeout
        for line in self.seen:
            if needle in line:
                return line
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line with {needle!r} in {timeout}s; saw {self.seen}")
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"output ended without {needle!r}; saw {self.seen}")
            self.seen.append(line)
            if needle in line:
                return line


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def age_claims(repo: Path, *task_ids: str) -> None:
    """Make these tasks' claims stale by moving their heartbeat back past their TTL, as a
    worker that stopped beating would leave them: no test sleeps out a TTL."""
    from hunkwise.shared import store
    from hunkwise.shared.context import open_repo

    with store.transaction(open_repo(str(repo)).lay) as state:
        for tid in task_ids:
            claim = state.tasks[tid].claim
            assert claim is not None, f"{tid} has no claim to age"
            claim.heartbeat -= claim.ttl + 1
            claim.opened = min(claim.opened, claim.heartbeat)


@pytest.fixture
def under_lock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What happens while this process holds the state lock: every process started, every
    object read through the command's cat-file, every fsync of something other than the
    state file and its directory. Yields that list; counts the holds in `holds`."""
    import threading

    from hunkwise.shared import git as hgit
    from hunkwise.shared import store

    seen: list[str] = []
    held = threading.local()
    real_acquire = store._acquire

    def acquire(path: Path, wait: float) -> Any:
        release = real_acquire(path, wait)
        if release is None or path.name != "lock":
            return release
        held.on = True
        seen.append("hold")

        def let_go() -> None:
            held.on = False
            release()
        return let_go

    def holding() -> bool:
        return getattr(held, "on", False)

    real_init = subprocess.Popen.__init__

    def popen(self: Any, args: Any, *a: Any, **k: Any) -> None:
        if holding():
            seen.append(f"process {args!r}")
        real_init(self, args, *a, **k)

    real_read = hgit.read_objects

    def read_objects(repo: Path, names: Any) -> Any:
        if holding():
            seen.append(f"git read {list(names)!r}")
        return real_read(repo, names)

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if holding():
            target = os.readlink(f"/proc/self/fd/{fd}")
            if not (Path(target).name.startswith(".state.json.")
                    or Path(target).name == "coord"):
                seen.append(f"fsync {target}")
        real_fsync(fd)

    monkeypatch.setattr(store, "_acquire", acquire)
    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(hgit, "read_objects", read_objects)
    monkeypatch.setattr(os, "fsync", fsync)
    yield seen
