"""What attribution by region costs on a large file held by many ranges: 50 range tasks on
a 100,000-line module, each with a decorator on its function's first line (an edit at
every boundary), against git's own diff of the file.

    .venv/bin/python bench/regions.py [--quick] [--lines N] [--tasks T] [--runs K] [--keep]

The repo: one module of N lines (default 100,000; quick 20,000) of functions of 20 lines,
one commit. T tasks (default 50; quick 20) hold one function each as a line range
(`coord assign --write m.py:S-E`), spread over the file, and are started; each function
then gets `@cache` above its `def` (an insertion at the boundary of its range and the one
before it: every boundary is dirty) and one line of its body changed.

Rows, interleaved round by round (order rotating, one warm-up round first):
- `coord diff T1`: the division of the whole file among the T ranges, and one task's diff
  (what `worker done` and `coord accept` pay to attribute);
- `coord status`: every task's changes attributed, and where each range stands;
- `worker done T1`: the division, the report, the record (checks not run);
- `coord accept T1`: its report validated against the division, the commit planned and
  made (`.git` put back before each run, untimed);
- `git diff -U0 HEAD -- m.py`: the floor, git comparing the file;
- `python -c pass`: the interpreter's start-up.
Results: bench/results/regions.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    BIN,
    PYTHON,
    Bench,
    Restorer,
    Step,
    coord,
    git,
    interleave,
    load_line,
    log,
    parse_bench_args,
    print_table,
    ru_step,
    vs_floor,
    worker,
    write_json,
)

FUNCTION = 20  # lines per function: def, 17 body lines, two blank lines


def module(n_lines: int) -> list[str]:
    out: list[str] = []
    k = 0
    while len(out) + FUNCTION <= n_lines:
        out.append(f"def f{k}(x):\n")
        out += [f"    y{i} = x + {k * 31 + i}\n" for i in range(FUNCTION - 4)]
        out += ["    return y0\n", "\n", "\n"]
        k += 1
    return out


def main(argv: list[str] | None = None) -> int:
    def own(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--lines", type=int, default=None,
                        help="lines of the module (default 100000; quick 20000)")
        ap.add_argument("--tasks", type=int, default=None,
                        help="range tasks (default 50; quick 20)")

    a = parse_bench_args(argv, __doc__ or "", "regions.json", runs=(7, 3), before_runs=own)
    a.lines = a.lines or (20_000 if a.quick else 100_000)
    a.tasks = a.tasks or (20 if a.quick else 50)
    with Bench(keep=a.keep) as b:
        sb = b.sb
        lines = module(a.lines)
        n_funcs = len(lines) // FUNCTION
        (sb.repo / "m.py").write_text("".join(lines))
        git(sb, "init", "-q", "-b", "main")
        git(sb, "add", "m.py")
        git(sb, "commit", "-q", "-m", "the module")
        step = max(n_funcs // a.tasks, 1)
        chosen = [k * step for k in range(min(a.tasks, n_funcs))]
        log(f"{len(lines):,} lines, {n_funcs:,} functions; {len(chosen)} range tasks")
        for i, f in enumerate(chosen):
            start = f * FUNCTION + 1
            coord(sb, "assign", f"T{i + 1}", "--title", f"f{f}", "--expect", "e", "--write",
                  f"m.py:{start}-{start + FUNCTION - 1}").check()
            worker(sb, "start", f"T{i + 1}").check()
        new = list(lines)
        for f in sorted(chosen, reverse=True):  # bottom up: the line numbers above hold
            at = f * FUNCTION
            new[at + 1] = new[at + 1].replace("x +", "x -")
            new.insert(at, "@cache\n")
        (sb.repo / "m.py").write_text("".join(new))
        pre = Restorer(sb.repo / ".git", sb.root / "git-pre", sync=False)
        worker(sb, "done", "T1", "--no-run-checks").check()
        done = Restorer(sb.repo / ".git", sb.root / "git-done", sync=False)
        pre.restore()
        steps = [
            Step("coord diff T1", ru_step(sb, [BIN / "coord", "diff", "T1", "--json"]),
                 before=pre.restore),
            Step("coord status", ru_step(sb, [BIN / "coord", "status", "--json"]),
                 before=pre.restore),
            Step("worker done T1", ru_step(sb, [BIN / "worker", "done", "T1",
                                                "--no-run-checks", "--json"]),
                 before=pre.restore),
            Step("coord accept T1", ru_step(sb, [BIN / "coord", "accept", "T1", "--json"]),
                 before=done.restore),
            Step("git diff -U0 HEAD -- m.py", ru_step(sb, ["git", "diff", "-U0", "HEAD", "--",
                                                          "m.py"])),
            Step("python -c pass", ru_step(sb, [PYTHON, "-c", "pass"])),
        ]
        timings = interleave(steps, a.runs, log=log)
        floor = timings["git diff -U0 HEAD -- m.py"]
        rows = [[name, *vs_floor(t, floor)] for name, t in timings.items()]
        print(print_table(rows, ["case", "median s", "x git diff", "cpu s", "cpu x git diff"]))
        doc: dict[str, Any] = {
            "lines": len(lines), "tasks": len(chosen), "runs": a.runs,
            "rows": {name: t.as_json(floor.median) for name, t in timings.items()},
            "machine": b.machine(), "total_s": b.total_s()}
        write_json(a.out, doc)
        print(load_line(doc["machine"]))
        b.finish(a.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
