"""The agent hooks' entry point: `python -m hunkwise.coordinator.hook pre|post|config`.

`coord install-hooks --agent claude|codex` writes this module into the agent's hook
settings (with the absolute interpreter of this installation); `coord guard` stays as the
same PreToolUse check behind click. It runs on every tool call of every agent in the tree,
so it imports neither click nor the state layer unless the call needs them: a shell line
naming no git and no coord is judged by the lexer alone.

- `pre` (PreToolUse): the guard's judgement (guard.py: exit 2 blocks, the reason on
  stderr); then, for a worker, the call's record and, for a shell call, the bracket's
  before-record (bracket.py).
- `post` (PostToolUse): closes the call's record; records the lines an Edit, Write,
  NotebookEdit or apply_patch wrote (provenance); for a worker's shell call, puts back
  what it wrote outside the grants and tells the agent (`additionalContext`, which both
  Claude Code and Codex hand to the model, and `systemMessage` for the user).
- `config` (Claude Code's ConfigChange): refuses a settings change that would drop the
  hunkwise hooks from the session (exit 2), unless it comes from the coordinator.

The payload is read whole, whatever its size.
"""

from __future__ import annotations

import os
import sys

from hunkwise.shared import fastjson

# Paths are os.path strings until a call needs git, and neither `typing`, `re`, `json` nor
# pathlib is imported on the way of a plain call: each costs every tool call milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from typing import Any

SHELLS = {"Bash", "PowerShell", "Monitor", "shell", "local_shell", "exec_command",
          "shell_command", "container.exec"}
EDITS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
PATCHES = {"apply_patch"}

Result = tuple[int, str, str]  # (exit code, stdout, stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    event = args[0] if args else "pre"
    top = args[1] if len(args) > 1 else None
    code, out, err = run(event, sys.stdin.buffer.read(), os.environ, top)
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err + "\n")
    return code


def run(event: str, raw: bytes, env: Mapping[str, str], top: str | None = None) -> Result:
    """One hook call. `top`: the working tree whose settings installed this hook (written
    into the command by `coord install-hooks`): the tree it guards, wherever the call's
    folder is (a `cd /tmp`, a nested repository)."""
    text = raw.decode("utf-8", "replace")
    if event not in ("pre", "post", "config"):
        return 2, "", f"hunkwise hook: unknown event {event!r} (pre, post, config)"
    data = _payload(text)
    if data is not None and top and os.path.isdir(top):
        data[TOP] = os.path.realpath(top)
    if event == "pre":
        return pre(text, env, data)
    if event == "post":
        return post(text, env, data)
    return config(text, env, data)


# The key under which `run` hands the guarded tree to the rest of the call (never a key
# any agent sends).
TOP = "hunkwise_top"
_UNSET: Any = object()


def _payload(text: str) -> dict[str, Any] | None:
    try:
        data = fastjson.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _top(data: Mapping[str, Any]) -> str | None:
    """The working tree's top level: the tree the hook was installed for, else found from
    the call's cwd by its `.git`."""
    top = data.get(TOP)
    if isinstance(top, str):
        return top
    cwd = data.get("cwd")
    here = os.path.realpath(cwd if isinstance(cwd, str) and cwd else os.getcwd())
    while not os.path.lexists(os.path.join(here, ".git")):
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up
    return here


def _cwd(data: Mapping[str, Any], top: str) -> str:
    """The folder the call runs in (relative paths are its), else the tree's top."""
    cwd = data.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else top


def _path(p: str) -> Path:
    from pathlib import Path

    return Path(p)


def _rel(top: str, path: str, data: Mapping[str, Any]) -> str | None:
    """A tool's file path as a repository path (None: outside the tree)."""
    cwd = data.get("cwd")
    base = cwd if isinstance(cwd, str) and cwd else top
    real = os.path.realpath(os.path.join(base, path))
    root = os.path.realpath(top)
    if os.path.commonpath([real, root]) != root or real == root:
        return None
    rel = os.path.relpath(real, root).replace(os.sep, "/")
    return None if rel == ".git" or rel.startswith(".git/") else rel


