"""`coord.toml`, the tracked project settings."""

from __future__ import annotations

import re
from pathlib import Path

from hunkwise.shared.errors import UsageError
from hunkwise.shared.state.schema import F, Record, RecordError


class _Section(Record):
    pass


class VerifySettings(_Section):
    commands: list[str] = F(default_factory=list)
    timeout_seconds: float = F(default=3600, gt=0)


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


class RemoteSettings(_Section):
    # The git remote that machines share refs/hunkwise/ through; None: no automatic sync.
    name: str | None = F(default=None, min_length=1, max_length=200,
                             pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Config(_Section):
    verify: VerifySettings = F(default_factory=VerifySettings)
    ownership: OwnershipSettings = F(default_factory=OwnershipSettings)
    claims: ClaimSettings = F(default_factory=ClaimSettings)
    accept: AcceptSettings = F(default_factory=AcceptSettings)
    notify: NotifySettings = F(default_factory=NotifySettings)
    checks: CheckSettings = F(default_factory=CheckSettings)
    remote: RemoteSettings = F(default_factory=RemoteSettings)


def _line_of(text: str, loc: tuple[object, ...]) -> int | None:
    """The line of `[section]` / `key = ...` that a validation error points at."""
    names = [str(p) for p in loc if not isinstance(p, int)]
    if not names:
        return None
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
