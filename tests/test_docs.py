"""The docs hold what they promise: a short README over docs/, links that resolve, every
environment variable the code reads, every setting and every command documented, and the
README's quick start runnable as written."""

from __future__ import annotations

import ast
import re
import subprocess
import typing
from pathlib import Path

import click
import pytest

from testing.env import ROOT

# Pages other branches are writing; a link to one of them is checked once the file exists.
# Empty this set once they are all merged.
PENDING: set[str] = set()

SOURCES = ("shared", "inbox", "coordinator", "worker")
ENVIRONMENT = ROOT / "docs" / "reference" / "environment.md"
COMMANDS = ROOT / "docs" / "reference" / "commands.md"
SETTINGS = ROOT / "docs" / "reference" / "settings.md"


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


# ---- the README ------------------------------------------------------------------------

def test_the_readme_is_short_and_shows_make_demo_and_make_test() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.split("\n")) <= 150, "README.md over 150 lines: move the detail into docs/"
    assert "make demo" in text and "make test" in text


def _quick_start() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow
def test_the_readme_quick_start_runs_as_written_and_commits_each_task_alone(
        tmp_path: Path) -> None:
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", _quick_start()], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    shop = tmp_path / "shop"

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=shop, check=True, capture_output=True,
                              text=True).stdout

    subjects = git("log", "--format=%s").split("\n")[:3]
    assert subjects == ["Part with Goodbye", "Greet with Hello", "a shop"]
    first = git("show", "--format=", "-U0", "HEAD~1", "--", "app.py")
    assert "+    return \"Hello, \" + name" in first and "Goodbye" not in first
    assert git("status", "--porcelain") == ""
    assert "verify ok" in p.stdout


