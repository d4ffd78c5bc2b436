"""Which hunkwise session an agent's own session is: recorded at `worker start`, read by
the agent hooks on every tool call.

Claude Code exports `CLAUDE_CODE_SESSION_ID` to its Bash tool (2.1.132), the same value
its hooks receive as `session_id`; Codex exports `CODEX_THREAD_ID` to the commands it
runs, its hooks' `session_id`. `worker start`, run by the agent through that tool, maps
the agent's id to the hunkwise session it claims; from the next tool call on, the hooks
know the worker without anything set when the agent was launched. Without a mapping the
hooks fall back to `COORD_SESSION` in the agent's environment.

One small file per agent session in `identities/` of the state directory, named after a
digest of the agent's id and holding the hunkwise session id: a hook reads one file, and
nothing here imports the state layer (hooks pay for each import on every call).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DIR = "identities"
# The variables an agent exports to the commands it runs, naming its own session (the
# hooks' `session_id`), in the order they are looked at.
AGENT_VARS = (("claude", "CLAUDE_CODE_SESSION_ID"), ("codex", "CODEX_THREAD_ID"))
_MAX_ID = 200


def agent_identity(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(agent, its session id) from the environment of a command the agent runs."""
    for agent, var in AGENT_VARS:
        value = env.get(var, "").strip()
        if value and len(value) <= _MAX_ID:
            return agent, value
    return None


def _file(root: Path, agent_id: str) -> Path:
    return root / DIR / hashlib.sha256(agent_id.encode("utf-8", "replace")).hexdigest()[:40]


def record(root: Path, agent_id: str, session: str) -> Path:
    """Map an agent's session id to a hunkwise session (atomic: temp file, rename)."""
    path = _file(root, agent_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(session + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def lookup(root: Path, agent_id: str) -> str | None:
    """The hunkwise session mapped to this agent session id, or None."""
    if not agent_id or len(agent_id) > _MAX_ID:
        return None
    try:
        text = _file(root, agent_id).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def forget_all(root: Path) -> int:
    """Remove every mapping (`coord uninstall-hooks`)."""
    d = root / DIR
    n = 0
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    for name in names:
        try:
            os.unlink(d / name)
            n += 1
        except OSError:
            pass
    try:
        d.rmdir()
    except OSError:
        pass
    return n


# ---- finding the state directory without a git process -----------------------------------

def git_common_dir(start: Path) -> Path | None:
    """The git common directory of the repository holding `start`, found by reading
    `.git` (a directory, or a linked worktree's `gitdir:` file and its `commondir`); None
    where discovery is bounded or the layout is not the plain one (git decides then)."""
    if any(os.environ.get(k) for k in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                                       "GIT_DISCOVERY_ACROSS_FILESYSTEM")):
        return None
    here = Path(os.path.realpath(start))
    for top in (here, *here.parents):
        dot = top / ".git"
        if dot.is_dir():
            common = dot / "commondir"
            if common.exists():
                return _common_of(dot)
            return dot
        if dot.is_file():
            try:
                line = dot.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not line.startswith("gitdir:"):
                return None
            gd = Path(line[len("gitdir:"):].strip())
            gd = gd if gd.is_absolute() else (top / gd)
            return _common_of(Path(os.path.realpath(gd)))
    return None


def _common_of(git_dir: Path) -> Path | None:
    try:
        rel = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return git_dir
    except (OSError, UnicodeDecodeError):
        return None
    p = Path(rel)
    return Path(os.path.realpath(p if p.is_absolute() else git_dir / p))


def state_root(start: Path, env: Mapping[str, str]) -> Path | None:
    """The state directory (`$COORD_DIR`, else `coord/` in the git common directory), as
    `store.layout` finds it, for a hook started in `start`."""
    if env.get("COORD_DIR"):
        return Path(env["COORD_DIR"]).resolve()
    common = git_common_dir(start)
    if common is None:
        try:
            from hunkwise.shared import git

            common = git.common_dir(git.toplevel(start))
        except Exception:  # not in a repository: no state
            return None
    return common / "coord"


def session_for(data: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The hunkwise session of the agent making this tool call (its hook payload): the
    payload's `session_id` mapped at `worker start` first, then `$COORD_SESSION`; '' when
    neither says."""
    agent_id = data.get("session_id")
    if isinstance(agent_id, str) and agent_id:
        cwd = data.get("cwd")
        root = state_root(Path(cwd) if isinstance(cwd, str) and cwd else Path.cwd(), env)
        found = lookup(root, agent_id) if root is not None else None
        if found:
            return found
    return env.get("COORD_SESSION", "").strip()
