"""Symbols of a Python file as line spans: what `--write PATH::NAME` grants.

A symbol is a function, a class, a method (`Class.name`) or a module-level assignment
(`__all__ = [...]`). Its span runs from its first decorator, or from the comment lines
right above it, through the blank lines after it: exactly what a person means by "the
function", so an insertion right after it (a new function next to it) lies inside it.

Python only, through the standard `ast` (no dependency, nothing to import on the hot
path: only `coord assign` and `coord grant` read symbols). Line numbers are git's: the
file is split on `\\n`, and a file holding a bare carriage return, which Python counts as
a line break and git does not, is refused rather than misnumbered.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from hunkwise.shared.errors import UsageError

# A first line's shebang, or an encoding declaration on line 1 or 2 (PEP 263).
_MAGIC = re.compile(rb"#!|[ \t\f]*#.*?coding[:=]")


@dataclass(frozen=True)
class Span:
    """A symbol's lines (1-based, inclusive) and where its insertion point lies.

    `point` is the line after which `NAME+` inserts: after the span for a function or
    class; inside an assignment, before its last line (`__all__ = [` ... `]`); None for
    an assignment on one line, which has no inside."""

    name: str
    start: int
    end: int
    point: int | None
    first: int  # the line of the definition itself (`def`, `class`, the assignment)


def _defines(node: ast.stmt, name: str) -> bool:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(_target_names(t, name) for t in node.targets)
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return _target_names(node.target, name)
    return False


def _target_names(t: ast.expr, name: str) -> bool:
    if isinstance(t, ast.Name):
        return t.id == name
    if isinstance(t, ast.Tuple | ast.List):
        return any(_target_names(e, name) for e in t.elts)
    return False


def _names(body: list[ast.stmt]) -> list[str]:
    out: list[str] = []
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append(node.name)
        elif isinstance(node, ast.Assign):
            out += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            out.append(node.target.id)
    return out


def parse(data: bytes, path: str) -> ast.Module:
    """The file's syntax tree; a file that does not parse is refused with the parser's line."""
    lone_cr = data.replace(b"\r\n", b"").count(b"\r")
    if lone_cr:
        raise UsageError(f"{path}: holds a bare carriage return, which Python and git count "
                         "as different lines; grant line numbers instead")
    try:
        return ast.parse(data, filename=path)
    except SyntaxError as e:
        raise UsageError(f"{path} does not parse at HEAD (line {e.lineno}: {e.msg}); a symbol "
                         "grant needs a file Python can read: grant line numbers instead") from None
    except ValueError as e:  # a NUL byte, say
        raise UsageError(f"{path} does not parse at HEAD ({e})") from None


def find(data: bytes, path: str, name: str) -> Span:
    """The span of `name` (`NAME` or `Class.NAME`) in the Python source `data`.

    Refused (exit 2) when the file is not Python or does not parse, when no such symbol is
    defined at the top level (or in the class, for a method), or when it is defined more
    than once (a redefinition, `__all__ += [...]`, both branches of an `if`)."""
    shebang = data.split(b"\n", 1)[0]
    if not path.endswith((".py", ".pyi")) and not (shebang.startswith(b"#!")
                                                   and b"python" in shebang):
        raise UsageError(f"grant {path}::{name}: symbol grants need a Python file; grant line "
                         "numbers (PATH:START-END) or an insertion point (PATH:+N) instead")
    tree = parse(data, path)
    body: list[ast.stmt] = tree.body
    owner, _, leaf = name.rpartition(".")
    where = path
    if owner:
        classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == owner]
        if not classes:
            raise UsageError(f"grant {path}::{name}: no class {owner} at the top level of "
                             f"{path} at HEAD" + _close(owner, _names(body)))
        if len(classes) > 1:
            raise UsageError(f"grant {path}::{name}: class {owner} is defined "
                             f"{len(classes)} times in {path} (lines "
                             f"{', '.join(str(c.lineno) for c in classes)}); grant lines instead")
        body, where = classes[0].body, f"class {owner} of {path}"
    hits = [n for n in body if _defines(n, leaf)]
    if not hits:
        raise UsageError(f"grant {path}::{name}: {leaf} is not defined in {where} at HEAD"
                         + _close(leaf, _names(body)))
    if len(hits) > 1:
        raise UsageError(f"grant {path}::{name}: {leaf} is defined {len(hits)} times in {where} "
                         f"(lines {', '.join(str(n.lineno) for n in hits)}); grant lines instead")
    node = hits[0]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    first = node.lineno
    start = min([first] + [d.lineno for d in getattr(node, "decorator_list", [])])
    # The comment lines right above belong to it; a shebang or an encoding line does not.
    while start > 1 and lines[start - 2].lstrip().startswith(b"#") and not (
            start - 1 <= 2 and _MAGIC.match(lines[start - 2])):
        start -= 1
    last = node.end_lineno or first
    end = last
    while end < len(lines) and not lines[end].strip():
        end += 1
    point: int | None = end
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        point = last - 1 if last > first else None
    return Span(name=name, start=start, end=end, point=point, first=first)


def _close(name: str, known: list[str]) -> str:
    import difflib

    near = difflib.get_close_matches(name, sorted(set(known)), n=3)
    return f" (did you mean {', '.join(near)}?)" if near else ""
