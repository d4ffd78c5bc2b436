"""One top-level name: the wheel installs `hunkwise` and nothing generic.

The source folders `shared/`, `inbox/`, `coordinator/` and `worker/` install as
`hunkwise.shared` and so on. Importing them under their folder names would load a second
copy of every module (two `store` modules, two lock registries) and would break as soon as
another distribution ships a top-level `shared` or `worker`.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from testing.env import ROOT

OLD_NAMES = {"shared", "inbox", "coordinator", "worker"}
SOURCES = ["shared", "inbox", "coordinator", "worker", "tests", "testing", "bench", "demo"]


def _python_files() -> list[Path]:
    return sorted(p for d in SOURCES for p in (ROOT / d).rglob("*.py"))


# Only a file where `import` or `from` is followed, on its line or the lines it continues
# with a backslash, by one of the bare names as a word of its own (not after a dot, as in
# `hunkwise.shared`) can import one, however the statement is written: only those are
# parsed, and the parse decides.
_MAY_IMPORT = re.compile(rb"\b(?:import|from)(?:[ \t\f]|\\\r?\n)(?:[^\n]|\\\r?\n)*?(?<![.\w])(?:%s)\b"
                         % b"|".join(n.encode() for n in sorted(OLD_NAMES)))


def test_no_module_imports_the_folders_by_their_bare_names() -> None:
    bad = []
    for path in _python_files():
        source = path.read_bytes()
        if not _MAY_IMPORT.search(source):
            continue
        tree = ast.parse(source, str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in OLD_NAMES:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: import {name}")
    assert bad == [], "import these as hunkwise.<package>:\n" + "\n".join(bad)


def test_the_suite_loads_each_module_under_one_name_only() -> None:
    import hunkwise.coordinator.cli  # noqa: F401
    import hunkwise.worker.cli  # noqa: F401

    assert not OLD_NAMES & {m.split(".")[0] for m in sys.modules}


def _fake_wheel(where: Path) -> Path:
    """A wheel of another project that ships top-level `shared` and `worker` packages."""
    name, ver = "othertool", "1.0"
    files = {
        "shared/__init__.py": b"OTHER = True\n",
        "worker/__init__.py": b"OTHER = True\n",
        f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
        f"{name}-{ver}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-{ver}.dist-info/RECORD,,")
    files[f"{name}-{ver}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    out = where / f"{name}-{ver}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return out


@pytest.mark.slow
def test_the_wheel_lives_beside_packages_that_ship_shared_and_worker(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    from testing.wheel import built_wheel

    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheel = built_wheel(tmp_path_factory)
    tops = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"hunkwise"}

    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # hunkwise's dependencies come from the test environment's site-packages, added as a
    # plain path (its .pth files, the editable hunkwise among them, are not processed).
    import click

    Path(site, "deps.pth").write_text(str(Path(click.__file__).parent.parent) + "\n")
    other = _fake_wheel(tmp_path)
    subprocess.run([*pip, "--python", str(py), "install", "--no-deps", "--no-index", str(other),
                    str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for tool in ("coord", "worker"):
        r = subprocess.run([str(env_dir / "bin" / tool), "--version"], capture_output=True,
                           text=True, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"{tool} ")
    r = subprocess.run([str(py), "-c", "import shared, worker; print(shared.OTHER, worker.OTHER)"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.stdout.strip() == "True True", r.stderr


HOT = [("coordinator", "status"), ("coordinator", "inbox"), ("coordinator", "next"),
       ("worker", "signals"), ("worker", "heartbeat")]


@pytest.mark.parametrize(("side", "cmd"), HOT, ids=lambda a: a)
def test_hot_commands_import_only_what_they_use(make_repo, coord, worker, side: str,
                                                cmd: str) -> None:
    """A hot command's start-up is its imports: it must not pay for a schema library, the
    notifier, the file watcher, the web board, package metadata or the documents' TypedDicts
    (shared/state/documents.py, for mypy only) it never uses."""
    import subprocess
    import sys

    repo = make_repo({"a.txt": "a\n"})
    assert coord(repo, "assign", "T1", "--title", "t", "--expect", "e", "--write", "a.txt").code == 0
    session = worker(repo, "start", "T1").doc["session"]
    code = ("import sys\n"
            f"from hunkwise.{side}.cli import main\n"
            "rc = main([*sys.argv[2:], '--json', '--repo', sys.argv[1]])\n"
            "print(rc, ' '.join(sorted(sys.modules)))")
    argv = [cmd, "T1"] if cmd == "heartbeat" else [cmd]
    r = subprocess.run([sys.executable, "-c", code, str(repo), *argv], capture_output=True,
                       text=True, check=True, env={
                           # coord refuses its own commands to a worker's session
                           **os.environ, "COORD_SESSION": session if side == "worker"
                           else "sess-20260101-0000-coord@host"})
    out = r.stdout.splitlines()[-1].split()
    assert out[0] == "0", r.stdout + r.stderr
    loaded = set(out[1:])
    heavy = {"pydantic", "pydantic_core", "importlib.metadata", "apprise", "watchdog",
             "http.server", "email", "portalocker", "hunkwise.coordinator.board",
             "hunkwise.shared.state.documents"}
    assert not heavy & loaded, sorted(heavy & loaded)
