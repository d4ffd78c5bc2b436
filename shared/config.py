"""`coord.toml`, the tracked project settings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import UsageError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class VerifySettings(_Section):
    commands: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(default=3600, gt=0)


class OwnershipSettings(_Section):
    serial: list[str] = Field(default_factory=list)


class ClaimSettings(_Section):
    ttl_seconds: int = Field(default=1800, gt=0)


class AcceptSettings(_Section):
    recheck: bool = False


class NotifySettings(_Section):
    command: str | None = None


class CheckSettings(_Section):
    timeout_seconds: float = Field(default=900, gt=0)


class Config(_Section):
    verify: VerifySettings = Field(default_factory=VerifySettings)
    ownership: OwnershipSettings = Field(default_factory=OwnershipSettings)
    claims: ClaimSettings = Field(default_factory=ClaimSettings)
    accept: AcceptSettings = Field(default_factory=AcceptSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    checks: CheckSettings = Field(default_factory=CheckSettings)


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
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{where}: {e}") from None
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        line = _line_of(text, tuple(err["loc"]))
        at = f" (line {line})" if line else ""
        raise UsageError(f"{where}: [{loc}] {err['msg']}{at}") from None


def load_at(repo: Path, commit: str) -> Config:
    """The settings as committed in `commit` (what a proof of that commit must use)."""
    from . import git

    found = git.blob_at(repo, commit, "coord.toml")
    if found is None:
        return Config()
    try:
        text = found[1].decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"coord.toml at {commit[:12]}: not UTF-8 text") from None
    return parse(text, f"coord.toml at {commit[:12]}")


def load(repo: Path) -> Config:
    path = repo / "coord.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    return parse(text, str(path))