def _tool_input(data: Mapping[str, Any]) -> dict[str, Any]:
    ti = data.get("tool_input")
    return ti if isinstance(ti, dict) else {}


# coord commands that never write the working tree (they commit, record, serve or read):
# the coordinator running one, a long `coord watch` say, leaves every worker's put-back on.
_TREE_UNTOUCHED = {"status", "inbox", "diff", "index", "signals", "decisions", "watch",
                   "board", "next", "verify", "accept", "assign", "edit", "grant", "decide",
                   "request-changes", "stop", "attach", "freeze", "thaw", "launch", "review",
                   "audit", "reports"}


def _leaves_the_tree(command: Any) -> bool:
    """Is this shell line one plain `coord SUB ...` of `_TREE_UNTOUCHED` (no other command,
    no redirection, no substitution)?"""
    if not isinstance(command, str) or "coord" not in command or \
            any(c in command for c in ";&|<>`$()\n\\"):
        return False
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return False
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # VAR=value before the command
    if not words or os.path.basename(words[0]) != "coord":
        return False
    sub = next((w for w in words[1:] if not w.startswith("-")), "")
    return sub in _TREE_UNTOUCHED


def _who(data: Mapping[str, Any], session: str) -> str:
    """Whose call this is, for overlaps: the hunkwise session, else the agent's own."""
    if session:
        return session
    sid = data.get("session_id")
    return f"agent:{sid}" if isinstance(sid, str) and sid else "agent:?"


def _coordinator(env: Mapping[str, str]) -> bool:
    """guard.is_coordinator, without importing the guard's lexer (a PostToolUse call judges
    nothing)."""
    from hunkwise.shared.state.identity import session_role

    if env.get("HUNKWISE_COORDINATOR") == "1":
        return True
    return session_role(env.get("COORD_SESSION", "").strip()) in ("coord", "coordinator")


# ---- PreToolUse ---------------------------------------------------------------------------

def _bracketed(data: dict[str, Any] | None, env: Mapping[str, str]
               ) -> tuple[dict[str, Any], Any, str, str] | None:
    """(payload, tool, top level, state folder) of a call the bracket follows: a shell
    call, an edit or a patch, in a tree that holds a hunkwise state; else None."""
    if data is None:
        return None
    tool = data.get("tool_name")
    if tool not in SHELLS and tool not in EDITS and tool not in PATCHES:
        return None
    top = _top(data)
    if top is None:
        return None
    from hunkwise.shared.state.identity import state_root

    root = state_root(top, env)
    if root is None or not os.path.isdir(root):
        return None
    return data, tool, top, root


def pre(text: str, env: Mapping[str, str], parsed: Any = _UNSET) -> Result:
    from hunkwise.coordinator import guard

    data = _payload(text) if parsed is _UNSET else parsed
    code, message = guard.guard(text, env, data)
    if code != 0:
        return code, "", message
    found = _bracketed(data, env)
    if found is None:
        return 0, "", ""  # not a call that writes, or no hunkwise state in this tree
    data, tool, top, root = found
    session = "" if _coordinator(env) else guard.worker_session(data, env)
    from hunkwise.coordinator import bracket

    ti = _tool_input(data)
    before = None
    settings: dict[str, str] | None = None
    paths: list[str] | None
    if tool in SHELLS and not session and _leaves_the_tree(ti.get("command")):
        paths = []  # the coordinator's `coord watch`: a call that overlaps nobody's
    elif tool in SHELLS:
        paths = None
        if session:
            settings = bracket.settings_before(top)
            try:
                before = bracket.before(top, root, session)
            except Exception as e:  # the call runs unbracketed rather than not at all
                bracket.open_call(root, data, _who(data, session), paths, None, settings)
                return 0, "", f"hunkwise: the tree could not be recorded before this call ({e})"
    else:
        paths = [r for r in (_rel(top, p, data) for p in _written_paths(tool, ti)) if r]
        target = ti.get("file_path")
        if session and tool == "Write" and isinstance(target, str) and target:
            # A Write replaces the whole file: what it changed is known only against what
            # was there, kept until its after-hook.
            bracket.keep_prior(root, data, os.path.join(_cwd(data, top), target))
    bracket.open_call(root, data, _who(data, session), paths, before, settings)
    return 0, "", ""


