"""A scene of many reported tasks, built by writing the state rather than by running a
worker loop per task: one task goes through the real loop, the others are its copies.

Each copy holds a grant on a file of its own, a one-line change in that file in the tree,
and the record a report leaves (`Task.saved`): a snapshot tree of its own (HEAD with its
file changed, written by one `git fast-import` for every copy), HEAD as its base, and the
hunk as git prints it. Their reports were taken at the coordinator's checkpoint already
(`served_revision`), so the inbox holds only the real task's pending report.
"""

from __future__ import annotations

from pathlib import Path

from testing.cli import Cli, ok
from testing.repo import git, numbered, set_line

LINES = 5


def scene_files(n: int) -> dict[str, str | bytes]:
    """The committed files of a scene of `n` reported tasks, plus `a.txt` for an
    in-progress task and `p.txt` for the real reported one."""
    files: dict[str, str | bytes] = {f"f/{i:04d}.txt": numbered(LINES) for i in range(n)}
    files["a.txt"] = numbered(LINES)
    files["p.txt"] = numbered(LINES)
    return files


def reported_tasks(repo: Path, coord: Cli, worker: Cli, n: int) -> list[str]:
    """`n` reported tasks (`P`, the real one, and n - 1 copies `R0001`...) and task `A` in
    progress with a change of its own; the ids of the reported ones. `repo` holds
    `scene_files(n)`."""
    from hunkwise.shared.hunks.diff import hunk_digest
    from hunkwise.shared.state import store
    from hunkwise.shared.state.context import open_repo
    from hunkwise.shared.state.models import parse_grant

    for tid, path in (("A", "a.txt"), ("P", "p.txt")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", path))
        ok(worker(repo, "start", tid))
        set_line(repo, path, 2, f"{tid}'s line")
    ok(worker(repo, "done", "P"))
    head = git(repo, "rev-parse", "HEAD").strip()
    copies = [(f"R{i:04d}", f"f/{i:04d}.txt") for i in range(1, n)]
    trees = _trees(repo, head, [path for _tid, path in copies])
    for _tid, path in copies:
        set_line(repo, path, 2, f"{path}'s line")
    ctx = open_repo(str(repo))
    with store.transaction(ctx.lay) as state:
        real = state.tasks["P"]
        assert real.saved is not None
        for (tid, path), tree in zip(copies, trees, strict=True):
            saved = real.saved.model_copy(update={
                "tree": tree, "own": tree, "base": head,
                "ref": f"refs/hunkwise/snapshots/{tid}/r1",
                "hunks": {path: [(2, 1, hunk_digest(b"line 2\n", f"{path}'s line\n".encode()))]},
                "whole": {}})
            state.tasks[tid] = real.model_copy(update={
                "id": tid, "title": tid, "grants": [parse_grant(path)], "saved": saved, "served_revision": 1,
                "claimed": {}, "last_report": None})
    return ["P"] + [tid for tid, _path in copies]


def _trees(repo: Path, head: str, paths: list[str]) -> list[str]:
    """HEAD's tree with each path's line 2 changed, one tree per path, with one
    `fast-import` (a commit per tree on a scratch ref) and one `rev-parse`."""
    if not paths:
        return []
    stream = []
    for i, path in enumerate(paths, 1):
        text = numbered(LINES).replace("line 2\n", f"{path}'s line\n").encode()
        stream.append(b"commit refs/scratch/trees\nmark :%d\n" % i
                      + b"committer T <t@example.com> 0 +0000\ndata 0\n"
                      + f"from {head}\nM 100644 inline {path}\n".encode()
                      + b"data %d\n" % len(text) + text + b"\n")
    marks = repo / ".git" / "scratch-marks"
    git(repo, "fast-import", "--quiet", f"--export-marks={marks}", input=b"".join(stream))
    commits = dict(line.split(" ") for line in marks.read_text().split("\n") if line)
    marks.unlink()
    out = git(repo, "rev-parse", *(f"{commits[f':{i}']}^{{tree}}" for i in range(1, len(paths) + 1)))
    git(repo, "update-ref", "-d", "refs/scratch/trees")
    return out.split()
