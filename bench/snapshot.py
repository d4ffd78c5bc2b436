"""The cost a snapshot adds to `worker done`, on a 10,000-file repo with a small change,
against `git status --porcelain`.

    .venv/bin/python bench/snapshot.py [--quick] [--files N] [--runs K] [--profile] [--keep]

The repo: N text files of 40 lines (default 10,000, in 50 directories), one commit, a
settled index. One task holds `src/mod00/**` and is started; the tree holds a small change:
2 lines edited in each of 3 files and one new untracked file (4 `git status` lines, 7 hunks).

Rows, interleaved round by round (order rotating, one warm-up round first):
- `snapshot (in-process)`: the product's `shared.snapshot.take(repo)` called in this very
  process (environment made hermetic first): copy the index, `git add -A` into the copy,
  `git write-tree`, plus HEAD's commit and tree (one rev-parse). No Python start-up. This is
  what a snapshot adds to a command that runs anyway.
- `snapshot (python -c)`: the same call in a fresh interpreter: start-up + import + snapshot.
- `git status --porcelain`: the reference; ratios are against it.
- `worker done --no-run-checks`: end to end. Before each run (untimed) `coord request-changes`
  and `worker start` put the task back in progress; the tree is identical for every run.
- `git status + git diff -U0`: the floor core_loop.py uses for worker done, for context.
- `python -c pass`: the interpreter's start-up.
Results: bench/results/snapshot.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    BIN,
    PYTHON,
    ROOT,
    Bench,
    Step,
    commit_all,
    count_hunks,
    cprofile_cli,
    edit_lines,
    enter_env,
    generate_repo,
    git,
    git_trace,
    interleave,
    load_line,
    log,
    mib,
    parse_bench_args,
    print_table,
    ru_step,
    run,
    run_ru,
    verdict,
    vs_floor,
    write_json,
)

TASK = "snap"
EDITED_FILES = 3
EDITED_LINES = (8, 24)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return parse_bench_args(
        argv, __doc__, "snapshot.json", files=(10000, 2000), runs=(9, 3),
        profile_help="also cProfile worker done, and list the git processes of a snapshot")


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    K = a.runs
    with Bench(keep=a.keep) as b:
        sb = b.sb
        setup: dict[str, float] = {}
        log(f"repo: {sb.repo} ({a.files} files, {K} runs)")
        t0 = time.perf_counter()
        layout = generate_repo(sb, a.files, 50)
        commit_all(sb, "generated")
        setup["repo_s"] = time.perf_counter() - t0
        run([BIN / "coord", "init", "--json"], sb.repo, sb.env).check()
        run([BIN / "coord", "assign", TASK, "--title", "small change", "--expect", "3 files edited",
             "--write", "src/mod00/**", "--json"], sb.repo, sb.env).check()
        run([BIN / "worker", "start", TASK, "--json"], sb.repo, sb.env).check()
        for p in layout[0][:EDITED_FILES]:
            edit_lines(sb.repo / p, EDITED_LINES, "small change")
        (sb.repo / "src/mod00/new_file.txt").write_text("a new file\n")
        status_lines = len(git(sb, "status", "--porcelain").splitlines())
        assert status_lines == EDITED_FILES + 1, status_lines
        n_hunks = EDITED_FILES * len(EDITED_LINES) + 1

        # ---- the product's snapshot, in this process ---------------------------------------
        enter_env(sb.env)  # hermetic: the product's git.run reads os.environ
        sys.path.insert(0, str(ROOT))
        from hunkwise.shared.hunks import snapshot as product_snapshot

        expected_tree = product_snapshot.take(sb.repo).tree

        def snapshot_in_process(i: int) -> tuple[float, float]:
            s0 = resource.getrusage(resource.RUSAGE_SELF)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            snap = product_snapshot.take(sb.repo)
            dt = time.perf_counter() - t0
            s1 = resource.getrusage(resource.RUSAGE_SELF)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert snap.tree == expected_tree
            cpu = sum(getattr(b, f) - getattr(a_, f) for a_, b in ((s0, s1), (c0, c1))
                      for f in ("ru_utime", "ru_stime"))
            return dt, cpu

        snippet = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
                   "from hunkwise.shared.hunks import snapshot; print(snapshot.take(Path('.')).tree)")

        def snapshot_python_c(i: int) -> tuple[float, float]:
            r = run_ru([PYTHON, "-c", snippet], sb.repo, sb.env).check()
            assert r.stdout.decode().strip() == expected_tree
            return r.seconds, r.cpu

        def status_once(i: int) -> tuple[float, float]:
            r = run_ru(["git", "status", "--porcelain"], sb.repo, sb.env).check()
            assert len(r.stdout.splitlines()) == status_lines
            return r.seconds, r.cpu

        def floor_once(i: int) -> tuple[float, float]:
            t0 = time.perf_counter()
            s = run_ru(["git", "status", "--porcelain"], sb.repo, sb.env).check()
            d = run_ru(["git", "diff", "-U0"], sb.repo, sb.env).check()
            dt = time.perf_counter() - t0
            assert count_hunks(d.stdout) == EDITED_FILES * len(EDITED_LINES)
            return dt, s.cpu + d.cpu

        done_runs = {"n": 0}
        memory: list[int] = []

        def reopen() -> None:
            if done_runs["n"]:
                run([BIN / "coord", "request-changes", TASK, "--note", "again", "--json"],
                    sb.repo, sb.env).check()
                run([BIN / "worker", "start", TASK, "--json"], sb.repo, sb.env).check()

        def done_once(i: int) -> tuple[float, float]:
            r = run_ru([BIN / "worker", "done", TASK, "--no-run-checks", "--json"], sb.repo, sb.env).check()
            rep = r.doc["report"]
            assert rep["hunks"] == n_hunks and rep["changes"] == EDITED_FILES + 1, rep
            done_runs["n"] += 1
            if i >= 0:
                memory.append(r.maxrss_kb)
            return r.seconds, r.cpu

        steps = [
            Step("git status --porcelain", status_once),
            Step("snapshot (in-process)", snapshot_in_process,
                 note="shared.snapshot.take(repo): copy index, add -A, write-tree, rev-parse"),
            Step("snapshot (python -c)", snapshot_python_c,
                 note="fresh interpreter: start-up + import shared.diff + snapshot"),
            Step("worker done --no-run-checks", done_once, before=reopen,
                 note="end to end; request-changes + worker start before each run, untimed"),
            Step("git status + git diff -U0", floor_once, note="core_loop.py's floor, for context"),
            Step("python -c pass", ru_step(sb, [PYTHON, "-c", "pass"])),
        ]
        t0 = time.perf_counter()
        timings = interleave(steps, K, warmup=1, log=log)
        setup["measure_s"] = time.perf_counter() - t0

        if a.profile:
            reopen()
            cprofile_cli("worker_done_small", ["worker", "done", TASK, "--no-run-checks", "--json"],
                         sb.repo, sb)
            git_trace("snapshot", [PYTHON, "-c", snippet], sb.repo, sb)
            reopen()
            git_trace("worker_done_small", [BIN / "worker", "done", TASK, "--no-run-checks", "--json"],
                      sb.repo, sb)

        ref = timings["git status --porcelain"]
        rm, rc = ref.median, ref.cpu_median
        order = ["git status --porcelain", "snapshot (in-process)", "snapshot (python -c)",
                 "worker done --no-run-checks", "git status + git diff -U0", "python -c pass"]
        rows = []
        for n in order:
            rows.append([n, *vs_floor(timings[n], ref, in_ms=True)])
        table = print_table(rows, ["command", "median ms", "x status", "cpu ms", "cpu x status"])
        snap = timings["snapshot (in-process)"]
        done = timings["worker done --no-run-checks"]
        floor2 = timings["git status + git diff -U0"]
        doc: dict[str, Any] = {
            "bench": "snapshot",
            "params": {"files": a.files, "lines_per_file": 40, "runs": K, "quick": a.quick,
                       "change": f"{EDITED_FILES} files x {len(EDITED_LINES)} lines edited + 1 new file"},
            "machine": b.machine(),
            "setup": {k: round(x, 3) for k, x in setup.items()},
            "reference": "git status --porcelain",
            "results": {n: timings[n].as_json(rm) for n in order},
            "snapshot_ratio_to_git_status": round(snap.median / rm, 2),
            "snapshot_cpu_ratio_to_git_status": round(snap.cpu_median / rc, 2),
            "worker_done_ratio_to_git_status": round(done.median / rm, 2),
            "worker_done_ratio_to_status_plus_diff": round(done.median / floor2.median, 2),
            "worker_done_peak_rss_kib": memory,
            "aim": "snapshot within 2x of git status",
            "aim_met": snap.median / rm <= 2.0,
            "total_s": b.total_s(),
        }
        write_json(a.out, doc)
        print(table)
        print(f"\nsnapshot (in-process): {snap.median * 1000:.1f} ms = {snap.median / rm:.2f}x git status "
              f"({snap.cpu_median / rc:.2f}x in CPU); aim within 2x: {verdict(doc['aim_met'])}")
        print(f"worker done: {done.median * 1000:.0f} ms = {done.median / rm:.1f}x git status, "
              f"{done.median / floor2.median:.1f}x git status + git diff -U0; "
              f"peak RSS {mib(memory)} MiB")
        print(f"tree: {a.files} files; change: {status_lines} status lines, {n_hunks} hunks (the "
              f"new file is one); {K} runs")
        print(load_line(doc["machine"]))
        b.finish(a.out, doc)
        return 0


if __name__ == "__main__":
    sys.exit(main())
