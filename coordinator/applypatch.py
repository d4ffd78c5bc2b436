"""The files a Codex `apply_patch` writes, read the way Codex reads the patch.

From codex-rs/apply-patch (parser.rs, invocation.rs in github.com/openai/codex): the text is
trimmed and split into lines; the first line, trimmed, must be `*** Begin Patch` and the
last `*** End Patch` (leniently, the whole may be wrapped in `<<EOF` / `<<'EOF'` /
`<<"EOF"` ... `EOF` lines). Each hunk header is read from its line *trimmed*, so an
indented header counts: `*** Add File: PATH` (then `+` lines), `*** Delete File: PATH`,
`*** Update File: PATH` optionally followed, on the very next line and untrimmed, by
`*** Move to: PATH`, then chunks (`@@` context lines and ` `/`+`/`-` lines, blank lines
between them) until a line starting with `*`. Paths are relative to the call's directory
(after the `cd DIR &&` of the shell form), or absolute.
"""

from __future__ import annotations

_BEGIN, _END = "*** Begin Patch", "*** End Patch"
_ADD, _DELETE, _UPDATE, _MOVE = ("*** Add File: ", "*** Delete File: ", "*** Update File: ",
                                 "*** Move to: ")
_EOF = "*** End of File"


class PatchError(ValueError):
    pass


def _boundaries(lines: list[str]) -> list[str]:
    def strict(ls: list[str]) -> list[str] | None:
        if len(ls) >= 2 and ls[0].strip() == _BEGIN and ls[-1].strip() == _END:
            return ls[1:-1]
        if len(ls) == 1 and ls[0].strip() == _BEGIN == _END:  # pragma: no cover
            return []
        return None

    body = strict(lines)
    if body is not None:
        return body
    if (len(lines) >= 4 and lines[0] in ("<<EOF", "<<'EOF'", '<<"EOF"')
            and lines[-1].endswith("EOF")):
        body = strict(lines[1:-1])
        if body is not None:
            return body
    if not lines or lines[0].strip() != _BEGIN:
        raise PatchError("the first line of the patch must be '*** Begin Patch'")
    raise PatchError("the last line of the patch must be '*** End Patch'")


def _lines(text: str) -> list[str]:
    # Rust's str::lines: split on \n, drop one trailing \r of each line
    out = text.strip().split("\n")
    return [ln[:-1] if ln.endswith("\r") else ln for ln in out]


def _chunk(lines: list[str], first: bool) -> int:
    """How many lines one update chunk takes (parse_update_file_chunk)."""
    if not lines:
        raise PatchError("update hunk does not contain any lines")
    start = 1 if lines[0] == "@@" or lines[0].startswith("@@ ") else 0
    if start == 0 and not first:
        raise PatchError(f"expected update hunk to start with a @@ context marker, got "
                         f"{lines[0]!r}")
    if start >= len(lines):
        raise PatchError("update hunk does not contain any lines")
    parsed = 0
    for line in lines[start:]:
        if line == _EOF:
            if parsed == 0:
                raise PatchError("update hunk does not contain any lines")
            parsed += 1
            break
        if line == "" or line[0] in " +-":
            parsed += 1
            continue
        if parsed == 0:
            raise PatchError(f"unexpected line in update hunk: {line!r}")
        break
    return parsed + start


def parse(text: str) -> list[tuple[str, str]]:
    """[(kind, path)] of a patch: kind is add, delete, update or move (the new path)."""
    body = _boundaries(_lines(text))
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        head = body[i].strip()
        if head.startswith(_ADD):
            out.append(("add", head[len(_ADD):]))
            i += 1
            while i < len(body) and body[i].startswith("+"):
                i += 1
        elif head.startswith(_DELETE):
            out.append(("delete", head[len(_DELETE):]))
            i += 1
        elif head.startswith(_UPDATE):
            path = head[len(_UPDATE):]
            out.append(("update", path))
            i += 1
            if i < len(body) and body[i].startswith(_MOVE):
                out.append(("move", body[i][len(_MOVE):]))
                i += 1
            chunks = 0
            while i < len(body):
                if body[i].strip() == "":
                    i += 1
                    continue
                if body[i].startswith("*"):
                    break
                i += _chunk(body[i:], chunks == 0)
                chunks += 1
            if chunks == 0:
                raise PatchError(f"update file hunk for path {path!r} is empty")
        else:
            raise PatchError(f"{head!r} is not a valid hunk header")
    return out


def paths(text: str) -> list[str]:
    """Every path the patch writes (added, deleted, updated, moved to)."""
    return [p for _kind, p in parse(text)]
