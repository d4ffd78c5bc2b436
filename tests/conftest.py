"""The suite's hooks, the hermetic seal and the fixtures every test stands on.

Tests use real git in temporary repositories. HOME, XDG and git's system config are
pointed away from the user's, and author, committer and dates are pinned. The helpers
behind these fixtures, and everything else tests share, live in `testing/`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.cli import Cli, run_cli
from testing.env import DROPPED_PREFIXES, hermetic_env
from testing.locks import watch_the_state_lock
from testing.repo import MakeRepo, build_repo


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    _sigint_default()
    _temp_in_memory(config)
    _compiled(config)


def _sigint_default() -> None:
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


def _temp_in_memory(config: pytest.Config) -> None:
    """The temporary repositories in memory (`/dev/shm`) where there is one with room.

    Every state save, report and ref update fsyncs, as it must; on a disk that costs a
    journal commit each, and the suite makes tens of thousands. On tmpfs an fsync costs
    nothing, and nothing else changes. One folder per run (two runs at once never clear
    each other's), removed when the run passes and kept, with a failing test's folder in
    it, when it fails (`pytest_sessionfinish`); `--basetemp` chooses another place.
    """
    import tempfile

    if config.option.basetemp or hasattr(config, "workerinput"):
        return  # (xdist hands each worker a folder inside the controller's)
    shm = Path("/dev/shm")
    try:
        st = os.statvfs(shm)
        roomy = st.f_bavail * st.f_frsize >= 2 << 30 and os.access(shm, os.W_OK)
    except OSError:
        return
    if not roomy:
        return
    where = tempfile.mkdtemp(prefix=f"hunkwise-tests-{os.getuid()}-", dir=shm)
    config.option.basetemp = where
    config.stash[_IN_MEMORY] = where


_IN_MEMORY = pytest.StashKey[str]()


def _compiled(config: pytest.Config) -> None:
    """The package's bytecode written once, before any test starts a `coord` or `worker`.

    Where PYTHONDONTWRITEBYTECODE is set (many sandboxes and CI images set it), no process
    ever writes a `.pyc` of an editable install, so every process a test starts compiled
    all it imports again: some 10 ms a command, thousands of commands. Python still reads a
    `.pyc` it finds, so compiling once here spares them all; nothing else changes.
    """
    if hasattr(config, "workerinput"):
        return  # (the controller compiled before the workers started)
    import compileall

    import hunkwise

    for where in hunkwise.__path__:
        try:
            compileall.compile_dir(where, quiet=2, workers=1)
        except OSError:  # pragma: no cover - a read-only install: nothing to spare
            pass


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    where = session.config.stash.get(_IN_MEMORY, None)
    if where is None:
        return
    if exitstatus == 0:
        import shutil

        shutil.rmtree(where, ignore_errors=True)
    else:
        print(f"\nthe failing tests' folders are kept in {where}", file=sys.stderr)


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


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collector, tuned for a test process: what collection built (some 2,800 items and
    their modules) lives to the end, so it is frozen out of the full collections' sight, and
    the young generation is collected every 20,000 allocations rather than every 700. The
    suite's processes spent about 6% of their time collecting; this leaves about 1%."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)


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
        if key.startswith(DROPPED_PREFIXES):
            monkeypatch.delenv(key, raising=False)
    for key, value in hermetic_env(home, os.environ.get("PATH", "")).items():
        monkeypatch.setenv(key, value)
    yield
    # A test that calls the core directly (not through a command, which closes them at its
    # end) leaves this process's `cat-file` readers open: end them, so no test inherits
    # another's readers, and the suite's processes do not pile up.
    git_module = sys.modules.get("hunkwise.shared.git")
    if git_module is not None:
        git_module.close_readers()


@pytest.fixture
def make_repo(tmp_path: Path, repo_templates: Path) -> MakeRepo:
    """make_repo({"path": content, ...}) -> a repo with one commit holding those files."""
    counter = iter(range(1000))

    def make(files: dict[str, str | bytes] | None = None, *, commit: bool = True) -> Path:
        return build_repo(tmp_path / f"repo{next(counter)}", files, commit=commit,
                          templates=repo_templates)

    return make


@pytest.fixture(scope="session")
def repo_templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this process keeps the repositories `make_repo` built, to copy them again."""
    return tmp_path_factory.mktemp("repo-templates")


@pytest.fixture
def coord() -> Cli:
    return lambda repo, *a, **k: run_cli("coord", repo, *a, **k)


@pytest.fixture
def worker() -> Cli:
    return lambda repo, *a, **k: run_cli("worker", repo, *a, **k)


@pytest.fixture
def under_lock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What happens while this process holds the state lock (testing/locks.py): every
    process started, every object read through the command's cat-file, every fsync of
    something other than the state file and its directory, and a "hold" at each hold."""
    yield watch_the_state_lock(monkeypatch)
