"""Whether a grant holds a path: gitignore-style globs from the repo root, and the one
file of a line grant. Apart from the rest of attribution: the agent hooks ask it on every
judged write, and pay for every import."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # (no `typing`, `re` or `functools` at run time: the hooks pay for each)
    from collections.abc import Callable

    from hunkwise.shared.state.models import Grant

_CACHE_MAX = 4096
_matchers: dict[str, Callable[[str], bool]] = {}
_plains: dict[str, tuple[str, bool] | None] = {}


def _matcher(pattern: str) -> Callable[[str], bool]:
    found = _matchers.get(pattern)
    if found is None:
        if len(_matchers) >= _CACHE_MAX:
            _matchers.clear()
        found = _matchers[pattern] = _compile(pattern)
    return found


def _compile(pattern: str) -> Callable[[str], bool]:
    """A compiled matcher for one root-anchored gitignore-style pattern.

    pathspec turns the pattern into a regex (git's wildmatch rules); calling that regex
    directly skips PathSpec's per-call normalisation, which adds up when every changed
    file meets every glob grant.
    """
    import pathspec

    anchored = pattern if pattern.startswith("/") else "/" + pattern
    spec = pathspec.PathSpec.from_lines("gitignore", [anchored])
    patterns = list(spec.patterns)
    regex = getattr(patterns[0], "regex", None) if len(patterns) == 1 else None
    if regex is not None and patterns[0].include:
        return lambda path: regex.match(path) is not None
    return lambda path: bool(spec.match_file(path))


def _plain(pattern: str) -> tuple[str, bool] | None:
    if pattern in _plains:
        return _plains[pattern]
    if len(_plains) >= _CACHE_MAX:
        _plains.clear()
    found = _plains[pattern] = _plain_shape(pattern)
    return found


def _plain_shape(pattern: str) -> tuple[str, bool] | None:
    """(directory or file, only what lies below it) for the two shapes most grants take:
    a literal path (`src/app.py`, `docs/`) and a literal directory's `/**`; None for
    anything else. Those two shapes are decided with string compares, exactly as
    pathspec decides them (a property test holds the two to each other)."""
    p = pattern[1:] if pattern.startswith("/") else pattern
    below = p.endswith("/**")
    if below:
        p = p[:-3]
    elif p.endswith("/"):
        p, below = p[:-1], True
    if (not p or any(c in p for c in "*?[\\") or p[0] in "!#" or p.endswith(" ") or "//" in p
            or any(part in (".", "..") for part in p.split("/"))):
        return None
    return p, below


def glob_matches(pattern: str, path: str) -> bool:
    """Does a root-anchored gitignore-style pattern cover this file?

    As in gitignore, a pattern that matches a directory covers everything below it:
    `src/*` covers `src/sub/b.py` through `src/sub`.
    """
    plain = _plain(pattern)
    if plain is not None:
        where, below = plain
        return path.startswith(where) and (
            path[len(where):len(where) + 1] == "/" if len(path) > len(where) else not below)
    return _glob_matches(pattern, path)


def _glob_matches(pattern: str, path: str) -> bool:
    match = _matcher(pattern)
    if match(path):
        return True
    parts = path.split("/")
    for i in range(1, len(parts)):
        d = "/".join(parts[:i])
        if match(d) or match(d + "/"):
            return True
    return False


def grant_covers(grant: Grant, path: str) -> bool:
    """Does a grant hold this repo path? A line grant (range, point) its one file; a glob
    what it matches."""
    return glob_matches(grant.path, path) if grant.kind == "glob" else grant.path == path
