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

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # (no `typing` or `re` at run time: hooks pay for each import)
    from collections.abc import Mapping
    from typing import Any

# Paths are plain strings here (os.path): pathlib's import costs a hook call milliseconds.
StrPath = str | os.PathLike[str]
DIR = "identities"
# The variables an agent exports to the commands it runs, naming its own session (the
# hooks' `session_id`), in the order they are looked at.
AGENT_VARS = (("claude", "CLAUDE_CODE_SESSION_ID"), ("codex", "CODEX_THREAD_ID"))
_MAX_ID = 200
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ID_REST = _ALNUM | frozenset("_.-")


def _plain_id(text: str) -> bool:
    """`[A-Za-z0-9][A-Za-z0-9_.-]{0,99}`, whole."""
    return 0 < len(text) <= 100 and text[0] in _ALNUM and all(c in _ID_REST for c in text)


def agent_identity(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(agent, its session id) from the environment of a command the agent runs."""
    for agent, var in AGENT_VARS:
        value = env.get(var, "").strip()
        if value and len(value) <= _MAX_ID:
            return agent, value
    return None


def _file(root: StrPath, agent_id: str) -> str:
    """The mapping's file: named after the id itself when it is a plain one (the UUIDs both
    agents use), else after its digest."""
    if _plain_id(agent_id):
        return os.path.join(root, DIR, agent_id)
    import hashlib

    digest = hashlib.sha256(agent_id.encode("utf-8", "replace")).hexdigest()[:40]
    return os.path.join(root, DIR, "h-" + digest)


def session_role(session: str) -> str:
    """The role of a session id (`sess-YYYYMMDD-HHMM-<role>@<machine>`), here where the
    hooks read it without the state layer's imports (shared/state/context.py exports it)."""
    # `sess-\d{8}-\d{4}-(?P<role>[^@]+)@(?P<host>.+)$`, read without `re`
    if not session.startswith("sess-"):
        return ""
    rest = session[5:]
    if not (rest[:8].isdecimal() and len(rest[:8]) == 8 and rest[8:9] == "-"
            and rest[9:13].isdecimal() and len(rest[9:13]) == 4 and rest[13:14] == "-"):
        return ""
    role, at, host = rest[14:].partition("@")
    host = host.removesuffix("\n")
    if not role or not at or not host or "\n" in host:
        return ""
    return role.split(".")[0]


def record(root: StrPath, agent_id: str, session: str) -> str:
    """Map an agent's session id to a hunkwise session (atomic: temp file, rename)."""
    path = _file(root, agent_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(session + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def lookup(root: StrPath, agent_id: str) -> str | None:
    """The hunkwise session mapped to this agent session id, or None."""
    if not agent_id or len(agent_id) > _MAX_ID:
        return None
    try:
        with open(_file(root, agent_id), encoding="utf-8") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


# ---- finding the state directory without a git process -----------------------------------

def git_common_dir(start: StrPath) -> str | None:
    """The git common directory of the repository holding `start`, found by reading
    `.git` (a directory, or a linked worktree's `gitdir:` file and its `commondir`); None
    where discovery is bounded or the layout is not the plain one (git decides then)."""
    if any(os.environ.get(k) for k in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                                       "GIT_DISCOVERY_ACROSS_FILESYSTEM")):
        return None
    here = os.path.realpath(start)
    while True:
        dot = os.path.join(here, ".git")
        if os.path.isdir(dot):
            return _common_of(dot)
        if os.path.isfile(dot):
            try:
                with open(dot, encoding="utf-8") as f:
                    line = f.read().strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not line.startswith("gitdir:"):
                return None
            gd = os.path.join(here, line[len("gitdir:"):].strip())
            return _common_of(os.path.realpath(gd))
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up


def _common_of(git_dir: str) -> str | None:
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as f:
            rel = f.read().strip()
    except FileNotFoundError:
        return git_dir
    except (OSError, UnicodeDecodeError):
        return None
    return os.path.realpath(os.path.join(git_dir, rel))


def state_root(start: StrPath, env: Mapping[str, str]) -> str | None:
    """The state directory (`$COORD_DIR`, else `coord/` in the git common directory), as
    `store.layout` finds it, for a hook started in `start`."""
    if env.get("COORD_DIR"):
        return os.path.realpath(env["COORD_DIR"])
    common = git_common_dir(start)
    if common is None:
        try:
            from hunkwise.shared import git

            common = str(git.common_dir(git.toplevel(str(start))))
        except Exception:  # not in a repository: no state
            return None
    return os.path.join(common, "coord")


def env_agent_session(env: Mapping[str, str], start: StrPath | None = None) -> str | None:
    """The hunkwise session the agent running this command is mapped to (its own session
    variable, looked up in the state of the tree at `start`, the current folder by
    default), or None."""
    found = agent_identity(env)
    if found is None:
        return None
    root = state_root(os.getcwd() if start is None else start, env)
    return lookup(root, found[1]) if root is not None else None


def session_for(data: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The hunkwise session of the agent making this tool call (its hook payload): the
    payload's `session_id` mapped at `worker start` first, then `$COORD_SESSION`; '' when
    neither says."""
    agent_id = data.get("session_id")
    if isinstance(agent_id, str) and agent_id:
        # the tree the hook guards (hook.TOP), else the call's folder
        start = data.get("hunkwise_top") or data.get("cwd")
        root = state_root(start if isinstance(start, str) and start else os.getcwd(), env)
        found = lookup(root, agent_id) if root is not None else None
        if found:
            return found
    return env.get("COORD_SESSION", "").strip()
