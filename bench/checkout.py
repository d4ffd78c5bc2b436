"""An isolated `worker done` on a 10,000-file tree, against `git worktree add` + the same check.

    .venv/bin/python bench/checkout.py [--quick] [--files N] [--runs K] [--keep]

The repo: N text files of 40 lines (default 10,000, in 50 directories), a tracked
`coord.toml` with `[checkout] setup = ["echo installed > .installed"]` (so the scratch
checkout is cached between runs, docs/checkouts.md) and one task `A` granted one file, with
one line of it edited and the check `test -f README.md && test -f .installed`; 20 other
files carry uncommitted edits no task owns, as a shared tree does.

Rows, interleaved round by round (bench/common.py):
- floor: `git worktree add --detach TMP HEAD`, the check in it, `git worktree remove --force`:
  what a script that makes a fresh checkout per check pays at least (no setup, no task).
- worker done (isolated, cached): the task's checks on HEAD + exactly its change in the
  cached checkout (reset, not re-made; setup not re-run), then the report delivered. Each
  run delivers a new revision of A's pending report.
- worker done (isolated, first run): the same after the cached checkout was removed (untimed):
  the first run's cost, worktree add and setup included.
- worker check (isolated, cached): the checks alone, nothing delivered.
- worker done --no-run-checks: the delivery without checks: done's cost less isolation's.

Results: bench/results/checkout.json and a table on stdout; the aim is the cached
`worker done` within 1.3x of the floor.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from avs_util import loadavg, machine, rel, run_ru, wall_cpu
from common import (
    BIN,
    RESULTS,
    Sandbox,
    Step,
    commit_all,
    edit_lines,
    generate_repo,
    git,
    interleave,
    print_table,
    run,
    write_json,
)

CHECK = "test -f README.md && test -f .installed"
SESSION = "sess-20260101-0900-bench@m"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=None, help="files in the repo (default 10000; quick 2000)")
    ap.add_argument("--runs", type=int, default=None, help="timed runs (default 5; quick 3)")
    ap.add_argument("--quick", action="store_true", help="2,000 files, 3 runs")
    ap.add_argument("--keep", action="store_true", help="keep the sandbox and print its path")
    ap.add_argument("--out", type=Path, default=RESULTS / "checkout.json")
    a = ap.parse_args(argv)
    a.files = a.files or (2000 if a.quick else 10000)
    a.runs = a.runs or (3 if a.quick else 5)
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    t_start = time.perf_counter()
    load_start = loadavg()
    sb = Sandbox.create(keep=a.keep)
    try:
        log(f"repo: {sb.repo} ({a.files} files, {a.runs} runs)")
        layout = generate_repo(sb, a.files, 50)
        (sb.repo / "coord.toml").write_text(
            '[checkout]\nsetup = ["echo installed > .installed"]\n')
        (sb.repo / ".gitignore").write_text(".installed\n")
        commit_all(sb, "generated")
        paths = sorted(p for ps in layout.values() for p in ps)
        mine = paths[len(paths) // 2]
        run([BIN / "coord", "assign", "A", "--title", "bench", "--expect", "e", "--write", mine,
             "--check", CHECK, "--json"], sb.repo, sb.env).check()
        run([BIN / "worker", "start", "A", "--session", SESSION, "--json"], sb.repo, sb.env).check()
        edit_lines(sb.repo / mine, (7,), "the task's edit")
        for p in paths[1::len(paths) // 20][:20]:
            if p != mine:
                edit_lines(sb.repo / p, (5,), "someone else's edit")
        state = sb.repo / ".git" / "coord"

        def done(extra: tuple[str, ...] = ()):
            def once(i: int) -> tuple[float, float]:
                r = run_ru([BIN / "worker", "done", "A", "--session", SESSION, *extra, "--json"],
                           sb.repo, sb.env).check()
                assert r.doc["report"]["checks_total"] == (0 if extra else 1), r.doc
                return wall_cpu(r)
            return once

        def check(i: int) -> tuple[float, float]:
            r = run_ru([BIN / "worker", "check", "A", "--json"], sb.repo, sb.env).check()
            assert r.doc["passed"] and r.doc["where"] == "isolated", r.doc
            return wall_cpu(r)

        def drop_cache() -> None:
            shutil.rmtree(state / "checkouts", ignore_errors=True)
            git(sb, "worktree", "prune")

        def floor(i: int) -> tuple[float, float]:
            parent = Path(tempfile.mkdtemp(prefix="floor-wt-", dir=sb.root))
            where = parent / "tree"
            t0 = time.perf_counter()
            add = run_ru(["git", "worktree", "add", "--detach", where, "HEAD"], sb.repo, sb.env).check()
            chk = run_ru(["sh", "-c", "test -f README.md"], where, sb.env).check()
            rm = run_ru(["git", "worktree", "remove", "--force", where], sb.repo, sb.env).check()
            wall = time.perf_counter() - t0
            shutil.rmtree(parent)
            return wall, add.cpu + chk.cpu + rm.cpu

        FLOOR, CACHED, FIRST = ("floor", "worker done (isolated, cached)",
                                "worker done (isolated, first run)")
        steps = [
            Step(FLOOR, floor, note="git worktree add --detach TMP HEAD; the check; "
                                    "git worktree remove --force TMP"),
            Step(CACHED, done()),
            Step(FIRST, done(), before=drop_cache,
                 note="the cached checkout removed first (untimed): worktree add + setup"),
            Step("worker check (isolated, cached)", check),
            Step("worker done --no-run-checks", done(("--no-run-checks",))),
        ]
        timings = interleave(steps, a.runs, warmup=1, log=log)
        fm, fc = timings[FLOOR].median, timings[FLOOR].cpu_median
        rows = [[n, f"{t.median:.3f}", f"{t.median / fm:.2f}", f"{t.cpu_median:.3f}",
                 f"{t.cpu_median / fc:.2f}"] for n, t in timings.items()]
        table = print_table(rows, ["command", "median s", "x floor", "cpu s", "cpu x floor"])
        cached, first = timings[CACHED], timings[FIRST]
        bare = timings["worker done --no-run-checks"]
        doc: dict[str, Any] = {
            "bench": "checkout",
            "params": {"files": a.files, "runs": a.runs, "check": CHECK, "quick": a.quick},
            "machine": machine(load_start),
            "results": {n: t.as_json(fm) for n, t in timings.items()},
            "ratio_to_floor": round(cached.median / fm, 2),
            "cpu_ratio_to_floor": round(cached.cpu_median / fc, 2),
            "first_run_s": round(first.median, 3),
            "second_run_s": round(cached.median, 3),
            "isolation_adds_s": round(cached.median - bare.median, 3),
            "aim": "the cached isolated worker done within 1.3x of the floor",
            "aim_met": cached.median / fm <= 1.3,
            "total_s": round(time.perf_counter() - t_start, 1),
        }
        write_json(a.out, doc)
        print(table)
        print(f"\nworker done, isolated, cached checkout: {cached.median:.3f}s = "
              f"{cached.median / fm:.2f}x the floor ({cached.cpu_median / fc:.2f}x in CPU); "
              f"aim within 1.3x: {'met' if doc['aim_met'] else 'NOT met'}")
        print(f"first run {first.median:.3f}s, second and later {cached.median:.3f}s; "
              f"isolation adds {cached.median - bare.median:.3f}s to a delivery")
        print(f"wrote {rel(a.out)} in {doc['total_s']:.0f}s")
        if a.keep:
            print(f"kept: {sb.root}")
        return 0
    finally:
        sb.close()


if __name__ == "__main__":
    sys.exit(main())
