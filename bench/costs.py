"""What every agent tool call and every task pays for hunkwise, each case against its floor,
as paired ratios: the command and its floor run in turn (A B A B ...) and the ratio is taken
pair by pair, so a machine whose speed drifts during the run moves both sides alike.

    .venv/bin/python bench/costs.py [--quick] [--runs K] [--only GROUP] [--cpu] [--json PATH]

Cases (see bench/README.md, "costs.py"):
- `coord status` with 10 / 100 / 1,000 reported tasks (floor: `git status --porcelain` and
  `git diff -U0` on the same tree), and `coord next`, `worker done` at 10 and 1,000;
- `worker heartbeat` (floor: `git status --porcelain`) when nothing changed since the task's
  last record, and after an edit (a record due: the tree is read), `coord status` and
  `worker done` (floor: status + diff) in trees of 1,000 / 10,000 / 100,000 files
  (`--quick`: no 100,000);
- `coord assign` with 10 and 1,000 tasks in the state (floor: `python -c pass`);
- `coord accept` of 1,000 of 2,000 hunks in 500 files, against the floor that writes the
  blobs with `hash-object -w` and the one that writes them as one pack (`fast-import`).

`rows()` returns the table's rows; `bench/run.py` prints them with the guard rows of
`bench/hooks.py` in one table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # testing/: the scene of many reported tasks

from common import (  # noqa: E402
    BIN,
    PYTHON,
    RESULTS,
    Restorer,
    Sandbox,
    commit_all,
    edit_lines,
    enter_env,
    generate_repo,
    git,
    log,
    print_table,
    run,
)

FLOOR_DIFF = ["sh", "-c", "git status --porcelain >/dev/null && git diff -U0 >/dev/null"]
FLOOR_STATUS = ["git", "status", "--porcelain"]


# ---- paired timing -------------------------------------------------------------------------

@dataclass
class Row:
    """One case: the command's median, its floor's, the median of the per-pair ratios."""

    case: str
    floor: str
    a_ms: float
    b_ms: float
    ratio: float
    target: str = ""
    ratios: list[float] = field(default_factory=list)

    def cells(self) -> list[str]:
        return [self.case, f"{self.a_ms:.0f}", self.floor, f"{self.b_ms:.0f}",
                f"{self.ratio:.2f}x", self.target]

    def as_json(self) -> dict[str, Any]:
        return {"case": self.case, "floor": self.floor, "median_ms": round(self.a_ms, 1),
                "floor_median_ms": round(self.b_ms, 1), "paired_ratio": round(self.ratio, 3),
                "ratios": [round(r, 3) for r in self.ratios], "target": self.target}


# What a run is timed by: wall time, or (`--cpu`) the CPU time of the process and its
# children (user + system), steadier than wall time on a machine others load.
CLOCK = {"cpu": False}


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _once(argv: Sequence[Any], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    c0 = _children_cpu()
    p = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = _children_cpu() - c0 if CLOCK["cpu"] else time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {p.returncode}: "
                           f"{p.stderr.decode(errors='replace')[-1500:]}")
    return dt


def paired(case: str, a: Sequence[Any], floor: str, b: Sequence[Any], cwd: Path,
           env: dict[str, str], runs: int, before: Callable[[], object] | None = None,
           target: str = "") -> Row:
    """A and B in turn, `runs` pairs after one warm-up pair; who goes first alternates."""
    a_s: list[float] = []
    b_s: list[float] = []
    for i in range(runs + 1):
        pair = {}
        for side in (("a", "b") if i % 2 == 0 else ("b", "a")):
            if before is not None:
                before()
            pair[side] = _once(a if side == "a" else b, cwd, env)
        if i:  # the first pair warms the caches
            a_s.append(pair["a"])
            b_s.append(pair["b"])
    ratios = [x / y for x, y in zip(a_s, b_s, strict=True)]
    row = Row(case, floor, statistics.median(a_s) * 1000, statistics.median(b_s) * 1000,
              statistics.median(ratios), target, ratios)
    log(f"  {case}: {row.a_ms:.0f} ms, {floor} {row.b_ms:.0f} ms, {row.ratio:.2f}x")
    return row


# ---- reported tasks ----------------------------------------------------------------------------

def reported_scene(n: int) -> tuple[Sandbox, Restorer]:
    from testing.cli import run_cli
    from testing.repo import build_repo
    from testing.reported import reported_tasks, scene_files

    sb = Sandbox.create()
    enter_env(sb.env)
    sb.repo.rmdir()
    build_repo(sb.repo, scene_files(n))
    reported_tasks(sb.repo, lambda r, *a, **k: run_cli("coord", r, *a, **k),
                   lambda r, *a, **k: run_cli("worker", r, *a, **k), n)
    from hunkwise.shared import git as hgit

    hgit.close_readers()
    time.sleep(1.1)  # past the racy-clean second of the files just written (as commit_all)
    git(sb, "update-index", "-q", "--really-refresh")
    return sb, Restorer(sb.repo / ".git" / "coord", sb.root / "coord-saved", sync=False)


def reported_rows(runs: int, sizes: Sequence[int]) -> list[Row]:
    rows: list[Row] = []
    for n in sizes:
        log(f"reported tasks: {n}")
        sb, saved = reported_scene(n)
        try:
            rows.append(paired(f"coord status, {n:,} reported tasks",
                               [BIN / "coord", "status", "--json"], "status+diff", FLOOR_DIFF,
                               sb.repo, sb.env, runs, target="flat: <= 1.2x of the 10-task row"))
            if n in (sizes[0], sizes[-1]):
                rows.append(paired(f"coord next, {n:,} reported tasks",
                                   [BIN / "coord", "next", "--json"], "status+diff", FLOOR_DIFF,
                                   sb.repo, sb.env, runs, before=saved.restore,
                                   target="flat: <= 1.2x of the 10-task row"))
                rows.append(paired(f"worker done, {n:,} reported tasks",
                                   [BIN / "worker", "done", "A", "--no-run-checks", "--json"],
                                   "status+diff", FLOOR_DIFF, sb.repo, sb.env, runs,
                                   before=saved.restore,
                                   target="flat: <= 1.2x of the 10-task row"))
        finally:
            sb.close()
    return rows


# ---- large trees ------------------------------------------------------------------------------

def _editor(path: Path) -> Callable[[], None]:
    """Each call writes `path` again (a record due: the task wrote since its last one)."""
    n = itertools.count()
    return lambda: edit_lines(path, (5,), f"again {next(n)}")


def tree_rows(runs: int, sizes: Sequence[int]) -> list[Row]:
    rows: list[Row] = []
    for n in sizes:
        log(f"tree of {n:,} files")
        sb = Sandbox.create()
        try:
            layout = generate_repo(sb, n, max(5, n // 200))
            commit_all(sb, "generated")
            run([BIN / "coord", "init", "--json"], sb.repo, sb.env).check()
            mine = sorted(layout[0])[:5]
            run([BIN / "coord", "assign", "T", "--title", "t", "--expect", "e", "--write",
                 "src/mod00/**", "--json"], sb.repo, sb.env).check()
            run([BIN / "worker", "start", "T", "--json"], sb.repo, sb.env).check()
            for p in mine:
                edit_lines(sb.repo / p, (3, 9), "T")
            # Edits made a while ago (a heartbeat comes every minute or so, not within the
            # two seconds in which a file's stat data cannot be trusted, shared/work/quiet.py).
            ago = time.time() - 60
            for p in mine:
                os.utime(sb.repo / p, (ago, ago))
            run([BIN / "worker", "heartbeat", "T", "--json"], sb.repo, sb.env).check()
            saved = Restorer(sb.repo / ".git" / "coord", sb.root / "coord-saved", sync=False)
            label = f"{n // 1000}k files"
            rows.append(paired(f"worker heartbeat, {label}", [BIN / "worker", "heartbeat", "T", "--json"],
                               "git status", FLOOR_STATUS, sb.repo, sb.env, runs,
                               target="<= 1.5x at 100k"))
            rows.append(paired(f"worker heartbeat after an edit, {label}",
                               [BIN / "worker", "heartbeat", "T", "--json"],
                               "git status", FLOOR_STATUS, sb.repo, sb.env, runs,
                               before=_editor(sb.repo / mine[0]),
                               target="<= 1.5x at 100k"))
            rows.append(paired(f"coord status, {label}", [BIN / "coord", "status", "--json"],
                               "status+diff", FLOOR_DIFF, sb.repo, sb.env, runs,
                               target="<= 1.8x at 100k"))
            rows.append(paired(f"worker done, {label}",
                               [BIN / "worker", "done", "T", "--no-run-checks", "--json"],
                               "status+diff", FLOOR_DIFF, sb.repo, sb.env, runs,
                               before=saved.restore, target="<= 1.8x at 100k"))
        finally:
            sb.close()
    return rows


# ---- assign with many tasks ---------------------------------------------------------------------

def assign_rows(runs: int, sizes: Sequence[int]) -> list[Row]:
    rows: list[Row] = []
    for n in sizes:
        log(f"assign with {n:,} tasks")
        sb = Sandbox.create()
        try:
            enter_env(sb.env)
            (sb.repo / "README.md").write_text("x\n")
            commit_all(sb, "one file")
            from hunkwise.shared import git as hgit
            from hunkwise.shared.state import store
            from hunkwise.shared.state.context import open_repo
            from hunkwise.shared.state.models import Task, parse_grant

            lay = open_repo(str(sb.repo)).lay
            with store.transaction(lay) as state:
                now = store.now()
                for i in range(n):
                    tid = f"T{i:04d}"
                    state.tasks[tid] = Task(id=tid, title=f"task {i}", expect="e",
                                            grants=[parse_grant(f"g/{i:04d}/**")],
                                            created_at=now, updated_at=now)
            hgit.close_readers()
            saved = Restorer(sb.repo / ".git" / "coord", sb.root / "coord-saved", sync=False)
            rows.append(paired(f"coord assign, {n:,} tasks",
                               [BIN / "coord", "assign", "NEW", "--title", "t", "--expect", "e",
                                "--write", "new/**", "--json"], "python -c pass",
                               [PYTHON, "-c", "pass"], sb.repo, sb.env, runs,
                               before=saved.restore, target="1,000 within 1.3x of 10"))
        finally:
            sb.close()
    return rows


# ---- accept -------------------------------------------------------------------------------------

FLOOR_SCRIPT = """set -e
T=$(mktemp -d .git/floor-XXXXXX)
cp -p .git/index "$T/index"
GIT_INDEX_FILE="$T/index" git add -A
S=$(GIT_INDEX_FILE="$T/index" git write-tree)
git diff -U0 {head} "$S" >/dev/null
{write_blobs}
git commit-tree "$S" -p {head} -m floor >/dev/null
rm -rf "$T"
"""


def accept_scene(files: int = 500) -> tuple[Sandbox, Restorer, Path, Path]:
    """Tasks A and B hold lines 1-20 and 21-40 of the same `files` files and have reported
    two hunks in each; the floors' scripts (hash-object, pack), and `.git` kept aside."""
    sb = Sandbox.create()
    layout = generate_repo(sb, files, max(5, files // 200))
    changed = sorted(p for ps in layout.values() for p in ps)[:files]
    commit_all(sb, "generated")
    run([BIN / "coord", "init", "--json"], sb.repo, sb.env).check()
    for tid, (lo, hi) in (("A", (1, 20)), ("B", (21, 40))):
        grants = [x for p in changed for x in ("--write", f"{p}:{lo}-{hi}")]
        run([BIN / "coord", "assign", tid, "--title", tid, "--expect", "e", *grants,
             "--json"], sb.repo, sb.env).check()
        run([BIN / "worker", "start", tid, "--json"], sb.repo, sb.env).check()
    blobs = sb.root / "blobs"
    blobs.mkdir()
    stream = []
    for i, p in enumerate(changed):
        f = sb.repo / p
        edit_lines(f, (2, 10), "task A")
        data = f.read_bytes()  # HEAD + A's edits: the blobs the commit needs
        (blobs / str(i)).write_bytes(data)
        stream.append(b"blob\ndata %d\n" % len(data) + data + b"\n")
        edit_lines(f, (25, 35), "task B")
    for tid in ("A", "B"):
        run([BIN / "worker", "done", tid, "--no-run-checks", "--json"], sb.repo, sb.env).check()
    git(sb, "repack", "-a", "-d", "-q")
    head = git(sb, "rev-parse", "HEAD").decode().strip()
    (sb.root / "blobs.list").write_text("".join(f"{blobs / str(i)}\n" for i in range(files)))
    (sb.root / "blobs.stream").write_bytes(b"".join(stream))
    hash_floor = sb.root / "floor-hash.sh"
    hash_floor.write_text(FLOOR_SCRIPT.format(
        head=head, write_blobs=f"git hash-object -w --stdin-paths <{sb.root / 'blobs.list'} >/dev/null"))
    pack_floor = sb.root / "floor-pack.sh"
    pack_floor.write_text(FLOOR_SCRIPT.format(
        head=head, write_blobs=f"git fast-import --quiet <{sb.root / 'blobs.stream'}"))
    saved = Restorer(sb.repo / ".git", sb.root / "git-saved", sync=False)
    return sb, saved, hash_floor, pack_floor


def accept_rows(runs: int, files: int = 500) -> list[Row]:
    log(f"accept: {2 * files:,} of {4 * files:,} hunks in {files} files")
    sb, saved, hash_floor, pack_floor = accept_scene(files)
    try:
        accept = [BIN / "coord", "accept", "A", "--json"]
        case = f"coord accept, {2 * files:,} of {4 * files:,} hunks"
        return [
            paired(case, accept, "hash-object floor", ["sh", hash_floor], sb.repo, sb.env, runs,
                   before=saved.restore, target="<= 1.3x"),
            paired(case, accept, "pack floor", ["sh", pack_floor], sb.repo, sb.env, runs,
                   before=saved.restore, target="<= 3x"),
        ]
    finally:
        sb.close()


# ---- the table ----------------------------------------------------------------------------------

def flatness(rows: list[Row]) -> list[list[str]]:
    """The growth targets: a row's paired ratio over the smallest size's."""
    out = []
    for prefix, small, large, target in (
            ("coord status, ", "10 reported", "1,000 reported", 1.2),
            ("coord next, ", "10 reported", "1,000 reported", 1.2),
            ("worker done, ", "10 reported", "1,000 reported", 1.2),
            ("coord assign, ", "10 tasks", "1,000 tasks", 1.3)):
        s = next((r for r in rows if r.case.startswith(prefix) and small in r.case), None)
        g = next((r for r in rows if r.case.startswith(prefix) and large in r.case), None)
        if s and g:
            out.append([f"{prefix}{large} / {small}", "", "", "", f"{g.ratio / s.ratio:.2f}x",
                        f"<= {target}x"])
    return out


GROUPS = ("reported", "tree", "assign", "accept")


def rows(quick: bool = False, runs: int | None = None,
         only: Sequence[str] = GROUPS) -> tuple[list[Row], list[list[str]]]:
    k = runs or (3 if quick else 7)
    r: list[Row] = []
    if "reported" in only:
        r += reported_rows(k, (10, 100, 1000))
    if "tree" in only:
        r += tree_rows(k, (1000, 10000) if quick else (1000, 10000, 100000))
    if "assign" in only:
        r += assign_rows(k, (10, 1000))
    if "accept" in only:
        r += accept_rows(k)
    return r, flatness(r)


HEADER = ["case", "median ms", "floor", "floor ms", "paired ratio", "target"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 pairs a case, no 100,000-file tree")
    ap.add_argument("--runs", type=int, default=None, help="pairs a case (default 7)")
    ap.add_argument("--cpu", action="store_true",
                    help="time each run by its CPU time (user + system, children included), not wall")
    ap.add_argument("--only", action="append", choices=GROUPS, default=None,
                    help="run only this group of rows (repeatable; default all)")
    ap.add_argument("--json", default=str(RESULTS / "costs.json"))
    a = ap.parse_args(argv)
    CLOCK["cpu"] = a.cpu
    found, flat = rows(a.quick, a.runs, a.only or GROUPS)
    print(print_table([x.cells() for x in found] + flat, HEADER))
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps({"rows": [x.as_json() for x in found],
                                        "growth": flat, "load": os.getloadavg(),
                                        "cpus": os.cpu_count(),
                                        "maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss},
                                       indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
