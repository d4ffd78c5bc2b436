"""`coord.toml`, the tracked project settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from hunkwise.shared.errors import UsageError
from hunkwise.shared.state.schema import F, Record, RecordError


class _Section(Record):
    pass


class VerifySettings(_Section):
    commands: list[str] = F(default_factory=list)
    timeout_seconds: float = F(default=3600, gt=0)
    # When the frozen set fails, find the batch's first task commit that fails.
    bisect: bool = False


class OwnershipSettings(_Section):
    serial: list[str] = F(default_factory=list)


class ClaimSettings(_Section):
    ttl_seconds: int = F(default=1800, gt=0)


class AcceptSettings(_Section):
    recheck: bool = False


class NotifySettings(_Section):
    """Where notifications go. `command` gets each event as JSON on stdin; `urls` are
    apprise URLs (Telegram, Slack, ntfy, e-mail...). This file is tracked: a URL names
    its secrets as `$VAR` / `${VAR}`, expanded from the environment at send time, or the
    URLs live in `urls_file` outside the repository (or in `$HUNKWISE_NOTIFY_URLS`)."""

    command: str | None = None
    urls: list[str] = F(default_factory=list)
    urls_file: str | None = None
    # The first retry of a failed delivery waits this long; each next one twice as long.
    retry_seconds: float = F(default=30, gt=0)
    max_attempts: int = F(default=8, ge=1)


class CheckSettings(_Section):
    timeout_seconds: float = F(default=900, gt=0)
    # "isolated": a task's checks run on HEAD + exactly its changes, in a scratch checkout;
    # "tree": in the shared tree, amid the other tasks' uncommitted edits.
    where: Literal["isolated", "tree"] = "isolated"


# The files whose content decides whether a cached checkout's setup still holds, when
# `[checkout] inputs` does not say: the manifests and lockfiles installers read.
DEFAULT_INPUTS = ["pyproject.toml", "setup.py", "setup.cfg", "requirements*.txt",
                  "package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock",
                  "pnpm-lock.yaml", "poetry.lock", "uv.lock", "Pipfile.lock", "Cargo.toml",
                  "Cargo.lock", "go.mod", "go.sum", "Gemfile.lock", "composer.lock"]


def _repo_paths(values: list[str]) -> list[str]:
    """Paths inside the repository, written from its root (`a/b`, no `..`, not absolute)."""
    out = []
    for value in values:
        v = value.rstrip("/")
        if not v or value.startswith("/") or "\0" in v \
                or any(p in ("..", ".", "") for p in v.split("/")) or v.split("/")[0] == ".git":
            raise RecordError(f"{value!r} is not a path inside the repository (from its "
                              "root, no '..')")
        out.append(v)
    return out


class CheckoutSettings(_Section):
    """Scratch checkouts (verify, the accept recheck, isolated checks, bisect)."""

    # Commands run first in every fresh checkout (`pip install -e .`, `npm ci`).
    setup: list[str] = F(default_factory=list, max_length=100)
    # Ignored paths of the main tree copied into each checkout (`.env`, generated code).
    carry: list[str] = F(default_factory=list, max_length=1000, check=_repo_paths)
    # Ignored paths of the main tree linked (a symlink) into each checkout instead of
    # copied: large directories the checks only read (`node_modules`, `.venv`).
    link: list[str] = F(default_factory=list, max_length=1000, check=_repo_paths)
    # Glob patterns of tracked files whose content the setup depends on (the key of a
    # cached checkout); empty: DEFAULT_INPUTS.
    inputs: list[str] = F(default_factory=list, max_length=1000)
    # Keep a checkout between runs and reset it to the next commit, so setup runs again only
    # when its inputs change. Unset: reuse when there is a setup to save.
    reuse: bool | None = None
    timeout_seconds: float = F(default=1800, gt=0)

    @property
    def reused(self) -> bool:
        return bool(self.setup) if self.reuse is None else self.reuse


class RemoteSettings(_Section):
    # The git remote that machines share refs/hunkwise/ through; None: no automatic sync.
    name: str | None = F(default=None, min_length=1, max_length=200,
                             pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _agent_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", name):
        raise RecordError(f"agent name {name!r}: letters, digits, '_' and '-', at most 64")
    return name


class AgentSettings(_Section):
    """`[agents.NAME]`: how `coord launch --agent NAME` starts an agent. `command` is the
    argv; `{prompt}` in an argument is replaced by the first prompt, `{prompt_file}` by the
    path of a file holding it, `{task}` by the task id, `{session}` by the session id.
    `interactive_command`, when given, is used instead in a tmux window."""

    command: list[str] = F(min_length=1, max_length=200)
    interactive_command: list[str] | None = F(default=None, min_length=1, max_length=200)


class LaunchSettings(_Section):
    # `coord request-changes` and `coord decide` start the task's agent again by default.
    relaunch: bool = False
    # "auto": a tmux window when tmux is on PATH; "never": always a background process.
    tmux: str = F(default="auto", pattern=r"^(auto|never)$")


def _agents(v: dict[str, AgentSettings]) -> dict[str, AgentSettings]:
    for name in v:
        _agent_name(name)
    return v


class Config(_Section):
    verify: VerifySettings = F(default_factory=VerifySettings)
    ownership: OwnershipSettings = F(default_factory=OwnershipSettings)
    claims: ClaimSettings = F(default_factory=ClaimSettings)
    accept: AcceptSettings = F(default_factory=AcceptSettings)
    notify: NotifySettings = F(default_factory=NotifySettings)
    checks: CheckSettings = F(default_factory=CheckSettings)
    remote: RemoteSettings = F(default_factory=RemoteSettings)
    checkout: CheckoutSettings = F(default_factory=CheckoutSettings)
    agents: dict[str, AgentSettings] = F(default_factory=dict, check=_agents)
    launch: LaunchSettings = F(default_factory=LaunchSettings)


def _line_of(text: str, loc: tuple[object, ...]) -> int | None:
    """The line of `[section]` / `key = ...` that a validation error points at."""
    names = [str(p) for p in loc if not isinstance(p, int)]
    if not names:
        return None
    # A table of tables (`[agents.NAME]`): the deepest header the location names.
    for cut in range(len(names) - 1, 1, -1):
        found = _line_of(text, (".".join(names[:cut]), *names[cut:cut + 1]))
        if found is not None:
            return found
    section, key = names[0], names[1] if len(names) > 1 else None
    current = None
    for n, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        m = re.match(r"^\[\s*([^\]]+?)\s*\]", stripped)
        if m:
            current = m.group(1).strip().strip('"')
            if key is None and current == section:
                return n
            continue
        if key is None:
            continue
        if current == section and re.match(rf"^\"?{re.escape(key)}\"?\s*=", stripped):
            return n
        if current is None and re.match(rf"^{re.escape(section)}\.{re.escape(key)}\s*=", stripped):
            return n
    return None


def parse(text: str, where: str = "coord.toml") -> Config:
    import tomllib  # only where a coord.toml is committed

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{where}: {e}") from None
    try:
        return Config.model_validate(data)
    except RecordError as e:
        loc = ".".join(str(p) for p in e.loc)
        line = _line_of(text, e.loc)
        at = f" (line {line})" if line else ""
        if e.msg == "unknown field":
            *parents, name = [str(p) for p in e.loc]
            what = (f"unknown key {name!r} in [{'.'.join(parents)}]" if parents
                    else f"unknown section [{name}]")
            raise UsageError(f"{where}: {what}{at}{_did_you_mean(e)}") from None
        raise UsageError(f"{where}: [{loc}] {e.msg}{at}") from None


def _did_you_mean(e: RecordError) -> str:
    """`; did you mean commands?` for an unknown key or section close to a known one."""
    import difflib
    import typing

    model: type[_Section] = Config
    *parents, name = [str(p) for p in e.loc] or [""]
    for p in parents:
        hint = typing.get_type_hints(model).get(p)
        if not (isinstance(hint, type) and issubclass(hint, _Section)):
            return ""
        model = hint
    known = [n for n in typing.get_type_hints(model) if not n.startswith("_")]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    what = "section" if model is Config else "key"
    scope = f" of [{'.'.join(parents)}]" if parents else ""
    if close:
        return f"; did you mean {close[0]}?"
    return f"; known {what}s{scope}: {', '.join(sorted(known))}"


def load_at(repo: Path, commit: str) -> Config:
    """The settings as committed in `commit`: HEAD for every command, the frozen commit for
    verify. Never the working tree's copy: an uncommitted (or half-edited, or unowned) edit
    must not change what the coordinator runs or how long a claim lives."""
    from hunkwise.shared import git

    data = git.file_at(repo, commit, "coord.toml")
    where = f"coord.toml at {commit if commit == 'HEAD' else commit[:12]}"
    if data is None:
        return Config()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text") from None
    try:
        return parse(text, where)
    except UsageError as e:
        if commit != "HEAD":
            raise
        # Every command that needs a setting stops here until the file is fixed: say how.
        raise UsageError(f"{e.message}; every command reads the settings from HEAD: fix "
                         "coord.toml, then coord commit coord.toml -m MSG") from None


def problem(repo: Path) -> str | None:
    """Why the settings at HEAD do not load (None when they do): for `coord status`, which
    reads no setting itself and must still say that every other command will stop."""
    try:
        load(repo)
    except UsageError as e:
        return e.message
    return None


def load(repo: Path) -> Config:
    """The settings in force: `coord.toml` as committed at HEAD."""
    return load_at(repo, "HEAD")


def working_copy_differs(repo: Path) -> bool:
    """Does the working tree's `coord.toml` differ from HEAD's (so an edit is not in force)?"""
    from hunkwise.shared import git

    committed = git.file_at(repo, "HEAD", "coord.toml")
    path = repo / "coord.toml"
    try:
        data = path.read_bytes() if not path.is_symlink() else None
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        data = None
    if data == committed:
        return False
    if data is None or committed is None:
        return True
    # Clean filters (line endings) may make equal content look different on disk.
    oid = git.run(repo, "hash-object", "--path=coord.toml", "--stdin", input=data).decode().strip()
    return oid != git.run(repo, "rev-parse", "HEAD:coord.toml").decode().strip()
