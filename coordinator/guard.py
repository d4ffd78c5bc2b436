"""The agent guard: an allow-list of what a worker's agent may run or write in the shared tree.

`coord guard` is an agent's PreToolUse hook (Claude Code, Codex): the tool call arrives as
JSON on stdin; exit 2 with a reason on stderr blocks it. For anyone but the coordinator:

- shell commands: every simple command is resolved to the program it runs (programs.py,
  runners.py, builtins.py): read-only git passes; every other git invocation, dangerous git
  settings in any form, git behind a wrapper, a code string, a function, a trap, an alias or
  another name, and whatever the lexer cannot resolve, is blocked; so are the coordinator's
  own `coord` commands (reads pass);
- file writes (Edit, Write, NotebookEdit, Codex's apply_patch, and shell writes whose targets
  the line names): `.git/`, the hunkwise state and the agents' hook settings are never
  writable; for a known worker session, a file outside the grants of the tasks it holds is
  blocked, judged where the write lands, in the tree that holds the hunkwise state.

The coordinator's own session (`HUNKWISE_COORDINATOR=1`, or a session of role `coord` or
`coordinator`) is not restricted. docs/protection.md gives the rules for users.
"""

from __future__ import annotations

import os

from hunkwise.coordinator.coordallow import COORD_READS, coord_refusal  # noqa: F401
from hunkwise.coordinator.gitallow import Blocked
from hunkwise.shared import fastjson

TYPE_CHECKING = False
if TYPE_CHECKING:  # (no `typing`, `re` or `json` at run time: a hook call pays for each)
    from collections.abc import Mapping, Sequence
    from typing import Any

    from hunkwise.coordinator.scope import Scope, Write
    from hunkwise.shared.state.models import Grant

# ---- judging a command line -------------------------------------------------------------


def check_command(command: str, env: Mapping[str, str] | None = None,
                  cwd: str | None = None, scope: Scope | None = None) -> Blocked | None:
    """Why a worker may not run this shell command line, or None when it may. The files it
    names as write targets are left in `scope.writes`."""
    from hunkwise.coordinator import judges  # noqa: F401 - the table of programs, filled
    from hunkwise.coordinator.programs import check_line
    from hunkwise.coordinator.scope import Scope

    if scope is None:
        scope = Scope(env=os.environ if env is None else env, cwd=cwd)
    return check_line(command, scope)


# ---- writes against grants --------------------------------------------------------------

def patch_paths(patch: str) -> list[str]:
    """The files a Codex apply_patch writes, read as Codex reads the patch (applypatch.py);
    raises applypatch.PatchError for a patch Codex would refuse."""
    from hunkwise.coordinator import applypatch

    return applypatch.paths(patch)


def covers(grant: Grant, path: str) -> bool:
    from hunkwise.shared.hunks.globs import grant_covers

    return grant_covers(grant, path)


def check_writes(paths: Sequence[str], held: Sequence[tuple[str, Sequence[Grant]]],
                 session: str) -> Blocked | None:
    """Why a session holding these (task id, grants) may not write these repo paths."""
    if not paths:
        return None
    what = "write " + ", ".join(paths[:3])
    if not held:
        return Blocked(what, f"session {session} holds no active task, so it has no grants",
                       "claim your task with `worker start TASK_ID` (in a session started with "
                       "that COORD_SESSION), or report `worker blocked TASK_ID --reason ...`")
    grants = [g for _t, gs in held for g in gs]
    outside = [p for p in paths if not any(covers(g, p) for g in grants)]
    if not outside:
        return None
    tasks = ", ".join(t for t, _g in held)
    why = (f"{', '.join(outside[:5])} is outside the grants of {tasks} "
           f"({', '.join(str(g) for g in grants) or 'none'})")
    if "coord.toml" in outside:
        why += "; coord.toml holds the coordinator's settings"
    return Blocked(what, why, "edit only files your grants name; if the task needs this file, "
                   "stop and report `worker blocked TASK_ID --reason \"needs <path>\"`")


def _covers_tree(grant: Grant, rel: str) -> bool:
    """Whether the grant covers every file under the directory `rel` ("" for the root)."""
    base = f"{rel}/" if rel else ""
    return grant.kind == "glob" and all(covers(grant, base + probe) for probe in (
        "\x01probe", "\x01probe/\x01deeper/\x01file", ".\x01hidden"))


