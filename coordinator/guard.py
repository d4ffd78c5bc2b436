"""The agent guard: an allow-list of what a worker's agent may run or write in the shared tree.

`coord guard` is an agent's PreToolUse hook (Claude Code, Codex): the tool call arrives as
JSON on stdin; exit 2 with a reason on stderr blocks it. For a worker:

- shell commands: read-only git passes; every other git invocation, git behind a wrapper
  (`timeout`, `xargs`, `eval`, `sh -c`, `$(...)`...), `-c` settings that could run a
  program or define an alias, and whatever the parser cannot follow, is blocked;
- file writes (Edit, Write, MultiEdit, NotebookEdit, Codex's apply_patch): a file outside
  the grants of the tasks the session holds is blocked. The session is `$COORD_SESSION`
  in the agent's environment (a hook inherits it); without one, writes are not judged.

The coordinator's own session (`HUNKWISE_COORDINATOR=1`, or a session of role `coord` or
`coordinator`) is not restricted. This guards against accidents, not against a hostile
agent: a program the agent writes and runs is not read.

`check_command`, `check_writes` and `patch_paths` are pure and table-tested; `guard` does
the reading (stdin, environment, state).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hunkwise.coordinator.gitallow import DIRECT, PAGERS, Blocked, check_git
from hunkwise.coordinator.shell import Simple, Unparsable, Word, lex, simple_commands

if TYPE_CHECKING:
    from hunkwise.shared.state.models import Grant

# ---- judging a command line -------------------------------------------------------------

_KEYWORDS = {"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "[[", "]]"}
_NO_COMMAND = {"for", "case", "select", "in", "esac", "fi", "done", "function"}
# Programs that run their arguments as a command.
WRAPPERS = {
    "timeout", "nice", "ionice", "env", "nohup", "stdbuf", "time", "command", "exec",
    "builtin", "sudo", "doas", "chroot", "setsid", "unbuffer", "flock", "taskset", "chrt",
    "strace", "ltrace", "xargs", "parallel", "watch", "nsenter", "unshare", "runuser",
    "systemd-run", "script", "busybox", "find", "fd", "entr", "caffeinate", "coproc",
    "catchsegv", "valgrind", "faketime", "proot", "firejail", "torsocks", "npx", "uvx",
    "pipx", "make", "ssh", "su", "gdb",
}
# Programs that run a string or their stdin as code.
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "eval",
          "source", ".", "python", "python3", "perl", "ruby", "node", "php", "lua", "tclsh",
          "awk", "gawk", "osascript", "pwsh", "deno", "bun"}
_GIT_WORD = re.compile(r"(?<![\w.+-])git(?![\w.+])")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_SAFE_ENV = {"LC_ALL", "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR", "COLUMNS", "LINES",
             "GIT_PAGER", "PAGER"}


def _assignment(w: Word) -> bool:
    """NAME=value, with NAME and `=` unquoted (`'A=1' cmd` runs a program named A=1)."""
    m = _ASSIGN.match(w.text)
    return m is not None and (w.plain < 0 or m.end() <= w.plain)


def mentions_git(text: str) -> bool:
    return _GIT_WORD.search(text) is not None


def _is_git(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base == "git" or base.startswith("git-")


def check_command(command: str, depth: int = 0) -> Blocked | None:
    """Why a worker may not run this shell command line, or None when it may."""
    shown = command.strip().replace("\n", "; ")[:120]
    if depth > 6:
        return Blocked(shown, "commands nested this deep cannot be checked", DIRECT)
    try:
        lexed = lex(command)
        cmds = simple_commands(lexed)
    except Unparsable as e:
        return Blocked(shown, f"the guard cannot parse this command line ({e})",
                       "write it as plain commands the guard can read")
    for sub in lexed.subs:
        if mentions_git(sub):
            return Blocked(shown, f"git inside a substitution (`{sub.strip()[:60]}`) cannot "
                           "be checked", DIRECT)
        inner = check_command(sub, depth + 1)
        if inner is not None:
            return inner
    for cmd in cmds:
        found = _check_simple(cmd, command)
        if found is not None:
            return found
    return None


def _check_simple(cmd: Simple, line: str) -> Blocked | None:
    words = list(cmd.words)
    while words and not words[0].quoted and words[0].text in _KEYWORDS:
        words.pop(0)
    if not words or (not words[0].quoted and words[0].text in _NO_COMMAND):
        return None
    assigns = []
    while words and _assignment(words[0]):
        assigns.append(words.pop(0))
    if not words:
        return None
    head = words[0]
    shown = " ".join(w.text for w in words)[:120]
    if head.dynamic or head.glob:
        return Blocked(shown, f"the guard cannot tell which program `{head.text}` runs",
                       "name the program literally")
    name = head.text.rsplit("/", 1)[-1]
    args = " ".join(w.text for w in words[1:])
    if _is_git(head.text):
        for a in assigns:
            key, _, value = a.text.partition("=")
            key = key.rstrip("+")
            if key not in _SAFE_ENV or (key in ("GIT_PAGER", "PAGER") and value not in PAGERS):
                return Blocked(shown, f"`{key}=` before git can change what git runs or "
                               "where it writes", DIRECT)
        return check_git(words)
    if name == "command" and len(words) > 1 and words[1].text in ("-v", "-V"):
        return None
    if name in WRAPPERS and (any(_is_git(w.text) for w in words[1:]) or mentions_git(args)):
        return Blocked(shown, f"git behind `{name}` cannot be checked", DIRECT)
    if name in SHELLS:
        if mentions_git(args):
            return Blocked(shown, f"git run through `{name}` cannot be checked", DIRECT)
        reads_stdin = not any(not w.text.startswith("-") for w in words[1:])
        if reads_stdin and mentions_git(line):
            return Blocked(shown, f"`{name}` would run git from its input, which cannot be "
                           "checked", DIRECT)
    return None


# ---- writes against grants --------------------------------------------------------------

def patch_paths(patch: str) -> list[str]:
    """The files a Codex apply_patch touches: Update, Add, Delete and Move-to lines."""
    paths = []
    for line in patch.split("\n"):
        line = line.rstrip("\r")
        for head in ("*** Update File:", "*** Add File:", "*** Delete File:", "*** Move to:"):
            if line.startswith(head):
                p = line[len(head):].strip()
                if p:
                    paths.append(p)
    return paths


def covers(grant: Grant, path: str) -> bool:
    from hunkwise.shared.hunks.ownership import glob_matches

    if grant.kind == "range":
        return grant.path == path
    return glob_matches(grant.path, path)


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


# ---- the hook ---------------------------------------------------------------------------

SHELL_TOOLS = {"Bash", "shell", "local_shell", "exec_command", "shell_command", "container.exec"}
EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
PATCH_TOOLS = {"apply_patch"}


def is_coordinator(env: Mapping[str, str]) -> bool:
    from hunkwise.shared.state.identity import session_role  # not context's: no state layer

    if env.get("HUNKWISE_COORDINATOR") == "1":
        return True
    return session_role(env.get("COORD_SESSION", "").strip()) in ("coord", "coordinator")


def guard(stdin_text: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """A PreToolUse hook: (exit code, message). Exit 2 blocks the tool call."""
    env = os.environ if env is None else env
    if is_coordinator(env):
        return 0, ""
    try:
        data = json.loads(stdin_text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return 2, ("hunkwise guard: the tool call on stdin is not a JSON object, so it cannot "
                   "be checked; `coord guard` is meant to run as an agent's PreToolUse hook")
    tool = data.get("tool_name")
    ti = data.get("tool_input")
    ti = ti if isinstance(ti, dict) else {}
    if tool in SHELL_TOOLS:
        cmd = ti.get("command")
        if isinstance(cmd, list) and all(isinstance(a, str) for a in cmd):
            cmd = shlex.join(cmd)
        if not isinstance(cmd, str):
            return 2, f"hunkwise guard: a {tool} call without a command string cannot be checked"
        found = check_command(cmd)
        if found is None and "*** Begin Patch" in cmd:
            found = _writes(patch_paths(cmd), data, env)
    elif tool in EDIT_TOOLS:
        path = ti.get("file_path") or ti.get("notebook_path")
        found = _writes([path], data, env) if isinstance(path, str) and path else None
    elif tool in PATCH_TOOLS:
        patch = next((ti[k] for k in ("command", "input", "patch") if isinstance(ti.get(k), str)),
                     None)
        if patch is None:
            return 2, "hunkwise guard: an apply_patch call without a patch cannot be checked"
        found = _writes(patch_paths(patch), data, env)
    else:
        return 0, ""
    return (0, "") if found is None else (2, found.message())


def worker_session(data: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The worker making this call: the agent's own session id (the payload's
    `session_id`, mapped at `worker start`), else `$COORD_SESSION`; '' when unknown."""
    from hunkwise.shared.state.identity import session_for

    return session_for(data, env)


