"""Printing results: one JSON document with --json, a short table or sentence otherwise."""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from hunkwise.shared.errors import CoordError

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import ErrorBody

# A command's document (shared/state/documents.py): its human renderer takes exactly that type.
Doc = TypeVar("Doc", bound=Mapping[str, Any])


def emit(doc: Doc, as_json: bool, human: Callable[[Doc], str], *,
         paint: Callable[[str], str] | None = None, pager: bool = False) -> None:
    """Print `doc`. `paint` colours each human line (after the line was made printable,
    so only hunkwise's own escape sequences reach the terminal) when colour is on;
    `pager` sends long human text through the user's pager, as git does."""
    for w in doc.get("warnings") or []:
        sys.stderr.write(f"warning: {w}\n")
    if as_json:
        # Indented for a person at a terminal; compact, by the C encoder, for the agents and
        # pipes that read it (indenting makes json use its Python encoder: 10x slower on
        # `coord status` of a thousand tasks). Either way one document and a newline.
        indent = 2 if sys.stdout.isatty() else None
        sys.stdout.write(json.dumps(doc, indent=indent, sort_keys=False, default=str,
                                    separators=None if indent else (",", ":")) + "\n")
    else:
        # Human text carries strings workers wrote: never let them drive the terminal.
        lines = [printable(line) for line in human(doc).split("\n")]
        if paint is not None and color_on(sys.stdout):
            lines = [paint(line) for line in lines]
        text = "\n".join(lines)
        if text:
            text = text.rstrip("\n") + "\n"
            if not (pager and page(text)):
                sys.stdout.write(text)
    sys.stdout.flush()


# ---- colour ------------------------------------------------------------------------------

_color_mode = "auto"
_SGR = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
        "cyan": "36", "bold": "1", "dim": "2"}


def set_color(mode: str) -> None:
    """`--color auto|always|never` (auto: on a terminal, unless NO_COLOR or TERM=dumb)."""
    global _color_mode
    _color_mode = mode


def color_on(stream: Any) -> bool:
    import os

    if _color_mode != "auto":
        return _color_mode == "always"
    if os.environ.get("NO_COLOR", "") != "":  # https://no-color.org: set and not empty
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def style(text: str, *names: str) -> str:
    codes = ";".join(_SGR[n] for n in names)
    return f"\033[{codes}m{text}\033[0m" if codes and text else text


def paint_diff(line: str) -> str:
    """A line of a unified diff, coloured as `git diff` colours it."""
    if line.startswith(("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file",
                        "old mode", "new mode", "rename ", "similarity ")):
        return style(line, "bold")
    if line.startswith("@@"):
        end = line.find("@@", 2)
        if end > 0:
            return style(line[: end + 2], "cyan") + line[end + 2:]
        return style(line, "cyan")
    if line.startswith("+"):
        return style(line, "green")
    if line.startswith("-"):
        return style(line, "red")
    return line


STATE_STYLES: dict[str, tuple[str, ...]] = {
    "assigned": ("blue",), "in_progress": ("yellow",), "reported": ("magenta", "bold"),
    "changes_requested": ("red",), "accepted": ("green",), "rejected": ("dim",),
    "deferred": ("cyan",),
}


def paint_states(line: str) -> str:
    """A table line whose second column is a task state: that cell coloured."""
    import re

    m = re.match(r"^(\S+\s+)(\S+)", line)
    if m is None or m.group(2) not in STATE_STYLES:
        return line
    return m.group(1) + style(m.group(2), *STATE_STYLES[m.group(2)]) + line[m.end():]


# ---- the pager ---------------------------------------------------------------------------

def pager_command() -> str | None:
    """The user's pager as git picks it: $GIT_PAGER, then $PAGER, then `less`; an empty
    value or `cat` means none."""
    import os

    for var in ("GIT_PAGER", "PAGER"):
        if var in os.environ:
            value = os.environ[var].strip()
            return None if value in ("", "cat") else value
    return "less"


def page(text: str) -> bool:
    """Show `text` through the pager when stdout and stdin are terminals (never when
    piped or redirected); False when no pager ran, so the caller prints it itself."""
    import os
    import subprocess

    try:
        if not (sys.stdout.isatty() and sys.stdin.isatty()):
            return False
    except (AttributeError, ValueError):
        return False
    command = pager_command()
    if command is None:
        return False
    env = dict(os.environ)
    # git's defaults: quit if one screen, raw colour codes, no screen clearing.
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    sys.stdout.flush()
    try:
        # The pager is the user's own interactive program on the user's terminal: it takes
        # the terminal as git gives it (a shell command line, as $PAGER is specified).
        proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    except OSError:
        return False
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode("utf-8", "surrogateescape"))
        proc.stdin.close()
    except BrokenPipeError:  # the user quit the pager early
        pass
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        code = proc.wait()
    # 126/127: the shell found no such pager (or could not run it): nothing was shown.
    return code not in (126, 127)


def fail(err: CoordError | Exception, as_json: bool, prog: str) -> int:
    code = err.exit_code if isinstance(err, CoordError) else 2
    message = err.message if isinstance(err, CoordError) else str(err)
    message = printable(message)
    message = " ".join(message.split("\n"))
    details = getattr(err, "details", "") or ""
    if as_json:
        doc: ErrorBody = {"code": code, "message": message}
        if details:
            doc["details"] = details
        sys.stdout.write(json.dumps({"error": doc}) + "\n")
    sys.stderr.write(f"{prog}: {message}\n")
    for line in details.rstrip("\n").split("\n") if details else []:
        sys.stderr.write(f"  {printable(line)}\n")
    return code


def printable(text: str) -> str:
    """Text safe for a terminal or a table cell: control and format characters (C0, C1,
    escape sequences, bidi overrides, line separators) become spaces; tabs stay."""
    return "".join(" " if ch != "\t" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
                   else ch for ch in text)


def one_line(text: object) -> str:
    """A value a worker wrote, shown on one line: its own line breaks are shown as `\\n`,
    so it can never print a line of its own (a fake `validation: ok`, say)."""
    s = str(text)
    for brk in ("\r\n", "\n", "\r", "\u2028", "\u2029", "\x85"):
        s = s.replace(brk, "\\n")
    return printable(s)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header]] + [[printable("-" if c is None else str(c)) for c in r]
                                          for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells)


def clip(text: str, n: int = 60) -> str:
    text = " ".join(printable(str(text)).split())
    return text if len(text) <= n else text[: n - 1] + "…"
