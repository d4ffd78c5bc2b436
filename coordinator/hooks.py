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
    from hunkwise.shared.proc import Ran
    from hunkwise.shared.state.documents import AgentHook, InstallHooksResult, UninstallHooksResult

MARK = "# installed by hunkwise (coord install-hooks)"
CHAINED = ".hunkwise-chained"
HOOKS = ("pre-commit", "reference-transaction")

# A shell whose agent session variable was mapped to a worker at `worker start` is a
# worker's, whatever marks it sets: the coordinator's mark is not for it to lift.
# The hooks run at every ref update and commit in the shared tree, the coordinator's own
# included: they start no process but git, and git only where an answer needs it (a
# session variable to look up, a ref to read), not for the coordinator's plain moves.
# The id is looked up as `worker start` recorded it (shared/state/identity.py): surrounding
# blanks dropped, a plain id under its own name, any other under `h-` and the first 40 hex
# digits of its SHA-256 (a process only for such an id: both agents' ids are plain UUIDs).
_WORKER_SHELL = """worker_shell() {
  for id in "$CLAUDE_CODE_SESSION_ID" "$CODEX_THREAD_ID"; do
    id="${id#"${id%%[![:space:]]*}"}"; id="${id%"${id##*[![:space:]]}"}"
    [ -n "$id" ] && [ ${#id} -le 200 ] || continue
    case "$id" in
      [A-Za-z0-9]*[!A-Za-z0-9_.-]*|[!A-Za-z0-9]*) name=;;
      *) name="$id";;
    esac
    [ ${#id} -le 100 ] || name=
    if [ -z "$name" ]; then
      sum=$(printf %s "$id" | { sha256sum 2>/dev/null || shasum -a 256 2>/dev/null; }) || continue
      sum="${sum%% *}"; rest="${sum#????????????????????????????????????????}"
      name="h-${sum%"$rest"}"
    fi
    state="${COORD_DIR:-$(git rev-parse --git-common-dir 2>/dev/null)/coord}"
    [ -f "$state/identities/$name" ] && return 0
  done
  return 1
}
case "$0" in */*) here="${0%/*}";; *) here=.;; esac
"""

_PRE_COMMIT = f"""#!/bin/sh
{MARK}
# Workers share this tree and never commit; the coordinator commits with coord accept.
{_WORKER_SHELL}
if [ "$HUNKWISE_COORDINATOR" != 1 ] || worker_shell; then
  echo "hunkwise: commits in this shared tree are made by the coordinator only (coord accept);" >&2
  echo "hunkwise: finish your task with: worker done TASK_ID" >&2
  exit 1
fi
chained="$here/pre-commit{CHAINED}"
if [ -x "$chained" ]; then exec "$chained" "$@"; fi
exit 0
"""

