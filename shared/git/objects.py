"""Writing git objects: blobs and trees, through the one door (`git.run`).

Tree and blob ids are computed here when a caller wants to know them before anything is
written (a sync that changes nothing writes nothing); trees are written by one
`mktree --batch`, blobs and trees built from a base by one `fast-import`, never through an
index.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from hunkwise.shared.errors import GitError, UsageError
from hunkwise.shared.git import Sha, TreeEntries, git_dir, null_oid, object_format, run, tree_of


def tree_id(repo: Path, entries: TreeEntries) -> Sha:
    """The id git gives the tree of these entries (sorted as git sorts them: a tree's name
    as if it ended in `/`), computed here without writing it."""
    import hashlib

    def key(item: tuple[str, tuple[str, str]]) -> bytes:
        name = item[0].encode("utf-8", "surrogateescape")
        return name + b"/" if item[1][0] == "040000" else name

    body = b"".join(mode.lstrip("0").encode() + b" " + name.encode("utf-8", "surrogateescape")
                    + b"\0" + bytes.fromhex(oid)
                    for name, (mode, oid) in sorted(entries.items(), key=key))
    h = hashlib.new(object_format(repo))
    h.update(b"tree %d\0" % len(body) + body)
    return Sha(h.hexdigest())


def blob_id(repo: Path, data: bytes) -> Sha:
    """The id git gives these bytes as a blob (unfiltered), computed without writing it."""
    import hashlib

    h = hashlib.new(object_format(repo))
    h.update(b"blob %d\0" % len(data) + data)
    return Sha(h.hexdigest())


def make_trees(repo: Path, trees: Sequence[TreeEntries]) -> list[Sha]:
    """Write these trees with one `mktree --batch` and return their ids.

    A tree may name one listed before it (its id from `tree_id`): git writes them in
    order, each checked against what git says it wrote. Empty subtrees are kept, as
    `mktree` keeps them (fast-import would drop them).
    """
    if not trees:
        return []
    records = []
    for entries in trees:
        for name, (mode, oid) in sorted(entries.items()):
            if "\0" in name or "/" in name or not name:
                raise UsageError(f"unwritable tree entry name {name!r}")
            kind = "tree" if mode == "040000" else "commit" if mode == "160000" else "blob"
            records.append(f"{mode} {kind} {oid}\t".encode()
                           + name.encode("utf-8", "surrogateescape") + b"\0")
        records.append(b"\0")
    out = run(repo, "mktree", "-z", "--batch", input=b"".join(records)).decode().split()
    expected = [tree_id(repo, entries) for entries in trees]
    if out != expected:
        raise GitError(("mktree", "--batch"), -1, b"wrote other trees than were asked for")
    return expected


def hash_blobs(repo: Path, contents: Sequence[bytes]) -> list[Sha]:
    """Write blobs exactly as given (no filters) with one process.

    `fast-import` streams them from memory into one pack: for hundreds of blobs an order
    of magnitude faster than temp files for `hash-object --stdin-paths`.
    """
    if not contents:
        return []
    if len(contents) == 1:
        return [Sha(run(repo, "hash-object", "-w", "--no-filters", "--stdin",
                        input=contents[0]).decode().strip())]
    return [Sha(m) for m in _fast_import(repo, [_blob(i + 1, d) for i, d in enumerate(contents)],
                                          range(1, len(contents) + 1))]


def _blob(mark: int, data: bytes) -> bytes:
    return b"blob\nmark :%d\ndata %d\n" % (mark, len(data)) + data + b"\n"


BIG_IMPORT = 4 << 20  # bytes of fast-import stream above which its pack is kept as is


def _fast_import(repo: Path, stream: Sequence[bytes], marks: Iterable[int]) -> list[str]:
    """Run one `fast-import` of `stream`; the object ids of the given marks, in order."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hunkwise-marks-", dir=git_dir(repo)) as tmp:
        marks_file = os.path.join(tmp, "marks")
        data = b"".join(stream)
        # Under `fastimport.unpackLimit` objects git unpacks the pack into loose objects,
        # each compressed whole: for big texts (many tasks' versions of one large file)
        # three times slower and fifty times larger than the pack, whose blobs are deltas
        # of each other. Small imports stay loose, so no command leaves a tiny pack.
        big = ("-c", "fastimport.unpackLimit=1") if len(data) > BIG_IMPORT else ()
        run(repo, *big, "fast-import", "--quiet", f"--export-marks={marks_file}", input=data)
        with open(marks_file, "rb") as f:
            table = dict(line.split(b" ", 1) for line in f.read().split(b"\n") if line)
    return [table[b":%d" % m].decode().strip() for m in marks]


