"""-U0 hunks of tree diffs, hunk identity, and blob splicing (snapshots: shared/hunks/snapshot.py).

Everything here works on bytes: paths and contents are never decoded, and file content is
split on b"\\n" the way git does, never with splitlines().
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise.shared import git

if TYPE_CHECKING:
    from hunkwise.shared.state.models import ChangeKind

REGULAR_MODES = ("100644", "100755")


def hunk_digest(removed: bytes, added: bytes) -> str:
    """Content identity of a hunk: its removed and added bytes, not its position."""
    h = hashlib.sha256()
    h.update(len(removed).to_bytes(8, "big"))
    h.update(removed)
    h.update(added)
    return h.hexdigest()


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    removed: bytes
    added: bytes

    @property
    def sha256(self) -> str:
        return hunk_digest(self.removed, self.added)

    @property
    def is_insertion(self) -> bool:
        return self.old_lines == 0

    @property
    def old_end(self) -> int:
        """Last removed line (inclusive); for an insertion, the line it follows."""
        return self.old_start + self.old_lines - 1 if self.old_lines else self.old_start


@dataclass
class FileChange:
    """One path's change between two trees."""

    path: str
    status: str  # git raw status: A, D, M, T
    old_mode: str
    new_mode: str
    old_oid: str
    new_oid: str
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)
    # git's own -U0 hunks, where attribution replaced `hunks` by a division's (an edge
    # insertion there is a replacement of the edge line): what grants map through.
    git_hunks: list[Hunk] | None = field(default=None, repr=False, compare=False)

    @property
    def splittable(self) -> bool:
        """True when the change can be divided into hunks owned separately."""
        return (self.status == "M" and self.old_mode == self.new_mode
                and self.old_mode in REGULAR_MODES and not self.binary)

    @property
    def kind(self) -> ChangeKind:
        if self.status == "A":
            return "added"
        if self.status == "D":
            return "deleted"
        if self.binary:
            return "binary"
        if self.status == "M" and self.old_mode != self.new_mode and self.old_oid == self.new_oid:
            return "mode"
        if self.status == "M" and self.old_mode != self.new_mode:
            return "mode"
        return "modified"


def split_lines(data: bytes) -> list[bytes]:
    """Split on b"\\n" keeping terminators; the last line may lack one."""
    if not data:
        return []
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _unquote_c(s: bytes) -> bytes:
    """Undo git's C-style quoting of a path ("a\\tb" with octal escapes)."""
    out = bytearray()
    i = 0
    simple = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12,
              ord("r"): 13, ord('"'): 34, ord("\\"): 92}
    while i < len(s):
        c = s[i]
        if c == 92 and i + 1 < len(s):
            n = s[i + 1]
            if n in simple:
                out.append(simple[n])
                i += 2
                continue
            if 48 <= n <= 55:
                out.append(int(s[i + 1:i + 4], 8))
                i += 4
                continue
        out.append(c)
        i += 1
    return bytes(out)


def _header_path(line: bytes) -> bytes:
    """The path of a `diff --git a/P b/P` header (both sides are equal without renames)."""
    rest = line[len(b"diff --git "):]
    if rest.startswith(b'"'):
        i = 1
        while i < len(rest) and rest[i] != 34:  # the closing quote
            i += 2 if rest[i] == 92 else 1  # skip the escaped character after a backslash
        return _unquote_c(rest[1:i])[2:]
    half = (len(rest) - 1) // 2
    return rest[2:half]