def _written_paths(tool: Any, ti: Mapping[str, Any]) -> list[str]:
    if tool in EDITS:
        p = ti.get("file_path") or ti.get("notebook_path")
        return [p] if isinstance(p, str) and p else []
    text = _patch_text(ti) or ""
    try:
        from hunkwise.coordinator.applypatch import paths

        return paths(text)  # deleted files too: another call's check must not undo them
    except Exception:
        return list(_patch_changes(text))


# ---- PostToolUse --------------------------------------------------------------------------

def post(text: str, env: Mapping[str, str], parsed: Any = _UNSET) -> Result:
    found = _bracketed(_payload(text) if parsed is _UNSET else parsed, env)
    if found is None:
        return 0, "", ""
    data, tool, top, root = found
    from hunkwise.coordinator import bracket

    rec = bracket.close_call(root, data)
    if _coordinator(env):
        return 0, "", ""
    from hunkwise.shared.state.identity import session_for

    session = session_for(data, env)  # what guard.worker_session says, without the lexer
    if not session:
        return 0, "", ""
    ti = _tool_input(data)
    patch = _patch_text(ti) if tool in PATCHES or tool in SHELLS else None
    if tool in EDITS or (tool in PATCHES and patch and "*** Begin Patch" in patch):
        _note_tool(top, root, session, tool, ti, data, patch)
        return 0, "", ""
    # (A shell call's writes, an apply_patch run from it included, are noted by the
    # check after it, once: bracket.after.)
    if tool not in SHELLS or rec is None:
        return 0, "", ""
    restored = bracket.put_back_settings(top, rec.get("settings"))
    if not isinstance(rec.get("before"), dict):
        return _told(data, bracket.Outcome(), restored)
    held: list[list[Any]] = []  # the grants, read from the state only once a file changed

    def covered(path: str) -> bool:
        from hunkwise.coordinator.guard import covers

        if not held:
            held.append(_grants(_path(top), root, session))
        return any(covers(g, path) for g in held[0])

    try:
        res = bracket.after(top, root, session, rec["before"], float(rec["start"]),
                            float(rec["end"]), covered)
    except Exception as e:
        return 0, "", f"hunkwise: the tree could not be checked after this call ({e})"
    return _told(data, res, restored)


def _told(data: Mapping[str, Any], res: Any, restored: list[str]) -> Result:
    """What the check after a shell call tells the agent (nothing when all is well)."""
    res.settings = restored
    message = res.message()
    if not message:
        return 0, "", ""
    # Context, not `decision: "block"`: a blocking PostToolUse hook ends Claude Code's turn
    # (unless configured with continueOnBlock, 2.1.139); the agent should read this and go
    # on. `systemMessage` shows it to the user as well. Codex reads both fields the same.
    event = data.get("hook_event_name")
    doc = {"systemMessage": message,
           "hookSpecificOutput": {"hookEventName": event if event == "PostToolUseFailure"
                                  else "PostToolUse", "additionalContext": message}}
    return 0, fastjson.dumps(doc) + "\n", ""


def _grants(top: Path, root: str, session: str) -> list[Any]:
    """The grants of the active tasks `session` holds (the state, read only here: a shell
    call changed something)."""
    from hunkwise.coordinator.guard import held_by
    from hunkwise.shared.errors import CoordError

    try:
        return [g for _t, gs in held_by(str(top), root, session) for g in gs]
    except CoordError:
        return []


def _patch_text(ti: Mapping[str, Any]) -> str | None:
    for k in ("command", "input", "patch"):
        v = ti.get(k)
        if isinstance(v, str):
            return v
        if isinstance(v, list) and all(isinstance(a, str) for a in v):
            return "\n".join(v)
    return None