def _granted_paths(grants: Sequence[Grant]) -> str:
    out = []
    for g in grants:
        p = g.path
        p = p[:-3] if p.endswith("/**") else p
        out.append(p)
    return " ".join(out)


def check_tree_write(rel: str, held: Sequence[tuple[str, Sequence[Grant]]], session: str,
                     what: str, formatter: str) -> Blocked | None:
    """Why a session may not rewrite every file under the directory `rel`."""
    grants = [g for _t, gs in held for g in gs]
    if any(_covers_tree(g, rel) for g in grants):
        return None
    where = rel or "the whole tree"
    tasks = ", ".join(t for t, _g in held) or "no task"
    instead = (f"pass only your granted paths: `{formatter} {_granted_paths(grants)}`"
               if formatter and grants else
               "name only files your grants cover; if the task needs more, report "
               "`worker blocked TASK_ID --reason \"needs <path>\"`")
    return Blocked(what, f"it rewrites files under {where}, beyond the grants of {tasks} "
                   f"({', '.join(str(g) for g in grants) or 'none'})", instead)


# ---- where a write lands: protected files, the served tree --------------------------------

def _hook_settings(parts: list[str]) -> bool:
    low = [p.lower() for p in parts]
    for i, p in enumerate(low):
        if p == ".codex":
            return True
        if p == ".claude" and i + 1 < len(low) and low[i + 1].startswith("settings") and \
                low[i + 1].endswith(".json"):
            return True
    return False


# Files outside any working tree that change what git or a shell runs for every session
# (a global `diff.external`, a clean filter, an fsmonitor hook; a line in a login shell's
# startup file): a worker that wrote one would run code inside other sessions' calls.
_STARTUP = frozenset({".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
                      ".bash_aliases", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".kshrc",
                      ".mkshrc"})