_REF_TX = f"""#!/bin/sh
{MARK}
# Refuse moves of HEAD, branches and refs/stash by anyone but the coordinator, before
# they happen ("prepared"): a stash is refused before it resets the tree. The updates are
# read from stdin once, as they come (one transaction may carry thousands); they are kept
# only when a chained hook needs them too.
{_WORKER_SHELL}
check() {{
  while read -r old new ref; do
    # Only these refs are guarded: any other passes at once (a fetch's tags, git gc).
    case "$ref" in HEAD|refs/heads/*|refs/stash) ;; *) continue;; esac
    # Updates that move nothing pass: a reset to the same commit, and pack-refs (git gc),
    # which writes a ref into packed-refs at its current value, then drops the loose copy.
    [ "$old" = "$new" ] && continue
    [ "$(git rev-parse -q --verify "$ref" 2>/dev/null)" = "$new" ] && continue
    case "$new" in
      *[!0]*) ;;
      *) grep -qx "$old $ref" "$(git rev-parse --git-common-dir)/packed-refs" 2>/dev/null && continue;;
    esac
    echo "hunkwise: refusing to move $ref: this tree is shared by several workers;" >&2
    echo "hunkwise: only the coordinator commits or moves branches (coord accept)" >&2
    return 1
  done
}}
chained="$here/reference-transaction{CHAINED}"
if [ "$1" = prepared ] && {{ [ "$HUNKWISE_COORDINATOR" != 1 ] || worker_shell; }}; then
  if [ -x "$chained" ]; then
    input=$(cat)
    printf '%s\n' "$input" | check || exit 1
    printf '%s\n' "$input" | "$chained" "$@"; exit $?
  fi
  check || exit 1
  exit 0
fi
if [ -x "$chained" ]; then exec "$chained" "$@"; fi
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
MANIFEST = "hooks-installed.json"  # in the state directory: what install-hooks wrote


def _manifest_path(ctx: Ctx) -> Path:
    return ctx.lay.root / MANIFEST


def _load_manifest(ctx: Ctx) -> dict[str, Any]:
    try:
        data = json.loads(_manifest_path(ctx).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_manifest(ctx: Ctx, doc: dict[str, Any]) -> None:
    store.ensure(ctx.lay)
    store.atomic_write(_manifest_path(ctx), (json.dumps(doc, indent=2) + "\n").encode())


def _hooks_path_setting(ctx: Ctx) -> tuple[str, str] | None:
    """(scope, value) of `core.hooksPath` where it is set (system, global, local...)."""
    rc, out = git.run_rc(ctx.repo, "config", "--show-scope", "--get", "core.hooksPath")
    if rc != 0 or not out.strip():
        return None
    scope, _, value = out.decode("utf-8", "replace").rstrip("\n").partition("\t")
    return scope, value


def _inside_tree(ctx: Ctx, d: Path) -> bool:
    root = os.path.realpath(ctx.repo)
    real = os.path.realpath(d)
    return os.path.commonpath([root, real]) == root


def _refuse_tracked(ctx: Ctx, d: Path) -> None:
    """A hooks folder holding tracked files is the project's: hunkwise never writes there."""
    if not _inside_tree(ctx, d):
        return
    common = os.path.realpath(git.common_dir(ctx.repo))
    if os.path.commonpath([common, os.path.realpath(d)]) == common:
        return  # .git/hooks: inside the repository's own directory, never tracked
    rel = os.path.relpath(os.path.realpath(d), os.path.realpath(ctx.repo))
    tracked = git.run(ctx.repo, "ls-files", "-z", "--", rel,
                      env={"GIT_LITERAL_PATHSPECS": "1"})
    if tracked.strip(b"\0"):
        raise StateRefused(
            f"core.hooksPath is {rel}/, a folder of tracked files: installing hunkwise's hooks "
            "there would change the project's files for everyone; nothing was written. Chain "
            f"them instead: point core.hooksPath at .git/hooks for this clone (git config "
            f"core.hooksPath .git/hooks), run coord install-hooks, and call {rel}/pre-commit "
            "from .git/hooks/pre-commit.hunkwise-chained")


_CHAIN = """#!/bin/sh
{mark}
# The user's own {name} hook from {where} (core.hooksPath of the global git config), which
# a repository-local core.hooksPath set by coord install-hooks would otherwise skip.
if [ -x {target} ]; then exec {target} "$@"; fi
exit 0
"""


def _chain_global(ctx: Ctx, value: str, local: Path) -> list[str]:
    """The global hooks folder stays the user's: this repository gets its own (local
    core.hooksPath), whose chained hooks call the global ones."""
    where = Path(os.path.expanduser(value))
    where = where if where.is_absolute() else ctx.repo / where
    local.mkdir(parents=True, exist_ok=True)
    made = []
    for name in HOOKS:
        target = where / name
        keep = local / (name + CHAINED)
        if target.exists() and not keep.exists():
            store.atomic_write(keep, _CHAIN.format(mark=MARK, name=name, where=where,
                                                   target=shlex.quote(str(target))).encode())
            keep.chmod(0o755)
            made.append(str(keep))
    git.run(ctx.repo, "config", "--local", "core.hooksPath", str(local))
    return made


def install_hooks(ctx: Ctx, agents: Sequence[str] = ()) -> InstallHooksResult:
    agents = list(dict.fromkeys(agents))  # `--agent` may repeat
    for name in agents:
        if name not in AGENTS:
            raise UsageError(f"unknown --agent {name!r}: supported: {', '.join(AGENTS)}")
        path = _agent_file(ctx, name)
        _events(path, _load_settings(path))  # refuse a malformed file before writing
    manifest = _load_manifest(ctx)
    setting = _hooks_path_setting(ctx)
    notes: list[str] = []
    if setting is not None and setting[0] in ("global", "system") \
            and not manifest.get("hooks_path_set"):
        local = git.common_dir(ctx.repo) / "hooks"
        manifest["chain_wrappers"] = _chain_global(ctx, setting[1], local)
        manifest["hooks_path_set"] = True
        notes.append(f"core.hooksPath of the {setting[0]} git config ({setting[1]}) is left "
                     f"alone: this repository now uses {local}, whose chained hooks run "
                     "those of the global folder")
    d = hooks_dir(ctx)
    _refuse_tracked(ctx, d)
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
        done[name] = {"hook": str(install_agent(ctx, name, manifest))}
    from hunkwise.coordinator import skills as shipped  # skills where each agent reads them
    shipped.install_for(ctx, agents, done)
    if agents:
        doc["agent"] = done[agents[0]]["hook"]  # the first agent's hook file, as before
        doc["agents"] = done
        notes += [_FAILURE_NOTES[a] for a in agents]
    _save_manifest(ctx, manifest)
    if notes:
        doc["notes"] = notes
    return doc


