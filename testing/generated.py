"""A project whose suite needs an ignored, generated file, and the steps of a task on it.

`build/version.txt` is what `sh gen.sh` writes (an installer's metadata, generated code):
ignored, so a fresh checkout lacks it until `[checkout] setup` makes it or `[checkout]
carry` brings the main tree's copy. `sh suite.sh` fails, naming the file, without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git

GEN = "mkdir -p build && echo 'version ok' > build/version.txt\n"
SUITE = ("test -f build/version.txt || { echo 'missing generated file build/version.txt'; "
         "exit 1; }\ngrep -q 'version ok' build/version.txt\n")


def toml(*, verify: list[str] | None = None, setup: list[str] | None = None,
         carry: list[str] | None = None, link: list[str] | None = None,
         extra: str = "") -> str:
    """A coord.toml with these settings (JSON strings are TOML strings)."""
    text = "[verify]\ncommands = " + json.dumps(verify or ["sh suite.sh"]) + "\n" + extra
    section = {k: v for k, v in (("setup", setup), ("carry", carry), ("link", link)) if v}
    if section:
        text += "[checkout]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in section.items())
    return text


def generated_project(make_repo: MakeRepo, coord_toml: str,
                      files: dict[str, str] | None = None, *, generate: bool = True) -> Path:
    """The project, committed; the main tree has the generated file (as after a build)."""
    base: dict[str, str | bytes] = {".gitignore": "build/\nnode_modules/\n", "gen.sh": GEN,
                                    "suite.sh": SUITE, "src.txt": "one\ntwo\n",
                                    "coord.toml": coord_toml}
    base.update(files or {})
    repo = make_repo(base)
    if generate:
        (repo / "build").mkdir()
        (repo / "build" / "version.txt").write_text("version ok\n")
    return repo


def begin(coord: Cli, worker: Cli, repo: Path, tid: str, grant: str,
          checks: tuple[str, ...] = ()) -> None:
    """Assign and start a task (its session is `sess-...-<tid>@m`)."""
    args = ["assign", tid, "--title", f"{tid} work", "--expect", "e", "--write", grant]
    for c in checks:
        args += ["--check", c]
    ok(coord(repo, *args))
    ok(worker(repo, "start", tid, session=session(tid)))


def session(tid: str) -> str:
    return f"sess-20260101-0900-{tid.lower()}@m"


def accept_task(coord: Cli, worker: Cli, repo: Path, tid: str, path: str, content: str) -> str:
    """A whole task, from assign to its accepted commit; the commit."""
    begin(coord, worker, repo, tid, path)
    (repo / path).write_text(content)
    ok(worker(repo, "done", tid, session=session(tid)))
    return str(ok(coord(repo, "accept", tid))["commit"])


def worktrees(repo: Path) -> list[str]:
    return [ln for ln in git(repo, "worktree", "list", "--porcelain").split("\n")
            if ln.startswith("worktree ")]


def scratch_left(repo: Path) -> list[str]:
    """Temporary checkouts left under the state's scratch folder."""
    d = repo / ".git" / "coord" / "scratch"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def lines_of(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def state_task(repo: Path, tid: str) -> dict[str, Any]:
    doc = json.loads((repo / ".git" / "coord" / "state.json").read_bytes())
    return dict(doc["tasks"][tid])
