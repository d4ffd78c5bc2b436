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

from common import (
    BIN,
    Bench,
    Step,
    aim_line,
    commit_all,
    edit_lines,
    floor_ratios,
    generate_repo,
    git,
    interleave,
    log,
    parse_bench_args,
    print_table,
    run,
    run_ru,
    vs_floor,
    wall_cpu,
    write_json,
)

CHECK = "test -f README.md && test -f .installed"
SESSION = "sess-20260101-0900-bench@m"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return parse_bench_args(argv, __doc__, "checkout.json", files=(10000, 2000), runs=(5, 3))


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    with Bench(keep=a.keep) as b:
        sb = b.sb
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
        ref = timings[FLOOR]
        fm = ref.median
        rows = [[n, *vs_floor(t, ref)] for n, t in timings.items()]
        table = print_table(rows, ["command", "median s", "x floor", "cpu s", "cpu x floor"])
        cached, first = timings[CACHED], timings[FIRST]
        bare = timings["worker done --no-run-checks"]
        doc: dict[str, Any] = {
            "bench": "checkout",
            "params": {"files": a.files, "runs": a.runs, "check": CHECK, "quick": a.quick},
            "machine": b.machine(),
            "results": {n: t.as_json(fm) for n, t in timings.items()},
            **floor_ratios(cached, ref),
            "first_run_s": round(first.median, 3),
            "second_run_s": round(cached.median, 3),
            "isolation_adds_s": round(cached.median - bare.median, 3),
            "aim": "the cached isolated worker done within 1.3x of the floor",
            "aim_met": cached.median / fm <= 1.3,
            "total_s": b.total_s(),
        }
        write_json(a.out, doc)
        print(table)
        print(aim_line("worker done, isolated, cached checkout", cached, ref, 1.3, doc["aim_met"]))
        print(f"first run {first.median:.3f}s, second and later {cached.median:.3f}s; "
              f"isolation adds {cached.median - bare.median:.3f}s to a delivery")
        b.finish(a.out, doc)
        return 0


if __name__ == "__main__":
    sys.exit(main())