def parse_patch(patch: bytes) -> dict[bytes, tuple[bool, list[Hunk]]]:
    """Parse `git diff -U0` output into {path: (binary, hunks)}.

    A type change prints two sections for one path; their hunks are merged, and such a
    change is never split anyway.
    """
    result: dict[bytes, tuple[bool, list[Hunk]]] = {}
    path: bytes | None = None
    hunks: list[Hunk] = []
    binary = False
    removed: list[bytes] = []
    added: list[bytes] = []
    header: tuple[int, int, int, int] | None = None
    last: list[bytes] | None = None

    def close_hunk() -> None:
        nonlocal header, removed, added
        if header is not None:
            hunks.append(Hunk(header[0], header[1], header[2], header[3],
                              b"".join(removed), b"".join(added)))
        header, removed, added = None, [], []

    def close_file() -> None:
        nonlocal path, hunks, binary
        close_hunk()
        if path is not None:
            prev = result.get(path)
            if prev is not None:
                result[path] = (prev[0] or binary, prev[1] + hunks)
            else:
                result[path] = (binary, hunks)
        path, hunks, binary = None, [], False

    for line in patch.split(b"\n"):
        if header is not None:
            # Inside a hunk (most lines): a removed or an added line, tested first. Neither
            # can be a header line (those start "diff --git " or "@@ ").
            lead = line[:1]
            if lead == b"-":
                removed.append(line[1:] + b"\n")
                last = removed
                continue
            if lead == b"+":
                added.append(line[1:] + b"\n")
                last = added
                continue
        if line.startswith(b"diff --git "):
            close_file()
            path = _header_path(line)
            continue
        if path is None:
            continue
        if line.startswith(b"@@ "):
            close_hunk()
            spec = line.split(b" ", 3)
            old, new = spec[1][1:], spec[2][1:]
            o = old.split(b",")
            n = new.split(b",")
            header = (int(o[0]), int(o[1]) if len(o) > 1 else 1,
                      int(n[0]), int(n[1]) if len(n) > 1 else 1)
            continue
        if header is None:
            if line.startswith(b"Binary files ") or line == b"GIT binary patch":
                binary = True
            continue
        if line.startswith(b"\\"):
            # "\ No newline at end of file" belongs to the line just before it.
            if last:
                last[-1] = last[-1][:-1]
    close_file()
    return result


def parse_raw(raw: bytes) -> list[FileChange]:
    changes: list[FileChange] = []
    fields = raw.split(b"\0")
    i = 0
    while i < len(fields) - 1:
        meta = fields[i]
        if not meta.startswith(b":"):
            i += 1
            continue
        old_mode, new_mode, old_oid, new_oid, status = meta[1:].decode().split(" ")
        path = os.fsdecode(fields[i + 1])
        changes.append(FileChange(path, status[0], old_mode, new_mode, old_oid, new_oid))
        i += 2
    return changes


_OID = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})")
_RAW_DIFFS: dict[tuple[str, str, str], bytes] = {}
_PATCHES: dict[tuple[str, str, str], bytes] = {}


def _keep(cache: dict[tuple[str, str, str], bytes], key: tuple[str, str, str], value: bytes,
          most: int) -> None:
    """Remember a diff of two object ids: objects never change, so its answer cannot."""
    if _OID.fullmatch(key[1]) and _OID.fullmatch(key[2]):
        if len(cache) >= most:
            cache.clear()
        cache[key] = value


def raw_diff(repo: Path, old: str, new: str) -> bytes:
    """The raw diff (paths, modes, object ids) between two trees or commits.

    Kept for the rest of the command when both are object ids, so a command that reads one
    pair twice (a snapshot's re-read and its diff; an accept's self-check and its range
    re-mapping) runs git once.
    """
    key = (str(repo), old, new)
    raw = _RAW_DIFFS.get(key)
    if raw is None:
        if old == new and _OID.fullmatch(old):
            return b""  # one object: nothing differs
        raw = git.run(repo, "diff-tree", "-r", "-z", "--raw", "--no-renames", "--full-index",
                      old, new)
        _keep(_RAW_DIFFS, key, raw, 64)
    return raw


def raw_and_patch(repo: Path, old: str, new: str) -> bytes:
    """`raw_diff` of two object ids, with the -U0 patch of the same pair read by the same
    git process and kept for `diff_trees` (`diff-tree --raw -p` prints the raw records,
    an empty record, then the patch: byte for byte what each prints alone)."""
    key = (str(repo), old, new)
    if key in _RAW_DIFFS and key in _PATCHES:
        return _RAW_DIFFS[key]
    if old == new and _OID.fullmatch(old):
        return b""
    out = git.run(repo, "diff-tree", "-r", "-z", "--raw", "-p", "-U0", *git.DIFF_PINS, old, new)
    pos = 0
    while out.startswith(b":", pos):  # a record: ":<modes> <ids> <status>" NUL path NUL
        pos = out.index(b"\0", out.index(b"\0", pos) + 1) + 1
    raw = out[:pos]
    patch = out[pos + 1:] if out.startswith(b"\0", pos) else out[pos:]
    _keep(_RAW_DIFFS, key, raw, 64)
    _keep(_PATCHES, key, patch, 8)
    return raw


