"""The skills hunkwise ships (SKILL.md files), put where each agent reads a project's skills.

The skills live in `skills/<name>/SKILL.md` at the root of the source tree, and install
with the package as `hunkwise/skills/` (package data), so a wheel, an editable install and
the checkout itself all find them. Each folder is named after its skill (the Agent Skills
format: the front matter's `name` equals the folder's name).

Where agents read a project's skills (docs/launch.md cites the pages):
- Claude Code: `.claude/skills/<name>/SKILL.md` in the project;
- Codex: `.agents/skills/<name>/SKILL.md`, from the working directory up to the repository root.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from hunkwise.shared import git
from hunkwise.shared.errors import UsageError
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx

NAMES = ("hunkwise-worker", "hunkwise-coordinator")
WHERE = {"claude": (".claude", "skills"), "codex": (".agents", "skills")}


def source() -> Path:
    """The folder holding the shipped skills: `hunkwise/skills` of the installation, else
    `skills/` of the source checkout this module runs from."""
    here = Path(__file__).parent
    for base in (here.parent, here.resolve().parent.parent):
        cand = base / "skills"
        if all((cand / n / "SKILL.md").is_file() for n in NAMES):
            return cand
    raise UsageError("the hunkwise skills are missing from this installation "
                     f"(looked for skills/{NAMES[0]}/SKILL.md beside {here}); reinstall hunkwise")


def skill_file(name: str = "hunkwise-worker") -> Path:
    return source() / name / "SKILL.md"


def front_name(text: str) -> str | None:
    """The `name:` of a SKILL.md's front matter."""
    m = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    if not m:
        return None
    found = re.search(r"^name:\s*(\S+)\s*$", m.group(1), re.M)
    return found.group(1) if found else None


def _dest(ctx: Ctx, agent: str, name: str) -> Path:
    folder, sub = WHERE[agent]
    return ctx.repo / folder / sub / name / "SKILL.md"


def install(ctx: Ctx, agent: str) -> list[str]:
    """Copy every shipped skill where `agent` reads project skills; the paths written.
    Git-excluded locally: the copies are no one's change in the shared tree."""
    if agent not in WHERE:
        raise UsageError(f"no skill location known for agent {agent!r}: {', '.join(WHERE)}")
    src = source()
    written = []
    for name in NAMES:
        dest = _dest(ctx, agent, name)
        data = (src / name / "SKILL.md").read_bytes()
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.is_file() or dest.read_bytes() != data:
            store.atomic_write(dest, data)
        _exclude(ctx, "/" + dest.parent.relative_to(ctx.repo).as_posix() + "/")
        written.append(str(dest))
    return written


def install_for(ctx: Ctx, agents: list[str], done: Any) -> None:
    """`coord install-hooks --agent A...`: each agent's skills, into its entry of `done`."""
    for agent in agents:
        if agent in WHERE:
            done.setdefault(agent, {})["skills"] = install(ctx, agent)


def uninstall(ctx: Ctx) -> list[str]:
    """Remove the copies `install` made (only files that are still our skills)."""
    removed = []
    for agent in WHERE:
        for name in NAMES:
            dest = _dest(ctx, agent, name)
            try:
                text = dest.read_text(errors="replace")
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
            if front_name(text) != name:
                continue  # someone else's file of that name: not ours to remove
            dest.unlink()
            for d in (dest.parent, dest.parent.parent, dest.parent.parent.parent):
                with contextlib.suppress(OSError):
                    d.rmdir()  # only when empty
            removed.append(str(dest))
    return removed


def _exclude(ctx: Ctx, pattern: str) -> None:
    info = git.common_dir(ctx.repo) / "info"
    info.mkdir(exist_ok=True)
    exclude = info / "exclude"
    text = exclude.read_text() if exclude.exists() else ""
    if pattern not in text.split("\n"):
        with open(exclude, "a") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + pattern + "\n")