def _writes(paths: list[str], data: dict[str, Any], env: Mapping[str, str]) -> Blocked | None:
    """Check writes against the grants of the session's tasks, read from the state.

    `data` is the agent's tool call as its hook sends it: another tool's open JSON, read
    key by key with checks."""
    from hunkwise.shared import git
    from hunkwise.shared.errors import CoordError
    from hunkwise.shared.state import store

    session = worker_session(data, env)
    if not session or not paths:
        return None  # no worker session known: writes are not judged (see the worker skill)
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    cwd = cwd or os.getcwd()
    try:
        top = git.toplevel(cwd)
    except Exception:  # not in a repository: not our tree
        return None
    lay = store.layout(top)
    if not lay.state_file.exists():
        return None
    try:
        state = store.load(lay)
    except CoordError as e:
        return Blocked("write " + ", ".join(paths[:3]), f"the hunkwise state is unreadable ({e})",
                       "ask the coordinator")
    root = os.path.realpath(top)
    rels = []
    for p in paths:
        real = os.path.realpath(os.path.join(cwd, p))
        if os.path.commonpath([real, root]) != root:
            continue  # outside the shared tree
        rels.append(os.path.relpath(real, root).replace(os.sep, "/"))
    held = [(t.id, t.grants) for t in sorted(state.tasks.values(), key=lambda t: t.id)
            if t.active and (t.session == session or (t.claim is not None and
                                                       t.claim.session == session))]
    return check_writes(rels, held, session)