# Bytes a path keeps as they are: printable ASCII but the quote and the backslash.
_PLAIN = bytes(b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C))


def _fi_path(path: str) -> bytes:
    """A path as fast-import reads it: C-quoted, every byte outside printable ASCII (and
    the quote and backslash) as an octal escape, so no name can end a command early."""
    raw = os.fsencode(path)
    if not raw.translate(None, _PLAIN):
        return b'"' + raw + b'"'  # nothing to escape
    out = bytearray(b'"')
    for b in raw:
        if b in (0x22, 0x5C):
            out += b"\\" + bytes([b])
        elif 0x20 <= b < 0x7F:
            out.append(b)
        else:
            out += b"\\%03o" % b
    return bytes(out + b'"')


def build_tree(repo: Path, base: str, entries: Mapping[str, tuple[str, str] | None]) -> Sha:
    """The tree `base` with `entries` ({path: (mode, oid)} or None to delete) applied."""
    return write_tree(repo, base, entries)[0]


Job = tuple[str, Mapping[str, tuple[str, str] | None], Mapping[str, tuple[str, bytes]]]


def write_tree(repo: Path, base: str, entries: Mapping[str, tuple[str, str] | None],
               contents: Mapping[str, tuple[str, bytes]] | None = None
               ) -> tuple[Sha, dict[str, Sha]]:
    """The tree `base` with `entries` ({path: (mode, oid)} or None to delete) applied and
    `contents` ({path: (mode, bytes)}) written as new blobs; and those blobs' ids.

    One `fast-import` does it all: the blobs, then a throwaway commit whose root starts as
    `base` (`M 040000 <tree> ""`) and takes each change, then a reset that deletes its ref
    again; the commit's tree is the answer. Neither index is touched.
    """
    return write_trees(repo, [(base, entries, contents or {})])[0]


def write_trees(repo: Path, jobs: Sequence[Job]) -> list[tuple[Sha, dict[str, Sha]]]:
    """`write_tree` of each (base, entries, contents), all through one `fast-import`."""
    if not jobs:
        return []
    stream: list[bytes] = []
    marks: list[dict[str, int]] = []
    n = 0
    for _base, _entries, contents in jobs:
        marks.append({})
        for path, (_mode, data) in contents.items():
            n += 1
            marks[-1][path] = n
            stream.append(_blob(n, data))
    refs: list[str] = []
    for (base, entries, contents), job_marks in zip(jobs, marks, strict=True):
        n += 1
        ref = f"refs/hunkwise/tmp/tree-{os.getpid()}-{os.urandom(4).hex()}"
        refs.append(ref)
        stream.append(f"commit {ref}\nmark :{n}\ncommitter hunkwise <hunkwise> 0 +0000\n"
                      f"data 0\nM 040000 {base} \"\"\n".encode())
        # Deletions first: a file that becomes a directory (or the reverse) is then removed
        # before its replacement arrives.
        for path, entry in entries.items():
            if path in contents:
                raise ValueError(f"{path}: given both as an entry and as content")
            if entry is None:
                stream.append(b"D " + _fi_path(path) + b"\n")
        for path, entry in entries.items():
            if entry is not None:
                stream.append(f"M {entry[0]} {entry[1]} ".encode() + _fi_path(path) + b"\n")
        for path, (mode, _data) in contents.items():
            stream.append(f"M {mode} :{job_marks[path]} ".encode() + _fi_path(path) + b"\n")
        stream.append(b"\n")
    stream += [f"reset {ref}\nfrom {null_oid(repo)}\n\n".encode() for ref in refs]
    wanted = [m for job_marks in marks for m in job_marks.values()]
    commit_marks = list(range(n - len(jobs) + 1, n + 1))
    found = _fast_import(repo, stream, [*wanted, *commit_marks])
    oids, commits = found[:len(wanted)], found[len(wanted):]
    out: list[tuple[Sha, dict[str, Sha]]] = []
    at = 0
    for job_marks, commit in zip(marks, commits, strict=True):
        written = {path: Sha(oids[at + i]) for i, path in enumerate(job_marks)}
        at += len(job_marks)
        tree = tree_of(repo, commit)
        if tree is None:
            raise GitError(("fast-import",), -1, b"the tree it built cannot be read")
        out.append((tree, written))
    return out