# ---- links -------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _anchors(page: Path) -> set[str]:
    """GitHub's heading ids (lower case, punctuation dropped, spaces to dashes) and explicit
    `<a id="...">` anchors."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [m.group(1) for m in LINK.finditer(text)]


def _broken(page: Path, root: Path = ROOT, pending: set[str] = PENDING) -> list[str]:
    bad = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        rel = dest.relative_to(root).as_posix() if dest.is_relative_to(root) else str(dest)
        if rel in pending and not dest.exists():
            continue
        if not dest.exists():
            bad.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
            bad.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return bad


def test_every_relative_link_of_the_docs_resolves() -> None:
    pages = _pages()
    assert len(pages) >= 10  # the README, CONTRIBUTING and docs/ with its reference
    bad = [b for page in pages for b in _broken(page)]
    assert bad == [], "broken links:\n" + "\n".join(bad)


def test_a_missing_page_or_heading_is_found_and_a_pending_page_waits(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n\n## Plan a sprint (`coord assign`)\n")
    page = root / "docs" / "README.md"
    page.write_text("[a](nothing.md) [b](guide.md#no-such-heading) "
                    "[c](guide.md#plan-a-sprint-coord-assign) [d](launch.md) [e](https://x.y/z)"
                    "\n```\n[f](in-a-code-block.md)\n```\n")
    found = _broken(page, root, {"docs/launch.md"})
    assert [b.split(": ", 1)[1] for b in found] == [
        "nothing.md (no such file)", "guide.md#no-such-heading (no such heading)"]
    (root / "docs" / "launch.md").write_text("# Launch\n")  # merged: now it is checked
    page.write_text("[d](launch.md#stop)\n")
    assert _broken(page, root, {"docs/launch.md"}) == ["docs/README.md: launch.md#stop (no such heading)"]


# ---- environment variables ---------------------------------------------------------------

_READERS = {"get", "getenv", "pop", "setdefault"}


def _is_environ(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def env_reads(source: str) -> set[str]:
    """The names of the environment variables `source` reads: `os.environ[...]`,
    `os.environ.get(...)`, `os.getenv(...)`, `"X" in os.environ`, click's `envvar=`, and the
    same through a name bound to os.environ (`env = os.environ if env is None else env`) or
    a parameter named `env`. A key given as a name is looked up among the module's string
    constants and the loop variables over literal tuples
    (`for k in ("A", "B"): os.environ.get(k)`, `for agent, var in AGENT_VARS: ...`)."""
    tree = ast.parse(source)
    constants: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and _strings(node.value):
            constants[node.targets[0].id] = _strings(node.value)
    environ_names = {"environ"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)):
            it = node.iter
            values = _strings(it) or (constants.get(it.id, []) if isinstance(it, ast.Name) else [])
            for t in ast.walk(node.target):
                if isinstance(t, ast.Name) and values:
                    constants.setdefault(t.id, []).extend(values)
        elif isinstance(node, ast.Assign) and any(
                _is_environ(n) for n in ast.walk(node.value) if isinstance(n, ast.expr)):
            environ_names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.arg) and node.arg in ("env", "environ"):
            environ_names.add(node.arg)

    def environ(node: ast.expr) -> bool:
        return _is_environ(node) or (isinstance(node, ast.Name) and node.id in environ_names)

    def keys(node: ast.expr) -> list[str]:
        if isinstance(node, ast.Name):
            return constants.get(node.id, [])
        return _strings(node)

    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if node.args and isinstance(f, ast.Attribute) and f.attr in _READERS \
                    and environ(f.value):
                found.update(keys(node.args[0]))
            elif node.args and ((isinstance(f, ast.Attribute) and f.attr == "getenv")
                                or (isinstance(f, ast.Name) and f.id == "getenv")):
                found.update(keys(node.args[0]))
            for kw in node.keywords:
                if kw.arg == "envvar":
                    found.update(keys(kw.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and environ(node.value):
            found.update(keys(node.slice))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 \
                and isinstance(node.ops[0], (ast.In, ast.NotIn)) and environ(node.comparators[0]):
            found.update(keys(node.left))
    return {k for k in found if re.fullmatch(r"[A-Z][A-Z0-9_]*", k)}


def _code_reads() -> dict[str, list[str]]:
    where: dict[str, list[str]] = {}
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in env_reads(path.read_text(encoding="utf-8")):
                where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return where


def test_the_scanner_finds_every_way_of_reading_the_environment() -> None:
    source = (
        "import os, click\n"
        "from os import environ, getenv\n"
        "URLS = 'HW_URLS'\n"
        "a = os.environ['HW_A']\n"
        "b = os.environ.get('HW_B', '1')\n"
        "c = os.getenv('HW_C')\n"
        "d = getenv(URLS)\n"
        "e = 'HW_E' in os.environ\n"
        "f = environ.get('HW_F')\n"
        "def g(env=None):\n"
        "    env = os.environ if env is None else env\n"
        "    return env.get('HW_G')\n"
        "h = any(os.environ.get(k) for k in ('HW_H1', 'HW_H2'))\n"
        "for key in ('HW_I',):\n"
        "    os.environ.pop(key, None)\n"
        "@click.option('--token', envvar='HW_J')\n"
        "def cmd(token): pass\n"
        "AGENTS = (('claude', 'HW_K1'), ('codex', 'HW_K2'))\n"
        "def who(env):\n"
        "    for agent, var in AGENTS:\n"
        "        if env.get(var): return agent\n"
        "built = {'NOT_READ': '1'}\n"
        "x = built['NOT_READ']\n")
    assert env_reads(source) == {"HW_A", "HW_B", "HW_C", "HW_URLS", "HW_E", "HW_F", "HW_G",
                                 "HW_H1", "HW_H2", "HW_I", "HW_J", "HW_K1", "HW_K2"}


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    reads = _code_reads()
    # the scanner sees the code: the two lock waits the README once left out among them
    assert {"COORD_LOCK_TIMEOUT", "COORD_INDEX_LOCK_WAIT", "COORD_SESSION", "COORD_DIR",
            "HUNKWISE_MACHINE", "HUNKWISE_BOARD_TOKEN", "HUNKWISE_NOTIFY_URLS"} <= set(reads)
    text = ENVIRONMENT.read_text(encoding="utf-8")
    missing = {name: files for name, files in sorted(reads.items())
               if not re.search(rf"`{name}(=[^`]*)?`", text)}
    assert missing == {}, f"read by the code, absent from {ENVIRONMENT.relative_to(ROOT)}"


# ---- commands and settings ---------------------------------------------------------------

def _groups() -> dict[str, click.Group]:
    from hunkwise.coordinator.cli import cli as coord
    from hunkwise.worker.cli import cli as worker

    return {"coord": coord, "worker": worker}


def test_every_command_click_registers_is_in_the_reference() -> None:
    text = COMMANDS.read_text(encoding="utf-8")
    missing = [f"{prog} {name}" for prog, group in _groups().items()
               for name in sorted(group.commands) if f"`{prog} {name}" not in text]
    assert missing == [], f"absent from {COMMANDS.relative_to(ROOT)}: {missing}"
    assert len(_groups()["coord"].commands) >= 30 and len(_groups()["worker"].commands) >= 10


def test_every_option_of_every_command_is_in_the_reference() -> None:
    text = COMMANDS.read_text(encoding="utf-8")
    missing = set()
    for prog, group in _groups().items():
        for cmd in [group, *group.commands.values()]:
            for param in cmd.params:
                if isinstance(param, click.Option):
                    for opt in [*param.opts, *param.secondary_opts]:
                        if opt.startswith("--") and not re.search(rf"{opt}(?![\w-])", text):
                            missing.add(f"{prog} {cmd.name} {opt}")
    assert sorted(missing) == [], f"options absent from {COMMANDS.relative_to(ROOT)}"


def _fields(cls: type) -> dict[str, typing.Any]:
    return {k: t for k, t in typing.get_type_hints(cls).items()
            if typing.get_origin(t) is not typing.ClassVar and not k.startswith("_")}


def _settings() -> list[tuple[str, str]]:
    """(section, key) of every setting: `[agents.NAME]` for a table of named sections."""
    from hunkwise.shared.state import config

    out = []
    for section, kind in _fields(config.Config).items():
        if typing.get_origin(kind) is dict:
            section, kind = f"{section}.NAME", typing.get_args(kind)[1]
        out += [(section, key) for key in _fields(kind)]
    return out


def test_every_setting_of_coord_toml_is_in_the_reference() -> None:
    text = SETTINGS.read_text(encoding="utf-8")
    parts = {f"[{m}]": body for m, body in
             re.findall(r"^### `\[([^\]]+)\]`\n(.*?)(?=^### |\Z)", text, re.M | re.S)}
    missing = [f"[{s}] {k}" for s, k in _settings()
               if f"`{k}`" not in parts.get(f"[{s}]", "")]
    assert missing == [], f"absent from {SETTINGS.relative_to(ROOT)}: {missing}"
    assert len(_settings()) >= 12