def uninstall_hooks(ctx: Ctx) -> UninstallHooksResult:
    manifest = _load_manifest(ctx)
    d = hooks_dir(ctx)
    removed, restored = [], []
    for name in HOOKS:
        path = d / name
        if path.exists() and _ours(path):
            path.unlink()
            removed.append(str(path))
        # The pre-commit framework's `pre-commit install` keeps a hook it replaces as
        # `<name>.legacy` and runs it: ours kept there would refuse every commit.
        legacy = d / (name + ".legacy")
        if legacy.exists() and _ours(legacy):
            legacy.unlink()
            removed.append(str(legacy))
        keep = d / (name + CHAINED)
        if keep.exists() and _ours(keep):
            keep.unlink()  # a wrapper calling the global hooks folder: ours
            removed.append(str(keep))
        elif keep.exists() and not path.exists():
            os.rename(keep, path)
            restored.append(name)
        elif keep.exists() and legacy.exists() is False and _pre_commit_framework(path):
            os.rename(keep, legacy)  # pre-commit's own hook runs it, as it ran ours
            restored.append(name)
    for w in manifest.get("chain_wrappers", []):
        p = Path(w)
        if p.exists() and _ours(p):
            p.unlink()
            removed.append(str(p))
    if manifest.get("hooks_path_set"):
        git.run_rc(ctx.repo, "config", "--local", "--unset", "core.hooksPath")
    agents = {name: uninstall_agent(ctx, name, manifest) for name in AGENTS}
    skills: list[str] = []
    from hunkwise.coordinator import skills as shipped  # skills where each agent reads them
    skills += shipped.uninstall(ctx)
    for folder, sub in shipped.WHERE.values():
        for name in shipped.NAMES:  # the exclude lines the skills' install added
            _unexclude(ctx, f"/{folder}/{sub}/{name}/")
    for pattern in manifest.get("excludes", []):
        _unexclude(ctx, pattern)
    for folder in sorted(manifest.get("dirs", []), key=len, reverse=True):
        with contextlib.suppress(OSError):
            Path(folder).rmdir()  # only if empty: what else is there is not ours
    with contextlib.suppress(FileNotFoundError):
        _manifest_path(ctx).unlink()
    return {"removed": removed, "restored": restored, "agent": agents["claude"],
            "agents": agents, "skills": skills}


def _pre_commit_framework(path: Path) -> bool:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return "File generated by pre-commit" in text


# ---- the agents' hooks ----------------------------------------------------------------------
# Claude Code reads .claude/settings.local.json; Codex reads <repo>/.codex/hooks.json (a
# trusted project's layer; each new or changed hook is reviewed once in Codex's /hooks).
# Both take {"hooks": {EVENT: [{"matcher", "hooks": [{"type": "command", "command",
# "timeout"}]}]}}, pass the tool call as JSON on stdin and block a PreToolUse call on exit
# 2 with the reason on stderr; a PostToolUse hook's `{"decision": "block", "reason"}` goes
# to the model. Codex names its shell tool "Bash" in hook input and sends apply_patch's
# patch as tool_input.command. Claude Code's `onFailure: "block"` (2.1.295) blocks a call
# whose hook cannot start, times out or exits oddly; the command's own wrapper turns a
# missing interpreter or package into exit 2 on any version (docs/hooks.md).

_CLAUDE_TOOLS = "Bash|PowerShell|Monitor|Edit|Write|NotebookEdit"
_EVENTS: dict[str, list[tuple[str, str, str, int]]] = {
    # (event, matcher, hook argument, timeout in seconds)
    "claude": [("PreToolUse", _CLAUDE_TOOLS, "pre", 60),
               ("PostToolUse", _CLAUDE_TOOLS, "post", 120),
               # A failed or interrupted call (a shell command exiting non-zero) fires
               # this instead of PostToolUse: it is closed and checked the same way.
               ("PostToolUseFailure", _CLAUDE_TOOLS, "post", 120),
               ("ConfigChange", "local_settings|project_settings", "config", 30)],
    "codex": [("PreToolUse", "Bash|apply_patch", "pre", 60),
              ("PostToolUse", "Bash|apply_patch", "post", 120)],
}
_FAIL_CLOSED = {"claude": {"PreToolUse", "ConfigChange"}, "codex": set()}
_FILES = {"claude": (".claude", "settings.local.json"), "codex": (".codex", "hooks.json")}
HOOK_MODULE = "hunkwise.coordinator.hook"
_FAILURE_NOTES = {
    "claude": "claude: a hook that cannot start (a moved or deleted virtualenv) exits 2 from "
              "its wrapper and the call is blocked; onFailure=block does the same for a "
              "timeout on Claude Code 2.1.295 and later",
    "codex": "codex: a hook that cannot start exits 2 from its wrapper and the call is blocked; "
             "Codex has no fail-closed setting, so a hook that times out lets the call run",
}