def _outside(real: str, env: Mapping[str, str], tree: bool = False) -> str | None:
    """Why a worker may not write this path outside the working trees: git's global or
    system settings, a shell's startup file, this installation of hunkwise or the Python
    environment that runs its hooks (`tree`: or a folder holding one)."""
    home = env.get("HOME") or os.path.expanduser("~")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    git_says = "it is git's own settings for every repository, which run code in every session"
    files = [os.path.join(home, ".gitconfig"), "/etc/gitconfig",
             *(env[k] for k in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM") if env.get(k))]
    places = [(os.path.realpath(f), git_says, False) for f in files if f != os.devnull]
    places.append((os.path.realpath(os.path.join(xdg, "git")), git_says, True))
    shell_says = "it is a shell's startup file, which runs in every session's shell"
    places += [(os.path.join(os.path.realpath(home), f), shell_says, False) for f in _STARTUP]
    places += [(os.path.realpath(os.path.join(home, ".bashrc.d")), shell_says, True),
               (os.path.realpath(os.path.join(xdg, "fish")), shell_says, True)]
    own_says = ("it is hunkwise's own installation (the guard and its hooks) or the Python "
                "that runs them")
    places += [(root, own_says, True) for root in _installed()]
    for place, why, folder in places:
        if real == place or (folder and real.startswith(place + os.sep)):
            return why
        if tree and place.startswith(real.rstrip(os.sep) + os.sep):
            return ("it holds git's settings for every repository, a shell's startup files or "
                    "hunkwise's own installation, which run code in every session")
        if not folder and os.path.dirname(real) == os.path.dirname(place) and \
                os.path.basename(real).startswith(os.path.basename(place) + "."):
            return why  # (its lock file, or a copy git would rename over it)
    return None


_INSTALLED: list[str] = []


def _installed() -> list[str]:
    """The folders this hunkwise runs from: its package (and, installed editable, the
    source it points to) and the Python environment's prefix (found once a process)."""
    if not _INSTALLED:
        import sys

        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        found = {here, os.path.realpath(here),
                 os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                 os.path.realpath(sys.prefix)}
        _INSTALLED.extend(sorted(f for f in found if f and f != os.sep))
    return _INSTALLED


def protected(real: str, tree: bool = False, env: Mapping[str, str] | None = None) -> str | None:
    """Why no worker may write this path (a real, absolute path): inside a git directory,
    or an agent's hook settings; outside every served tree, git's global settings, a shell's
    startup file or this installation. (The state directory is checked against the served
    tree.)"""
    parts = real.split(os.sep)
    if any(p.lower().rstrip(". ") == ".git" or p.lower() == "git~1" for p in parts):
        return "it is inside a .git directory: git's settings, hooks and refs are the coordinator's"
    if _hook_settings(parts):
        return "it is an agent's hook settings, which keep the guard on"
    if env is not None:
        why = _outside(real, env, tree)
        if why is not None:
            return why
    if tree:
        import glob

        inside = [".git", ".codex", ".claude/settings*.json"]
        if os.path.basename(real).lower() == ".claude":
            inside.append("settings*.json")
        for pattern in inside:
            found = glob.glob(os.path.join(glob.escape(real), pattern), include_hidden=True)
            if found or os.path.lexists(os.path.join(real, pattern)):
                return f"it holds {pattern}, which is never a worker's to write"
    return None


def served_tree(real: str) -> tuple[str, str] | None:
    """(root, state directory) of the outermost working tree holding `real` that has
    hunkwise state: a nested repository inside it is still inside its grants. Found as
    `store.layout` finds it, without the state layer (its imports cost every hook call)."""
    from hunkwise.shared.state.identity import state_root

    found = None
    d = real if os.path.isdir(real) else os.path.dirname(real)
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            try:
                root = state_root(d, os.environ)
            except Exception:  # noqa: BLE001 - not a repository git can read
                root = None
            if root is not None and os.path.exists(os.path.join(root, "state.json")):
                found = (d, root)
        parent = os.path.dirname(d)
        if parent == d:
            return found
        d = parent


# ---- the hook ---------------------------------------------------------------------------

SHELL_TOOLS = {"Bash", "shell", "local_shell", "exec_command", "shell_command", "container.exec",
               "Monitor"}
EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
PATCH_TOOLS = {"apply_patch"}
OPAQUE_TOOLS = {"PowerShell"}


def is_coordinator(env: Mapping[str, str]) -> bool:
    from hunkwise.shared.state.identity import session_role  # not context's: no state layer

    if env.get("HUNKWISE_COORDINATOR") == "1":
        return True
    return session_role(env.get("COORD_SESSION", "").strip()) in ("coord", "coordinator")


def worker_session(data: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The worker making this call: the agent's own session id (the payload's
    `session_id`, mapped at `worker start`), else `$COORD_SESSION`; '' when unknown."""
    from hunkwise.shared.state.identity import session_for

    return session_for(data, env)


def _session(data: dict[str, Any], env: Mapping[str, str]) -> str | None:
    """The hunkwise session making this tool call, or None when unknown."""
    return worker_session(data, env) or None


def _refuse(what: str) -> tuple[int, str]:
    return 2, (f"hunkwise guard: {what}, so it cannot be checked; `coord guard` is meant to run "
               "as an agent's PreToolUse hook")


_UNREAD: Any = object()


def guard(stdin_text: str, env: Mapping[str, str] | None = None,
          data: Any = _UNREAD) -> tuple[int, str]:
    """A PreToolUse hook: (exit code, message). Exit 2 blocks the tool call. `data` is the
    payload when the caller has parsed `stdin_text` already (None: it is no JSON)."""
    env = os.environ if env is None else env
    if is_coordinator(env):
        return 0, ""
    if data is _UNREAD:
        try:
            data = fastjson.loads(stdin_text)
        except (ValueError, RecursionError):
            data = None
    if not isinstance(data, dict):
        return _refuse("the tool call on stdin is not a JSON object")
    tool = data.get("tool_name")
    ti = data.get("tool_input")
    if tool not in SHELL_TOOLS | EDIT_TOOLS | PATCH_TOOLS | OPAQUE_TOOLS:
        return 0, ""
    if not isinstance(ti, dict):
        return _refuse(f"a {tool} call whose tool_input is not an object")
    from hunkwise.coordinator.scope import SHOWN, Scope, Write

    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) and data["cwd"] else os.getcwd()
    scope = Scope(env=env, cwd=cwd, held=lambda: _tasks_held(data, env))
    if tool in SHELL_TOOLS:
        cmd = ti.get("command")
        if isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd):
            import shlex

            cmd = shlex.join(cmd)
        if not isinstance(cmd, str):
            return _refuse(f"a {tool} call without a command string")
        found = check_command(cmd, scope=scope)
        bg = ti.get("run_in_background")
        if found is None and (tool == "Monitor" or bg is True or bg == 1 or (
                isinstance(bg, str) and bg.strip().lower() in ("true", "1", "yes"))):
            # Claude Code's `run_in_background` and its Monitor tool run the command on
            # after the call returns: what it writes then, the check that follows every
            # call never sees (as `cmd &`, refused by check_command).
            found = Blocked(cmd.strip().replace("\n", "; ")[:SHOWN],
                            "it runs in the background, on past the check that follows every "
                            "call (a write it makes then is never put back)",
                            "run it in the foreground")
    elif tool in OPAQUE_TOOLS:
        cmd = ti.get("command")
        if not isinstance(cmd, str):
            return _refuse(f"a {tool} call without a command string")
        found = _opaque_shell(tool, cmd)
    elif tool in EDIT_TOOLS:
        key = "notebook_path" if tool == "NotebookEdit" and "file_path" not in ti else "file_path"
        path = ti.get(key)
        if not isinstance(path, str) or not path or "\0" in path:
            return _refuse(f"a {tool} call without a {key} string")
        scope.writes.append(Write(scope.where(path), f"{tool} {path}"))
        other = ti.get("notebook_path") if key == "file_path" else None
        if other is not None:  # both given: whichever the tool writes, each is judged
            if not isinstance(other, str) or not other or "\0" in other:
                return _refuse(f"a {tool} call whose notebook_path is not a path")
            scope.writes.append(Write(scope.where(other), f"{tool} {other}"))
        found = None
    else:
        patch = next((ti[k] for k in ("command", "input", "patch") if isinstance(ti.get(k), str)),
                     None)
        if patch is None:
            return _refuse("an apply_patch call without a patch")
        from hunkwise.coordinator.applypatch import PatchError

        try:
            targets = patch_paths(patch)
        except PatchError as e:
            return 2, Blocked("apply_patch", f"the patch cannot be read as Codex reads it ({e})",
                              "write a well-formed patch").message()
        scope.writes += [Write(scope.where(t), f"apply_patch {t}") for t in targets]
        found = None
    if found is None and scope.writes:  # (`ls -la` writes nothing: no state read, no import)
        found = judge_writes(scope.writes, _session(data, env), env)
    return (0, "") if found is None else (2, found.message())


def _tasks_held(data: dict[str, Any], env: Mapping[str, str]) -> list[str] | None:
    """The ids of the active tasks the worker making this call holds; None when the call
    is no known worker's (or the state cannot be read)."""
    session = _session(data, env)
    top = data.get("hunkwise_top") or data.get("cwd") or os.getcwd()
    if session is None or not isinstance(top, str):
        return None
    served = served_tree(os.path.realpath(top))
    if served is None:
        return None
    from hunkwise.shared.errors import CoordError

    try:
        return [t for t, _g in held_by(served[0], served[1], session)]
    except CoordError:
        return None


def _opaque_shell(tool: str, command: str) -> Blocked | None:
    from hunkwise.coordinator import codescan

    why = codescan.opaque_verdict(command)
    if why is None and codescan.names_git(command):
        why = "it names git, and the guard cannot follow this shell's syntax"
    if why is None:
        return None
    return Blocked(command.strip()[:120], f"this {tool} command: {why}",
                   "run read-only git from the Bash tool, directly")


# The state document the light reader knows (models.STATE_VERSION; a test holds the two
# together): any other version, or anything odd in it, goes to the state layer instead.
LIGHT_STATE_VERSION = 2
_INACTIVE = {"accepted", "rejected", "reverted"}


class LightGrant:
    """A grant as the state document holds it, read without the state layer (its imports
    cost every hook call): kind and path for judging; shown (str) as the models show it."""

    __slots__ = ("doc", "kind", "path")

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc, self.kind, self.path = doc, doc["kind"], doc["path"]

    def __str__(self) -> str:  # only for a refusal's message
        from hunkwise.shared.state.models import Task

        task = Task.model_validate({"id": "x", "title": "x", "expect": "x", "created_at": 0.0,
                                    "updated_at": 0.0, "grants": [self.doc]})
        return str(task.grants[0])


def _held_light(where: str, session: str) -> list[tuple[str, list[Any]]] | None:
    """(task id, grants) of the active tasks `session` holds, read from the state document
    with json alone; None when it is not the plain document of LIGHT_STATE_VERSION."""
    try:
        with open(os.path.join(where, "state.json"), "rb") as f:
            doc = fastjson.loads(f.read())
        if not isinstance(doc, dict) or doc.get("version") != LIGHT_STATE_VERSION:
            return None
        out: list[tuple[str, list[Any]]] = []
        for tid, t in sorted(doc["tasks"].items()):
            if not isinstance(t, dict) or t.get("id") != tid:
                return None
            claim = t.get("claim")
            mine = t.get("session") == session or (
                isinstance(claim, dict) and claim.get("session") == session)
            if t.get("state", "assigned") in _INACTIVE or not mine:
                continue
            grants = t.get("grants", [])
            if not isinstance(grants, list) or not all(
                    isinstance(g, dict) and g.get("kind") in ("glob", "range", "point")
                    and isinstance(g.get("path"), str) for g in grants):
                return None
            out.append((tid, [LightGrant(g) for g in grants]))
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def held_by(root: str, where: str, session: str) -> list[tuple[str, list[Any]]]:
    """(task id, grants) of the active tasks `session` holds in the tree `root` whose state
    directory is `where`: read lightly, or by the state layer (CoordError if unreadable)."""
    got = _held_light(where, session)
    if got is not None:
        return got
    from pathlib import Path

    from hunkwise.shared.state import store

    state = store.load(store.Layout(repo=Path(root), root=Path(where)))
    return [(t.id, list(t.grants)) for t in sorted(state.tasks.values(), key=lambda t: t.id)
            if t.active and (t.session == session or (t.claim is not None
                                                      and t.claim.session == session))]


def judge_writes(writes: Sequence[Write], session: str | None,
                 env: Mapping[str, str] | None = None) -> Blocked | None:
    """Why these writes may not happen: a protected file for anyone but the coordinator; a
    file outside the grants, for a known worker session, in the tree with hunkwise state.
    Outside every served tree (`env`: the call's environment), git's global settings, a
    shell's startup file and this installation are protected too."""
    states: dict[str, Any] = {}
    for w in writes:
        if not os.path.isabs(w.path):
            continue  # where it lands is unknown (a `cd` the guard could not follow)
        real = os.path.realpath(w.path)
        served = served_tree(real)
        # formatters skip .git and rewrite only source files: their trees are judged by grants;
        # `find DIR -delete` removes some files under DIR: only DIR itself is judged
        holds = w.tree and not w.formatter and w.judged
        # (Inside a served tree its grants decide: a tree may be hunkwise's own source.)
        out_env = env if served is None else None
        why = protected(real, holds, out_env)
        if why is None and w.path != real:
            why = protected(os.path.normpath(w.path), holds, out_env)
        if why is None and not w.judged and os.path.basename(real).lower() == ".claude":
            why = "it holds the agent's hook settings, which keep the guard on"
        if why is None and served is not None:
            state_root = os.path.realpath(served[1])
            if real == state_root or real.startswith(state_root + os.sep) or (
                    holds and state_root.startswith(real.rstrip(os.sep) + os.sep)):
                why = "it is the hunkwise state, which only coord and worker commands write"
        if why is not None:
            return Blocked(w.what, f"{w.path}: {why}", "leave it alone; if your task needs "
                           "it, report `worker blocked TASK_ID --reason \"...\"`")
        if served is None or session is None or not w.judged:
            continue
        root, where = served
        if root not in states:
            from hunkwise.shared.errors import CoordError

            try:
                states[root] = held_by(root, where, session)
            except CoordError as e:
                return Blocked(w.what, f"the hunkwise state is unreadable ({e})",
                               "ask the coordinator")
        held = states[root]
        rel = os.path.relpath(real, os.path.realpath(root)).replace(os.sep, "/")
        rel = "" if rel == "." else rel
        if w.tree:
            found = check_tree_write(rel, held, session, w.what, w.formatter) if held else \
                check_writes([rel or "."], held, session)
        else:
            found = check_writes([rel], held, session)
        if found is not None:
            return Blocked(w.what, found.why, found.instead)
    return None