def _under(path: str, paths: set[str]) -> bool:
    """Does a literal pathspec list select `path` (the path itself, or a directory above)?
    One set lookup per level of the path, however many paths are given."""
    while True:
        if path in paths:
            return True
        cut = path.rfind("/")
        if cut < 0:
            return False
        path = path[:cut]


def diff_trees(repo: Path, old: str, new: str, paths: Sequence[str] | None = None) -> list[FileChange]:
    """Every changed path between two trees, with -U0 hunks for text content changes."""
    spec: tuple[str, ...] = ("--", *paths) if paths else ()
    changes = parse_raw(raw_diff(repo, old, new))
    if paths:
        wanted = {p.rstrip("/") for p in paths}
        changes = [c for c in changes if _under(c.path, wanted)]
    if not changes:
        return changes
    patch = _PATCHES.get((str(repo), old, new))  # every path's; those asked for are read
    if patch is None:
        patch = git.run(repo, "diff-tree", "-r", "-p", "-U0", *git.DIFF_PINS, old, new, *spec,
                        env={"GIT_LITERAL_PATHSPECS": "1"})
    parsed = parse_patch(patch)
    _undo_forced_binary(repo, old, new, changes, parsed)
    for ch in changes:
        binary, hunks = parsed.get(os.fsencode(ch.path), (False, []))
        ch.binary = binary
        ch.hunks = hunks
    return changes


def looks_binary(data: bytes) -> bool:
    """git's own rule (buffer_is_binary): a NUL byte in the first 8000 bytes."""
    return b"\0" in data[:8000]


def _undo_forced_binary(repo: Path, old: str, new: str, changes: list[FileChange],
                        parsed: dict[bytes, tuple[bool, list[Hunk]]]) -> None:
    """Re-diff as text the files that only a `-diff`/`binary` attribute made binary.

    Attributes are user diff settings too: ownership must not depend on them, or a range
    grant could never own a line of such a file.
    """
    suspects = [c for c in changes if c.status == "M" and c.old_mode in REGULAR_MODES
                and c.new_mode in REGULAR_MODES and parsed.get(os.fsencode(c.path), (False, []))[0]]
    if not suspects:
        return
    blobs = git.cat_blobs(repo, [c.old_oid for c in suspects] + [c.new_oid for c in suspects])
    texty = [c.path for c in suspects
             if not looks_binary(blobs[c.old_oid]) and not looks_binary(blobs[c.new_oid])]
    if not texty:
        return
    patch = git.run(repo, "diff-tree", "-r", "-p", "-U0", "--text", *git.DIFF_PINS, old, new,
                    "--", *texty, env={"GIT_LITERAL_PATHSPECS": "1"})
    parsed.update(parse_patch(patch))


def line_offsets(data: bytes) -> list[int]:
    """Where each line of `data` starts (as `split_lines` cuts it), and `len(data)` last:
    line k (1-based) is `data[offs[k - 1]:offs[k]]`."""
    parts = data.split(b"\n")
    n = len(parts) - 1 if not parts[-1] else len(parts)
    starts = list(accumulate(map((1).__add__, map(len, parts)), initial=0))
    return [*starts[:n], len(data)]