def _interpreter() -> str:
    """This installation's interpreter, absolute: an agent's hook runs without our venv on
    its PATH."""
    return str(Path(sys.executable).absolute())


def import_path() -> list[str]:
    """The folders this installation imports hunkwise and its dependencies from, beyond
    the interpreter's own library: the hook runs without `site` (-S), which would spend
    milliseconds of every tool call finding them again (and running every `.pth`)."""
    import sysconfig

    stdlib = {os.path.realpath(p) for p in (sysconfig.get_paths()["stdlib"],
                                             sysconfig.get_paths()["platstdlib"])}
    out: list[str] = []
    for p in sys.path:
        if not p or not os.path.isabs(p) or p.endswith(".zip") or p in out:
            continue
        real = os.path.realpath(p)
        if real in stdlib or os.path.basename(real) == "lib-dynload":
            continue
        out.append(p)
    return out


def hook_command(arg: str, top: Path | None = None) -> str:
    """The shell command of one hook: the interpreter of this installation runs the hook
    module isolated (-I: no PYTHONPATH or current folder can shadow it) and without `site`
    (-S: the folders it imports from are written in); a missing interpreter or package,
    or any failure but a verdict, blocks with exit 2."""
    py = shlex.quote(_interpreter())
    why = ("hunkwise: the agent hook could not run (exit $rc); the call is blocked: run coord "
           "install-hooks again from a working installation")
    # -c rather than -m: runpy's import costs every call milliseconds.
    run = shlex.quote(f"import sys; sys.path += {import_path()!r}; "
                      f"from {HOOK_MODULE} import main; sys.exit(main())")
    where = f" {shlex.quote(str(top))}" if top is not None else ""
    return (f"{py} -I -S -c {run} {arg}{where}; rc=$?; "
            f'[ $rc -eq 0 ] || [ $rc -eq 2 ] || {{ echo "{why}" >&2; exit 2; }}; exit $rc')


def _agent_file(ctx: Ctx, agent: str) -> Path:
    folder, name = _FILES[agent]
    return ctx.repo / folder / name


# An agent's hooks settings file is another tool's open JSON: only our entries are ours;
# every other key is kept as it is.
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


def _entry(agent: str, matcher: str, arg: str, timeout: int, event: str,
           top: Path) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": hook_command(arg, top),
                            "timeout": timeout}
    if event in _FAIL_CLOSED[agent]:
        hook["onFailure"] = "block"
    return {"matcher": matcher, "hooks": [hook]}


def install_agent(ctx: Ctx, agent: str, manifest: dict[str, Any] | None = None) -> Path:
    """Merge our hooks into the agent's hook file, keeping everything else."""
    manifest = {} if manifest is None else manifest
    path = _agent_file(ctx, agent)
    existed = path.exists()
    data = _load_settings(path)
    hooks = _events(path, data)
    for event, matcher, arg, timeout in _EVENTS[agent]:
        lst = hooks.setdefault(event, [])
        if not isinstance(lst, list):
            raise UsageError(f"{path}: \"hooks.{event}\" is not a list; nothing was changed")
        lst[:] = [e for e in lst if not _is_ours(e)] + [
            _entry(agent, matcher, arg, timeout, event, ctx.repo)]
    files = manifest.setdefault("agent_files", {})
    files.setdefault(str(path), existed)  # the first install knows whether it was there
    if not path.parent.exists():
        manifest.setdefault("dirs", []).append(str(path.parent))
    path.parent.mkdir(parents=True, exist_ok=True)
    store.atomic_write(path, (json.dumps(data, indent=2) + "\n").encode())
    _exclude(ctx, "/" + path.relative_to(ctx.repo).as_posix(), manifest)
    return path


