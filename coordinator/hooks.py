"""Protection: no worker can commit, move a branch, or stash away another's uncommitted work.

- git hooks (`pre-commit`, `reference-transaction`) refuse commits and moves of HEAD,
  branches and refs/stash by anyone but the coordinator; existing hooks are chained;
- agent hooks (Claude Code and Codex PreToolUse) run `coord guard` (guard.py) on every shell
  command and file write of an agent, before it happens;
- what gets through anyway is put back by `coord restore` (restore.py).

The coordinator marks its own git calls with HUNKWISE_COORDINATOR=1. That is a guard
against accidents, not an access control: anyone can set it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import AgentHook, InstallHooksResult, UninstallHooksResult

MARK = "# installed by hunkwise (coord install-hooks)"
CHAINED = ".hunkwise-chained"
HOOKS = ("pre-commit", "reference-transaction")

_PRE_COMMIT = f"""#!/bin/sh
{MARK}
# Workers share this tree and never commit; the coordinator commits with coord accept.
if [ "$HUNKWISE_COORDINATOR" != 1 ]; then
  echo "hunkwise: commits in this shared tree are made by the coordinator only (coord accept);" >&2
  echo "hunkwise: finish your task with: worker done TASK_ID" >&2
  exit 1
fi
chained="$(dirname "$0")/pre-commit{CHAINED}"
if [ -x "$chained" ]; then exec "$chained" "$@"; fi
exit 0
"""

_REF_TX = f"""#!/bin/sh
{MARK}
# Refuse moves of HEAD, branches and refs/stash by anyone but the coordinator, before
# they happen ("prepared"): a stash is refused before it resets the tree.
input=$(cat)
if [ "$1" = prepared ] && [ "$HUNKWISE_COORDINATOR" != 1 ]; then
  echo "$input" | while read -r old new ref; do
    # Updates that move nothing pass: a reset to the same commit, and pack-refs (git gc),
    # which writes a ref into packed-refs at its current value, then drops the loose copy.
    [ "$old" = "$new" ] && continue
    [ "$(git rev-parse -q --verify "$ref" 2>/dev/null)" = "$new" ] && continue
    case "$new" in
      *[!0]*) ;;
      *) grep -qx "$old $ref" "$(git rev-parse --git-common-dir)/packed-refs" 2>/dev/null && continue;;
    esac
    case "$ref" in
      HEAD|refs/heads/*|refs/stash)
        echo "hunkwise: refusing to move $ref: this tree is shared by several workers;" >&2
        echo "hunkwise: only the coordinator commits or moves branches (coord accept)" >&2
        exit 1;;
    esac
  done || exit 1
fi
chained="$(dirname "$0")/reference-transaction{CHAINED}"
if [ -x "$chained" ]; then printf '%s\\n' "$input" | "$chained" "$@"; exit $?; fi
exit 0
"""


def hooks_dir(ctx: Ctx) -> Path:
    out = git.run(ctx.repo, "rev-parse", "--git-path", "hooks").decode().strip()
    p = Path(out)
    return p if p.is_absolute() else (ctx.repo / p)


def _ours(path: Path) -> bool:
    try:
        return MARK in path.read_text(errors="replace")
    except OSError:
        return False


AGENTS = ("claude", "codex")


def install_hooks(ctx: Ctx, agents: Sequence[str] = ()) -> InstallHooksResult:
    agents = list(dict.fromkeys(agents))  # `--agent` may repeat
    for name in agents:
        if name not in AGENTS:
            raise UsageError(f"unknown --agent {name!r}: supported: {', '.join(AGENTS)}")
        path = _agent_file(ctx, name)
        _pre_tool_use(path, _load_settings(path))  # refuse a malformed file before writing
    d = hooks_dir(ctx)
    d.mkdir(parents=True, exist_ok=True)
    installed, chained = [], []
    for name, body in (("pre-commit", _PRE_COMMIT), ("reference-transaction", _REF_TX)):
        path = d / name
        if path.exists() and not _ours(path):
            keep = d / (name + CHAINED)
            if keep.exists():
                raise StateRefused(f"{keep} exists already; move it aside first")
            os.rename(path, keep)
            chained.append(name)
        store.atomic_write(path, body.encode())
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        installed.append(str(path))
    doc: InstallHooksResult = {"hooks": installed, "chained": chained}
    done: dict[str, AgentHook] = {}
    for name in agents:
        done[name] = {"hook": str(install_agent(ctx, name))}
        if name == "codex":
            done[name]["skills"] = install_codex_skills(ctx)
    from hunkwise.coordinator import skills as shipped  # skills where each agent reads them
    shipped.install_for(ctx, agents, done)
    if agents:
        doc["agent"] = done[agents[0]]["hook"]  # the first agent's hook file, as before
        doc["agents"] = done
    return doc


def uninstall_hooks(ctx: Ctx) -> UninstallHooksResult:
    d = hooks_dir(ctx)
    removed, restored = [], []
    for name in HOOKS:
        path = d / name
        if path.exists() and _ours(path):
            path.unlink()
            removed.append(str(path))
        keep = d / (name + CHAINED)
        if keep.exists() and not path.exists():
            os.rename(keep, path)
            restored.append(name)
    agents = {name: uninstall_agent(ctx, name) for name in AGENTS}
    skills = uninstall_codex_skills(ctx)
    from hunkwise.coordinator import skills as shipped  # skills where each agent reads them
    skills += shipped.uninstall(ctx)
    return {"removed": removed, "restored": restored, "agent": agents["claude"],
            "agents": agents, "skills": skills}


# ---- the agents' PreToolUse hooks ----------------------------------------------------------
# Claude Code reads .claude/settings.local.json; Codex reads <repo>/.codex/hooks.json (a
# trusted project's layer; each new or changed hook is reviewed once in Codex's /hooks).
# Both take {"hooks": {"PreToolUse": [{"matcher", "hooks": [{"type": "command",
# "command"}]}]}}, pass the tool call as JSON on stdin and block on exit 2 with the reason on
# stderr. Codex names its shell tool "Bash" in hook input and sends apply_patch's patch as
# tool_input.command.

_MATCHERS = {"claude": "Bash|Edit|Write|MultiEdit|NotebookEdit", "codex": "Bash|apply_patch"}
_FILES = {"claude": (".claude", "settings.local.json"), "codex": (".codex", "hooks.json")}
SKILLS = ("worker", "coordinator")


def _guard_command() -> str:
    """The absolute `coord` of this installation: an agent's hook runs without our venv on
    its PATH."""
    beside = Path(sys.executable).parent / "coord"
    if beside.exists():
        exe = beside
    elif sys.argv and sys.argv[0] and Path(sys.argv[0]).name == "coord":
        exe = Path(sys.argv[0]).resolve()
    else:
        exe = Path(shutil.which("coord") or "coord")
    return f"{shlex.quote(str(exe))} guard"


def _agent_file(ctx: Ctx, agent: str) -> Path:
    folder, name = _FILES[agent]
    return ctx.repo / folder / name


# An agent's hooks settings file is another tool's open JSON: only the PreToolUse entry is
# ours; every other key is kept as it is.
def _load_settings(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not valid JSON ({e}); fix it, nothing was changed") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object; nothing was changed")
    return data


def install_agent(ctx: Ctx, agent: str) -> Path:
    """Merge our PreToolUse hook into the agent's hook file, keeping everything else."""
    path = _agent_file(ctx, agent)
    data = _load_settings(path)
    pre = _pre_tool_use(path, data)
    entry = {"matcher": _MATCHERS[agent],
             "hooks": [{"type": "command", "command": _guard_command()}]}
    pre[:] = [e for e in pre if not _is_ours(e)] + [entry]
    path.parent.mkdir(parents=True, exist_ok=True)
    store.atomic_write(path, (json.dumps(data, indent=2) + "\n").encode())
    _exclude(ctx, "/" + path.relative_to(ctx.repo).as_posix())
    return path


def _skills_source() -> Path | None:
    """skills/ of the source checkout this installation runs from (an editable install)."""
    here = Path(__file__).resolve().parent.parent / "skills"
    return here if all((here / s / "SKILL.md").is_file() for s in SKILLS) else None


def install_codex_skills(ctx: Ctx) -> list[str]:
    """Copy the skills where Codex reads a repository's skills: .agents/skills/<name>/."""
    src = _skills_source()
    if src is None:
        return []
    written = []
    for s in SKILLS:
        dest = ctx.repo / ".agents" / "skills" / f"hunkwise-{s}" / "SKILL.md"
        dest.parent.mkdir(parents=True, exist_ok=True)
        store.atomic_write(dest, (src / s / "SKILL.md").read_bytes())
        _exclude(ctx, f"/.agents/skills/hunkwise-{s}/")
        written.append(str(dest))
    return written


def uninstall_codex_skills(ctx: Ctx) -> list[str]:
    removed = []
    for s in SKILLS:
        dest = ctx.repo / ".agents" / "skills" / f"hunkwise-{s}" / "SKILL.md"
        if dest.is_file() and f"name: hunkwise-{s}" in dest.read_text(errors="replace"):
            dest.unlink()
            with contextlib.suppress(OSError):
                dest.parent.rmdir()
            removed.append(str(dest))
    return removed


def _exclude(ctx: Ctx, pattern: str) -> None:
    """A local, untracked settings file must not show up as an unowned change."""
    info = git.common_dir(ctx.repo) / "info"
    info.mkdir(exist_ok=True)
    exclude = info / "exclude"
    text = exclude.read_text() if exclude.exists() else ""
    if pattern not in text.split("\n"):
        with open(exclude, "a") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + pattern + "\n")


def _pre_tool_use(path: Path, data: dict[str, Any]) -> list[Any]:
    """The PreToolUse list of a hooks document, created if absent; refuse odd shapes."""
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: \"hooks\" is not a JSON object; nothing was changed")
    pre = hooks.setdefault("PreToolUse", [])
    if not isinstance(pre, list):
        raise UsageError(f"{path}: \"hooks.PreToolUse\" is not a list; nothing was changed")
    return pre


def _is_ours(entry: Any) -> bool:
    return isinstance(entry, dict) and any(
        isinstance(h, dict) and str(h.get("command", "")).endswith(" guard")
        and "coord" in str(h.get("command", "")) for h in entry.get("hooks", []))


def uninstall_agent(ctx: Ctx, agent: str) -> str | None:
    path = _agent_file(ctx, agent)
    if not path.exists():
        return None
    data = _load_settings(path)
    hooks = data.get("hooks")
    pre = hooks.get("PreToolUse") if isinstance(hooks, dict) else None
    if not isinstance(pre, list) or not any(_is_ours(e) for e in pre):
        return None
    pre[:] = [e for e in pre if not _is_ours(e)]
    if not pre:
        del data["hooks"]["PreToolUse"]
    if not data["hooks"]:
        del data["hooks"]
    if not data and agent == "codex":
        path.unlink()  # a hooks.json holding nothing else was ours
    else:
        store.atomic_write(path, (json.dumps(data, indent=2) + "\n").encode())
    return str(path)