def splice(base: bytes, hunks: Iterable[Hunk], offsets: Sequence[int] | None = None) -> bytes:
    """Apply -U0 hunks (in old-line coordinates of `base`) to `base`; `offsets` is
    `line_offsets(base)` when the caller has it (one base, many splices)."""
    offs = line_offsets(base) if offsets is None else offsets
    n = len(offs) - 1
    # In text order: a removal of old lines [s, e] sits at s, an insertion after old line
    # p in the gap at p + 0.5. Hunks that meet at one point (carried insertions whose
    # lines in between were removed) keep their given order.
    order = sorted(enumerate(hunks), key=lambda ih: (_place(ih[1]), ih[0]))
    pieces: list[bytes] = []
    pos = 0
    for _i, h in order:
        if h.old_lines:
            if h.old_start < 1 or h.old_start - 1 + h.old_lines > n:
                raise ValueError(f"hunk at line {h.old_start} does not match its base")
            start, end = offs[h.old_start - 1], offs[h.old_start - 1 + h.old_lines]
            if base[start:end] != h.removed:
                raise ValueError(f"hunk at line {h.old_start} does not match its base")
        else:
            start = end = offs[min(max(h.old_start, 0), n)]
        if start < pos:
            raise ValueError(f"hunk at line {h.old_start} overlaps another")
        pieces += (base[pos:start], h.added)
        pos = end
    pieces.append(base[pos:])
    return b"".join(pieces)


def shift_hunks(hunks: Sequence[Hunk], applied: Sequence[Hunk]) -> list[Hunk]:
    """`hunks` in the coordinates of the old text after `applied` (disjoint) were spliced in."""
    out: list[Hunk] = []
    for h in hunks:
        delta = sum(a.new_lines - a.old_lines for a in applied if _precedes(a, h))
        out.append(Hunk(h.old_start + delta, h.old_lines, h.new_start, h.new_lines, h.removed, h.added))
    return out


def _place(h: Hunk) -> float:
    """Where a hunk sits in its old text: a removal at its first line, an insertion after
    old line p in the gap at p + 0.5."""
    return h.old_start if h.old_lines else h.old_start + 0.5


def _precedes(a: Hunk, h: Hunk) -> bool:
    """Does `a` (not touching `h`) land before `h` in the new text?

    An insertion "after old line p" comes after a removal that ends at p (it follows
    that removal's replacement) and before a removal that starts at p + 1.
    """
    if h.old_lines:  # h removes old lines [s, e]
        return a.old_end < h.old_start if a.old_lines else a.old_start < h.old_start
    if not a.old_lines and a.old_start == h.old_start:
        return a.new_start < h.new_start  # two insertions at one point: in the new text's order
    return a.old_end <= h.old_start if a.old_lines else a.old_start < h.old_start


def inverse(h: Hunk) -> Hunk:
    """The hunk that undoes `h`, in the coordinates of its new side."""
    return Hunk(h.new_start, h.new_lines, h.old_start, h.old_lines, h.added, h.removed)


def touches(a: Hunk, b: Hunk) -> bool:
    """Do two hunks over the same old text change the same lines?"""
    if a.old_lines and b.old_lines:
        return a.old_start <= b.old_end and b.old_start <= a.old_end
    if not a.old_lines and not b.old_lines:
        return a.old_start == b.old_start
    ins, rem = (a, b) if not a.old_lines else (b, a)
    return rem.old_start <= ins.old_start < rem.old_end


def carry(hunks: Sequence[Hunk], through: Sequence[Hunk]) -> tuple[list[Hunk], list[Hunk]]:
    """Move `hunks` (over text A) across the edits `through` (A -> B).

    Returns (hunks in B's coordinates, hunks that collide with an edit of the same lines).
    """
    moved: list[Hunk] = []
    clashes: list[Hunk] = []
    for h in sorted(hunks, key=_place):
        if any(touches(h, t) for t in through):
            clashes.append(h)
        else:
            moved.extend(shift_hunks([h], through))
    return moved, clashes


def blob_hunks(repo: Path, old_oid: str, new_oid: str) -> list[Hunk]:
    """-U0 hunks between two blobs, with the same pinned options as tree diffs."""
    patch = git.run(repo, "diff", "-U0", "--text", *git.DIFF_PINS, old_oid, new_oid)
    parsed = parse_patch(patch)
    return next(iter(parsed.values()), (False, []))[1]


def changed_paths(repo: Path, old: str, new: str) -> list[str]:
    """Paths that differ between two trees (no content diff)."""
    return [c.path for c in parse_raw(raw_diff(repo, old, new))]