def agent_hook_present(repo: Path, agent: str) -> bool:
    """Whether the agent's hook file still holds our PreToolUse hook."""
    folder, name = _FILES[agent]
    try:
        data = json.loads((repo / folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    pre = data.get("hooks", {}).get("PreToolUse") if isinstance(data, dict) and \
        isinstance(data.get("hooks"), dict) else None
    return isinstance(pre, list) and any(_is_ours(e) for e in pre)


def _exclude_file(ctx: Ctx) -> Path:
    return git.common_dir(ctx.repo) / "info" / "exclude"


def _exclude(ctx: Ctx, pattern: str, manifest: dict[str, Any]) -> None:
    """A local, untracked settings file must not show up as an unowned change."""
    exclude = _exclude_file(ctx)
    exclude.parent.mkdir(exist_ok=True)
    text = exclude.read_text() if exclude.exists() else ""
    if pattern not in text.split("\n"):
        with open(exclude, "a") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + pattern + "\n")
        manifest.setdefault("excludes", []).append(pattern)


def _unexclude(ctx: Ctx, pattern: str) -> None:
    exclude = _exclude_file(ctx)
    try:
        lines = exclude.read_text().split("\n")
    except OSError:
        return
    if pattern in lines:
        lines.remove(pattern)
        store.atomic_write(exclude, "\n".join(lines).encode())


def _events(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The events object of a hooks document, created if absent; refuse odd shapes."""
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: \"hooks\" is not a JSON object; nothing was changed")
    for event in ("PreToolUse", "PostToolUse", "PostToolUseFailure", "ConfigChange"):
        if event in hooks and not isinstance(hooks[event], list):
            raise UsageError(f"{path}: \"hooks.{event}\" is not a list; nothing was changed")
    return hooks


def _is_ours(entry: Any) -> bool:
    def ours(cmd: str) -> bool:
        return HOOK_MODULE in cmd or (cmd.endswith(" guard") and "coord" in cmd)

    return isinstance(entry, dict) and isinstance(entry.get("hooks"), list) and any(
        isinstance(h, dict) and ours(str(h.get("command", ""))) for h in entry["hooks"])


def uninstall_agent(ctx: Ctx, agent: str, manifest: dict[str, Any] | None = None) -> str | None:
    manifest = {} if manifest is None else manifest
    path = _agent_file(ctx, agent)
    if not path.exists():
        return None
    data = _load_settings(path)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict) or not any(
            isinstance(v, list) and any(_is_ours(e) for e in v) for v in hooks.values()):
        return None
    for event in list(hooks):
        lst = hooks[event]
        if isinstance(lst, list) and any(_is_ours(e) for e in lst):
            lst[:] = [e for e in lst if not _is_ours(e)]
            if not lst:
                del hooks[event]
    if not hooks:
        del data["hooks"]
    created = manifest.get("agent_files", {}).get(str(path)) is False
    if not data and (created or agent == "codex"):
        path.unlink()  # a file holding nothing else was ours
        if created:
            with contextlib.suppress(OSError):
                path.parent.rmdir()
    else:
        store.atomic_write(path, (json.dumps(data, indent=2) + "\n").encode())
    return str(path)


# ---- the user's own pre-commit hook, on each accepted commit --------------------------------

PRE_COMMIT_TIMEOUT_S = 600.0


def user_pre_commit(ctx: Ctx, head: str | None, tree: str) -> Ran | None:
    """Run the repository's pre-commit hook on exactly `tree` staged over `head`, in a
    scratch checkout (never in the shared tree, where a hook that stashes unstaged changes
    would yank every worker's edits). The hook runs as `git commit` runs it, from the
    checkout's top level, marked as the coordinator's (hunkwise's own pre-commit then
    passes straight to the hook it chains). None when there is no hook of the user's."""
    hook = hooks_dir(ctx) / "pre-commit"
    if head is None or not os.access(hook, os.X_OK):
        return None
    if _ours(hook) and not (hook.parent / ("pre-commit" + CHAINED)).exists():
        return None  # only hunkwise's own, which lets the coordinator through
    from hunkwise.shared.git.checkout import Recipe, scratch
    from hunkwise.shared.proc import run_command

    with scratch(ctx.repo, head, ctx.lay.root, Recipe()) as where:
        # HEAD stays the parent; index and files become the commit's: what is staged is
        # exactly the commit's change, as a `git commit` of it would see.
        git.run(where, "read-tree", "-m", "-u", head, tree, env={"HUNKWISE_COORDINATOR": "1"})
        env = {k: v for k, v in os.environ.items()
               if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
        env["HUNKWISE_COORDINATOR"] = "1"
        return run_command(shlex.quote(str(hook)), where, PRE_COMMIT_TIMEOUT_S, env=env)