def _patch_changes(patch: str) -> dict[str, tuple[list[bytes], list[bytes]]]:
    """{path: (added lines, removed lines)} of an apply_patch envelope (`*** Add File:` /
    `*** Update File:` / `*** Move to:` sections, their `+` and `-` lines; a context line
    is neither)."""
    out: dict[str, tuple[list[bytes], list[bytes]]] = {}
    current: tuple[list[bytes], list[bytes]] | None = None
    for raw in patch.split("\n"):
        line = raw.rstrip("\r")
        head = line.strip()
        for mark in ("*** Add File:", "*** Update File:", "*** Move to:"):
            if head.startswith(mark):
                current = out.setdefault(head[len(mark):].strip(), ([], []))
                break
        else:
            if head.startswith("*** Delete File:") or head.startswith("*** End Patch"):
                current = None
            elif current is not None and line.startswith("+"):
                current[0].append(line[1:].encode("utf-8", "replace"))
            elif current is not None and line.startswith("-"):
                current[1].append(line[1:].encode("utf-8", "replace"))
    return {p: v for p, v in out.items() if p}


def _changed(new: str | bytes, old: str | bytes) -> tuple[list[bytes], list[bytes]]:
    """The lines `new` has that `old` has not, and those it lost (counted): a context
    line an Edit's new_string repeats from its old_string is neither."""
    def lines(t: str | bytes) -> dict[bytes, int]:
        b = t.encode("utf-8", "replace") if isinstance(t, str) else t
        counts: dict[bytes, int] = {}
        for ln in b.split(b"\n"):
            counts[ln] = counts.get(ln, 0) + 1
        return counts

    def minus(a: dict[bytes, int], b: dict[bytes, int]) -> list[bytes]:
        # Counter's a - b, then its elements(): in a's order, each as often as it is left
        return [ln for ln, k in a.items() for _ in range(k - b.get(ln, 0))]

    n, o = lines(new), lines(old)
    return minus(n, o), minus(o, n)


def _note_tool(top: str, root: str, session: str, tool: Any, ti: Mapping[str, Any],
               data: Mapping[str, Any], patch: str | None) -> None:
    """Provenance of a file tool call: the whole lines it wrote and removed, never the
    lines it only repeated (an Edit's context, a Write's unchanged lines)."""
    from hunkwise.coordinator import bracket
    from hunkwise.shared.state import provenance

    changed: dict[str, tuple[list[bytes], list[bytes]]] = {}
    if tool in EDITS:
        p = ti.get("file_path") or ti.get("notebook_path")
        pairs = [(ti.get("new_string"), ti.get("old_string"))]
        edits = ti.get("edits")
        if isinstance(edits, list):
            pairs += [(e.get("new_string"), e.get("old_string")) for e in edits
                      if isinstance(e, dict)]
        added: list[bytes] = []
        removed: list[bytes] = []
        for new, old in pairs:
            if isinstance(new, str):
                a, r = _changed(new, old if isinstance(old, str) else "")
                added += a
                removed += r
        content = ti.get("content")
        if isinstance(content, str):
            prior = bracket.take_prior(root, data)
            a, r = _changed(content, prior or b"")
            added += a
            removed += r
        source = ti.get("new_source")
        if isinstance(source, str):
            added += [ln.encode("utf-8", "replace") for ln in source.split("\n")]
        if isinstance(p, str) and p:
            changed[p] = (added, removed)
    elif patch:
        changed = _patch_changes(patch)
    for p, (added, removed) in changed.items():
        rel = _rel(top, p, data)
        if rel is not None and (added or removed):
            provenance.note(root, session, rel, added, removed)


# ---- ConfigChange (Claude Code) -----------------------------------------------------------

def config(text: str, env: Mapping[str, str], parsed: Any = _UNSET) -> Result:
    data = _payload(text) if parsed is _UNSET else parsed
    if data is None or _coordinator(env):
        return 0, "", ""
    top = _top(data)
    if top is None:
        return 0, "", ""
    from hunkwise.coordinator.hooks import agent_hook_present

    if agent_hook_present(_path(top), "claude"):
        return 0, "", ""
    return 2, "", ("hunkwise: this change removes the hunkwise hooks from "
                   ".claude/settings.local.json and is not applied; the coordinator removes "
                   "them with coord uninstall-hooks")


if __name__ == "__main__":
    raise SystemExit(main())
