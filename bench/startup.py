"""The fixed cost of a command: what `coord` and `worker` pay before doing any work, and the
git processes each of the hot commands starts.

    .venv/bin/python bench/startup.py [--runs K] [--quick] [--keep]

A small repository (60 files, one commit) with three tasks assigned and one started. Timed,
interleaved round by round (one untimed warm-up round first): `python -c pass` (the venv's
bare interpreter), `git status` in the same repo, `coord --version`, `coord status`,
`coord inbox`, `worker heartbeat T1`, `worker signals`, `coord next` (empty inbox). Each
command's median and its excess over the bare interpreter are printed against the target
"at most 100 ms above the bare interpreter".

Then the git processes (GIT_TRACE2_PERF, read as common.git_trace reads them) of
`coord status`, `worker done` (a one-line change), `coord next` (one pending report) and
`coord accept` (that task's change), and `coord accept` of a range grant's change beside
another range's in the same file, against the target "coord accept starts at most 12".
Results: bench/results/startup.json and a table on stdout. See bench/README.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BIN,
    PYTHON,
    RESULTS,
    Bench,
    Sandbox,
    Step,
    commit_all,
    edit_lines,
    generate_repo,
    interleave,
    load_line,
    log,
    parse_bench_args,
    print_table,
    rel,
    run,
    run_traced,
    trace_command,
    trace_depth,
    verdict,
    wall_cpu,
    write_json,
)

TARGET_EXCESS_S = 0.100   # fixed cost of a command above the bare interpreter
TARGET_ACCEPT_GIT = 12    # git processes of one coord accept


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return parse_bench_args(argv, __doc__, "startup.json", runs=(15, 5),
                            runs_help="timed runs per command (default 15)")


def count_git(name: str, argv: list[Any], sb: Sandbox) -> dict[str, Any]:
    """Run one command under GIT_TRACE2_PERF (common.run_traced, as common.git_trace does)
    and count the git processes it started itself (depth 0) and those a git process started
    in turn (nested); the list goes to results/profile_<name>_git.txt."""
    r, trace = run_traced(name, argv, sb.repo, sb)
    direct = nested = 0
    git_s = 0.0
    listing = []
    for p in trace:
        if p[3] == "start":
            depth = trace_depth(p)
            direct += depth == 0
            nested += depth > 0
            listing.append("    " * depth + trace_command(p)[:150])
        elif p[3] == "exit" and p[1] == "d0":
            git_s += float(p[5] or 0)
    out = RESULTS / f"profile_{name}_git.txt"
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# git processes run by: {' '.join(str(x) for x in argv[:4])} "
                   f"({direct} direct, {nested} nested; indented: run by a git process)\n"
                   + "\n".join(listing) + "\n")
    return {"git_processes": direct, "nested_git_processes": nested,
            "wall_s": round(r.seconds, 4), "in_git_s": round(git_s, 4), "list": rel(out)}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    K = a.runs
    with Bench(keep=a.keep) as b:
        sb = b.sb
        log(f"repo: {sb.repo} (60 files, 3 tasks, {K} runs)")
        layout = generate_repo(sb, 60, 3)
        commit_all(sb, "generated")

        def cli(tool: str, *args: str) -> Any:
            return run([BIN / tool, *args, "--json"], sb.repo, sb.env).check().doc

        cli("coord", "init")
        for i in range(3):
            cli("coord", "assign", f"T{i + 1}", "--title", f"bench task {i + 1}",
                "--expect", "a line is edited", "--write", f"src/mod{i:02d}/**")
        session = cli("worker", "start", "T1")["session"]

        # ---- fixed cost, interleaved ------------------------------------------------------
        def timed_cmd(argv: list[Any], *, check: Any = None) -> Any:
            def once(i: int) -> tuple[float, float]:
                r = run(argv, sb.repo, sb.env).check()
                if check is not None:
                    check(r)
                return wall_cpu(r)
            return once

        def empty_next(r: Any) -> None:
            assert r.doc["next"] is None, r.doc

        commands: list[tuple[str, list[Any], Any]] = [
            ("python -c pass", [PYTHON, "-c", "pass"], None),
            ("git status", ["git", "status"], None),
            ("coord --version", [BIN / "coord", "--version"], None),
            ("coord status", [BIN / "coord", "status", "--json"], None),
            ("coord inbox", [BIN / "coord", "inbox", "--json"], None),
            ("worker heartbeat T1", [BIN / "worker", "heartbeat", "T1", "--json"], None),
            ("worker signals", [BIN / "worker", "signals", "--session", session, "--json"], None),
            ("coord next (empty inbox)", [BIN / "coord", "next", "--json"], empty_next),
        ]
        # The git processes of each timed command, once, before the timing (no state changes).
        gits = {}
        for name, argv_, _ in commands[2:]:
            gits[name] = count_git("startup_" + name.split(" (")[0].replace(" ", "_")
                                   .replace("--", ""), argv_, sb)
        steps = [Step(name, timed_cmd(argv_, check=chk)) for name, argv_, chk in commands]
        t0 = time.perf_counter()
        timings = interleave(steps, K, warmup=1, log=log)
        measure_s = time.perf_counter() - t0

        # ---- git processes of the commands that change things -----------------------------
        # T2 edits one line of one file, reports it, the coordinator takes the report and
        # accepts it: each step counted once.
        cli("worker", "start", "T2")
        edit_lines(sb.repo / layout[1][0], [5], "T2")  # after the start: its own change
        flow = [("coord status", [BIN / "coord", "status", "--json"]),
                ("worker done (1 hunk)", [BIN / "worker", "done", "T2", "--no-run-checks", "--json"]),
                ("coord next (1 pending)", [BIN / "coord", "next", "--json"]),
                ("coord accept (1 hunk)", [BIN / "coord", "accept", "T2", "--json"])]
        counted = {}
        for name, argv_ in flow:
            counted[name] = count_git("startup_flow_" + name.split(" (")[0].replace(" ", "_"),
                                      argv_, sb)
        accepted = run(["git", "log", "--format=%s", "-1"], sb.repo, sb.env).check().stdout
        assert b"generated" not in accepted, "coord accept made no commit"
        # Two range grants in one file (T2's, free again): R1's change is accepted beside
        # R2's uncommitted one, and R2's range is re-mapped through the commit.
        ranged = layout[1][1]
        for tid, lines in (("R1", "1-10"), ("R2", "20-30")):
            cli("coord", "assign", tid, "--title", f"bench range {tid}", "--expect", "a line",
                "--write", f"{ranged}:{lines}")
            cli("worker", "start", tid)
        edit_lines(sb.repo / ranged, [5], "R1")
        edit_lines(sb.repo / ranged, [25], "R2")
        cli("worker", "done", "R1", "--no-run-checks")
        name = "coord accept (range grants)"
        counted[name] = count_git("startup_flow_coord_accept_ranges",
                                  [BIN / "coord", "accept", "R1", "--json"], sb)

        # ---- report -----------------------------------------------------------------------
        base = timings["python -c pass"]
        bm, bc = base.median, base.cpu_median
        rows = []
        verdicts: dict[str, bool] = {}
        results: dict[str, Any] = {}
        for name, _, _ in commands:
            t = timings[name]
            ex, exc = t.median - bm, t.cpu_median - bc
            judged = name.startswith(("coord", "worker"))
            ok = ex <= TARGET_EXCESS_S
            if judged:
                verdicts[name] = ok
            g = gits.get(name)
            rows.append([name, f"{t.median * 1000:.0f}", f"{ex * 1000:+.0f}",
                         f"{t.cpu_median * 1000:.0f}", f"{exc * 1000:+.0f}",
                         str(g["git_processes"]) if g else "",
                         verdict(ok) if judged else ""])
            results[name] = dict(t.as_json(), excess_over_python_ms=round(ex * 1000, 1),
                                 cpu_excess_over_python_ms=round(exc * 1000, 1),
                                 git=g, **({"target_met": ok} if judged else {}))
        table = print_table(rows, ["command", "median ms", "excess ms", "cpu ms", "cpu excess",
                                   "git procs", "<= 100 ms above python"])
        grows = [[name, str(c["git_processes"]), str(c["nested_git_processes"]),
                  f"{c['wall_s'] * 1000:.0f}", f"{c['in_git_s'] * 1000:.0f}"]
                 for name, c in counted.items()]
        gtable = print_table(grows, ["command", "git processes", "nested", "wall ms (traced)",
                                     "in git ms"])
        accept_n = counted["coord accept (1 hunk)"]["git_processes"]
        ranges_n = counted["coord accept (range grants)"]["git_processes"]
        accept_ok = max(accept_n, ranges_n) <= TARGET_ACCEPT_GIT
        n_met = sum(verdicts.values())
        doc: dict[str, Any] = {
            "bench": "startup",
            "params": {"files": 60, "tasks": 3, "started": 1, "runs": K, "quick": a.quick},
            "machine": b.machine(),
            "targets": {
                "excess_over_python_ms": TARGET_EXCESS_S * 1000,
                "excess_met": verdicts,
                "excess_all_met": all(verdicts.values()),
                "accept_git_processes": TARGET_ACCEPT_GIT,
                "accept_git_met": accept_ok,
            },
            "results": results,
            "git_processes": counted,
            "measure_s": round(measure_s, 1),
            "total_s": b.total_s(),
        }
        write_json(a.out, doc)
        print(table)
        print(f"\nfixed cost: {n_met} of {len(verdicts)} commands within 100 ms of the bare "
              f"interpreter ({bm * 1000:.0f} ms wall, {bc * 1000:.0f} ms cpu): target "
              f"{verdict(all(verdicts.values()))}")
        print(f"\n{gtable}")
        print(f"\ncoord accept starts {accept_n} git processes ({ranges_n} with range grants): "
              f"target <= {TARGET_ACCEPT_GIT} {verdict(accept_ok)}")
        print(load_line(doc["machine"]) + f"; {K} runs; git lists in "
              "bench/results/profile_startup_*_git.txt")
        b.finish(a.out, doc, home=True)
        return 0


if __name__ == "__main__":
    sys.exit(main())
