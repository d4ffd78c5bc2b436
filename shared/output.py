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


def emit(doc: Doc, as_json: bool, human: Callable[[Doc], str]) -> None:
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
        text = "\n".join(printable(line) for line in human(doc).split("\n"))
        if text:
            sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.flush()


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
