"""The core loop at scale: `worker done`, `coord next`, `coord status` against plain git.

    .venv/bin/python bench/core_loop.py [--files N] [--runs K] [--quick] [--profile] [--keep]

Builds a throwaway repository (10,000 text files of ~40 lines in nested directories, one
commit), 50 active tasks each granted one directory by glob and started, K+1 tasks holding a
200-hunk change and the others a few hunks, an inbox of 500 pending reports; then takes the
median wall time of each command over K runs, and of `git status --porcelain` + `git diff
-U0` on the same tree (the floor: what any tool must at least pay to see the changes).
Results: bench/results/core_loop.json and a table on stdout. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BIN,
    PYTHON,
    RESULTS,
    ROOT,
    Bench,
    Sandbox,
    Step,
    Timing,
    commit_all,
    coord,
    count_hunks,
    dir_of,
    edit_lines,
    generate_repo,
    git,
    interleave,
    load_line,
    log,
    parse_bench_args,
    print_table,
    rel,
    run,
    spread,
    timed,
    vs_floor,
    wall_cpu,
    worker,
    write_json,
)

SMALL_FILES = 3       # files a small task changes
SMALL_LINES = (8, 24)  # lines it changes in each: 6 hunks a small task


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    def scene(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--tasks", type=int, default=50, help="active tasks (default 50)")
        ap.add_argument("--hunks", type=int, default=200, help="hunks in each big change (default 200)")
        ap.add_argument("--pending", type=int, default=500, help="pending reports (default 500)")
        ap.add_argument("--few-pending", type=int, default=50,
                        help="pending reports for the inbox-scaling comparison (default 50)")
        ap.add_argument("--claim-pairs", type=int, default=15,
                        help="paired coord next runs, many vs few pending (default 15, at least --runs)")

    def check(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
        big_needed = a.runs + 2
        if a.tasks < big_needed + 2:
            ap.error(f"--tasks {a.tasks} is too few for {big_needed} big tasks and 2 small ones")
        if a.files < a.tasks * 10:
            ap.error("--files must give every task directory at least 10 files")
        if a.few_pending >= a.pending:
            ap.error("--few-pending must be below --pending")

    return parse_bench_args(
        argv, __doc__, "core_loop.json", files=(10000, 2000), runs=(7, 3), raw=True,
        files_help="files in the repo (default 10000)",
        runs_help="timed runs per command (default 7)",
        quick_help="2,000 files and 3 runs, for iterating on the bench itself",
        after_quick=scene,
        profile_help="also cProfile next/status/done and -X importtime, into bench/results/",
        keep_help="keep the temporary repo and print its path", check=check)


class Inbox:
    """Direct access to the inbox folders, only to set up and restore state between runs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def names(self, folder: str) -> set[str]:
        try:
            return {n for n in os.listdir(self.root / folder) if not n.startswith(".")}
        except FileNotFoundError:
            return set()

    def restore(self, baseline: set[str]) -> int:
        """Move every baseline report the last command archived back from cur/ to new/:
        a rename, untimed, so each run starts from the same inbox (os.rename keeps mtimes)."""
        moved = 0
        for n in baseline - self.names("new"):
            src = self.root / "cur" / n
            if src.exists():
                os.rename(src, self.root / "new" / n)
                moved += 1
        if self.names("quarantine"):
            raise RuntimeError(f"reports were quarantined: {sorted(self.names('quarantine'))[:3]}")
        missing = baseline - self.names("new")
        if missing:
            raise RuntimeError(f"{len(missing)} pending report(s) vanished from the inbox")
        return moved


def fill_inbox(inbox_dir: Path, template: bytes, task_ids: list[str], count: int) -> list[str]:
    """Deliver `count` valid reports, cloned from a real one, through the product's own
    `inbox.deliver` (so names follow inbox/maildir.py) and check that each one parses."""
    sys.path.insert(0, str(ROOT))
    from hunkwise import inbox  # the product's package: deliver writes tmp/, fsyncs, links into new/

    base = json.loads(template)
    names: list[str] = []
    revs: dict[str, int] = {}
    for i in range(count):
        tid = task_ids[i % len(task_ids)]
        rev = revs[tid] = revs.get(tid, 1) + 1
        doc = dict(base, task_id=tid, revision=rev, report_id=f"rep-{tid}-r{rev}-bench{i:04d}",
                   summary=f"filler report {i} for the inbox-scaling bench")
        path = inbox.write_report(inbox_dir, json.dumps(doc).encode(), tid, rev)
        report = inbox.read_report(path)  # strict schema: fails loudly if the clone is wrong
        entry = inbox.maildir._entry(path, "new")
        assert entry is not None and entry.task_id == tid and entry.revision == rev, path.name
        assert report.task_id == tid and report.revision == rev
        names.append(path.name)
    # Revisions come from the state (a report whose revision it never handed out is
    # quarantined as forged): hand out the fillers' revisions as `worker done` does.
    from hunkwise.shared.state import store

    last = {}
    for name in names:
        entry = inbox.maildir._entry(inbox_dir / "new" / name, "new")
        assert entry is not None
        if entry.revision == revs[entry.task_id]:
            last[entry.task_id] = name
    with store.transaction(store.Layout(repo=inbox_dir.parent, root=inbox_dir.parent)) as state:
        for tid, rev in revs.items():
            state.tasks[tid].revision = max(state.tasks[tid].revision, rev)
            state.tasks[tid].last_report = last[tid]
    return names


def listing_cost(inbox_root: Path, reps: int = 20) -> float:
    """Best-of-`reps` seconds of the product's `inbox.entries` on new/: the one step of
    `coord next` whose work grows with the number of pending reports."""
    from hunkwise import inbox as product_inbox

    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        product_inbox.entries(inbox_root, "new")
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    K = a.runs
    with Bench(keep=a.keep) as b:
        sb = b.sb
        setup: dict[str, Any] = {}
        checks: dict[str, Any] = {}
        log(f"repo: {sb.repo} ({a.files} files, {a.tasks} tasks, {K} runs)")

        # ---- the repository --------------------------------------------------------------
        layout, setup["write_files_s"] = timed("write files", lambda: generate_repo(sb, a.files, a.tasks))
        _, setup["git_add_commit_s"] = timed("git add -A + commit", lambda: commit_all(sb, "generated"))

        # ---- 50 tasks, assigned and started ------------------------------------------------
        init = coord(sb, "init").check()
        inbox = Inbox(Path(init.doc["inbox"]))
        tids: list[str] = []
        assign_s: list[float] = []
        assign_cpu: list[float] = []
        t0 = time.perf_counter()
        for d in range(a.tasks):
            r = coord(sb, "assign", "--title", f"bench change in {dir_of(d)}",
                      "--expect", "the module prints its edited lines",
                      "--write", f"{dir_of(d)}/**").check()
            tids.append(r.doc["task"]["id"])
            assign_s.append(r.seconds)
            assign_cpu.append(r.cpu)
        setup["assign_total_s"] = round(time.perf_counter() - t0, 3)
        setup["assign_first_s"] = round(assign_s[0], 3)
        setup["assign_last_s"] = round(assign_s[-1], 3)
        # CPU of the first and last three assigns: the growth with the number of tasks,
        # unblurred by the machine's load.
        setup["assign_cpu_first3_s"] = [round(x, 3) for x in assign_cpu[:3]]
        setup["assign_cpu_last3_s"] = [round(x, 3) for x in assign_cpu[-3:]]
        log(f"  coord assign x{a.tasks}: {setup['assign_total_s']:.2f}s "
            f"(first {assign_s[0]:.2f}s, last {assign_s[-1]:.2f}s wall; "
            f"cpu {assign_cpu[0]:.2f}s -> {assign_cpu[-1]:.2f}s)")
        start_s: list[float] = []
        start_cpu: list[float] = []
        t0 = time.perf_counter()
        for tid in tids:
            r = worker(sb, "start", tid).check()
            start_s.append(r.seconds)
            start_cpu.append(r.cpu)
        setup["start_total_s"] = round(time.perf_counter() - t0, 3)
        setup["start_median_s"] = round(sorted(start_s)[len(start_s) // 2], 3)
        setup["start_cpu_median_s"] = round(sorted(start_cpu)[len(start_cpu) // 2], 3)
        log(f"  worker start x{a.tasks}: {setup['start_total_s']:.2f}s")

        # ---- the changes in the shared tree -------------------------------------------------
        # big[0]: its report heads the inbox (what `coord next` validates); big[1..K]: one
        # `worker done` each; big[K+1]: spare, for --profile (always made, so that the tree
        # is the same with and without --profile). The rest hold small changes.
        n_big = K + 2
        big, small = list(range(n_big)), list(range(n_big, a.tasks))
        for d in big:
            files = layout[d][:: max(1, len(layout[d]) // 50)][:50]
            files = files[: -(-a.hunks // len(spread(a.hunks, len(files), 40)))]
            lines = spread(a.hunks, len(files), 40)
            left = a.hunks
            for path in files:
                edit_lines(sb.repo / path, lines[:left], f"big {d}")
                left -= len(lines[:left])
            assert left == 0
        for d in small:
            for path in layout[d][:SMALL_FILES]:
                edit_lines(sb.repo / path, SMALL_LINES, f"small {d}")
        expected_hunks = n_big * a.hunks + len(small) * SMALL_FILES * len(SMALL_LINES)
        diff = git(sb, "diff", "-U0")
        changed = git(sb, "diff", "--name-only").split(b"\n")
        checks["tree_hunks"] = count_hunks(diff)
        checks["tree_changed_files"] = len([p for p in changed if p])
        assert checks["tree_hunks"] == expected_hunks, (checks["tree_hunks"], expected_hunks)
        log(f"  tree: {checks['tree_changed_files']} changed files, {checks['tree_hunks']} hunks")

        # ---- the report at the head of the inbox, and a real small one as a template --------
        head_task = tids[big[0]]
        r = worker(sb, "done", head_task, "--no-run-checks").check()
        assert r.doc["report"]["hunks"] == a.hunks, r.doc["report"]
        tmpl_task = tids[small[-1]]
        r = worker(sb, "done", tmpl_task, "--no-run-checks").check()
        template = Path(r.doc["report"]["file"]).read_bytes()

        # ---- the inbox: `pending` reports, the 200-hunk one oldest -------------------------
        # The timed `worker done` runs deliver too; each of their reports is moved on to cur/
        # (untimed), so exactly `pending` (or `few_pending`) reports wait in every round.
        done_tasks = [tids[d] for d in big[1:K + 1]]
        have = len(inbox.names("new"))
        n_fill = a.pending - have
        fillers, setup["fill_inbox_s"] = timed(
            f"deliver {n_fill} reports",
            lambda: fill_inbox(inbox.root, template, [tids[d] for d in small], n_fill))
        # Few pending: the newest fillers sit in cur/ (read history) instead of new/.
        to_history = fillers[len(fillers) - (a.pending - a.few_pending):]
        mode = {"now": "many"}

        def inbox_mode(want: str) -> Callable[[], None]:
            def switch() -> None:
                if mode["now"] == want:
                    return
                src, dst = ("new", "cur") if want == "few" else ("cur", "new")
                for n in to_history:
                    os.rename(inbox.root / src / n, inbox.root / dst / n)
                mode["now"] = want
            return switch

        # What new/ holds in each mode, taken once `done_tasks` delivered nothing yet: every
        # coord step is given it back afterwards (coord next archives the report it reads,
        # coord inbox the superseded revisions).
        many, few = inbox_mode("many"), inbox_mode("few")
        few()
        baseline = {"few": inbox.names("new")}
        many()
        baseline["many"] = inbox.names("new")
        assert len(baseline["many"]) == a.pending and len(baseline["few"]) == a.few_pending

        def restore(which: str) -> Callable[[], None]:
            return lambda: inbox.restore(baseline[which])

        # ---- the timed commands, interleaved round by round --------------------------------
        def done_once(i: int) -> float:
            # `done` moves a task to `reported`, and only `worker start` on an assigned or
            # changes_requested task brings it back: one fresh in_progress task a run times
            # the very same work each time, with no reset in between.
            res = worker(sb, "done", done_tasks[i], "--no-run-checks").check()
            assert res.doc["report"]["hunks"] == a.hunks, res.doc["report"]
            delivered = Path(res.doc["report"]["file"])
            os.rename(delivered, inbox.root / "cur" / delivered.name)
            return res.seconds, res.cpu

        def coord_once(cmd: str, few: bool) -> Callable[[int], float]:
            def once(i: int) -> float:
                expect = a.few_pending if few else a.pending
                assert len(inbox.names("new")) == expect
                res = coord(sb, cmd).check()
                doc = res.doc
                if cmd == "next":
                    nxt = doc["next"]
                    assert nxt["report"]["task_id"] == head_task, nxt["report"]["task_id"]
                    assert nxt["validation"]["ok"], nxt["validation"]
                    assert doc["pending"] == expect - 1, (doc["pending"], expect)
                    assert sum(len(c["hunks"]) for c in nxt["report"]["changes"]) == a.hunks
                elif cmd == "status":
                    assert doc["inbox"]["pending"] == expect, doc["inbox"]
                    assert not doc["unowned"] and not doc["conflicts"], "unexpected findings"
                    assert len(doc["tasks"]) == a.tasks
                elif cmd == "inbox":
                    assert doc["reports"], "empty inbox"
                return res.seconds, res.cpu
            return once

        floor_parts = {n: Timing(n) for n in ("git status --porcelain", "git diff -U0")}

        def floor_once(i: int) -> tuple[float, float]:
            s_ = run(["git", "status", "--porcelain"], sb.repo, sb.env).check()
            d_ = run(["git", "diff", "-U0"], sb.repo, sb.env).check()
            assert count_hunks(d_.stdout) == expected_hunks
            if i >= 0:
                floor_parts["git status --porcelain"].add((s_.seconds, s_.cpu))
                floor_parts["git diff -U0"].add((d_.seconds, d_.cpu))
            return s_.seconds + d_.seconds, s_.cpu + d_.cpu

        P, F = a.pending, a.few_pending
        steps = [
            Step("floor", floor_once, note="git status --porcelain + git diff -U0"),
            Step("worker done", done_once, warm=False,
                 note=f"{a.hunks}-hunk task, --no-run-checks, a fresh in_progress task each run"),
            Step("coord next", coord_once("next", False), many, restore("many"),
                 note=f"validates the {a.hunks}-hunk report at the head; {P} pending"),
            Step("coord status", coord_once("status", False), many, restore("many"),
                 note=f"{a.tasks} tasks, {P} pending"),
            Step(f"coord inbox ({P} pending)", coord_once("inbox", False), many, restore("many"),
                 note="reads the newest revision of each task; archives superseded ones (restored)"),
            Step(f"coord next ({F} pending)", coord_once("next", True), few, restore("few"),
                 note=f"{P - F} reports moved to cur/ (read history)"),
            Step(f"coord inbox ({F} pending)", coord_once("inbox", True), few, restore("few")),
            Step("python -c pass",
                 lambda i: wall_cpu(run([PYTHON, "-c", "pass"], sb.repo, sb.env).check())),
            Step("coord --help",
                 lambda i: wall_cpu(run([BIN / "coord", "--help"], sb.repo, sb.env).check())),
        ]
        t0 = time.perf_counter()
        timings = interleave(steps, K, warmup=1, log=log)
        setup["measure_s"] = round(time.perf_counter() - t0, 1)
        many()
        assert len(inbox.names("new")) == a.pending, len(inbox.names("new"))
        floor = timings.pop("floor")
        timings.update(floor_parts)

        # ---- the inbox-history claim, in pairs --------------------------------------------
        # One `coord next` with many pending, one with few, back to back (which goes first
        # alternates): each pair's difference cancels the machine's drifting load, which
        # separately taken medians of a busy machine do not.
        pairs = max(K, a.claim_pairs)
        paired = {"many": Timing("many"), "few": Timing("few")}
        runners = {"many": (many, coord_once("next", False)), "few": (few, coord_once("next", True))}
        t0 = time.perf_counter()
        for i in range(pairs):
            for which in (("many", "few") if i % 2 == 0 else ("few", "many")):
                switch, once = runners[which]
                switch()
                paired[which].add(once(i))
                restore(which)()
        many()
        setup["claim_pairs_s"] = round(time.perf_counter() - t0, 1)
        listing_ms = {}
        for which, switch in (("many", many), ("few", few)):
            switch()
            listing_ms[which] = round(listing_cost(inbox.root) * 1000, 3)
        many()

        if a.profile:
            profile(sb, inbox, pending=inbox.names("new"), done_task=tids[big[-1]])

        # ---- report ---------------------------------------------------------------------------
        fm, fc = floor.median, floor.cpu_median
        order = ["worker done", "coord next", "coord status",
                 f"coord inbox ({a.pending} pending)",
                 f"coord next ({a.few_pending} pending)", f"coord inbox ({a.few_pending} pending)",
                 "git status --porcelain", "git diff -U0", "python -c pass", "coord --help"]
        rows = [["floor: git status + git diff -U0", f"{fm:.3f}", "1.00", f"{fc:.3f}", "1.00"]]
        rows += [[n if n != "coord next" else f"coord next ({a.pending} pending)",
                  *vs_floor(timings[n], floor)] for n in order]
        table = print_table(rows, ["command", "median s", "x floor", "cpu s", "cpu x floor"])
        claim: dict[str, Any] = {
            "pending_many": a.pending, "pending_few": a.few_pending, "pairs": pairs,
            "rule": "holds when the median paired difference (many - few) is at most "
                    "max(20 ms, 10% of the few-pending median), for wall and for cpu time",
            "inbox_listing_ms": listing_ms}
        verdicts = []
        for kind in ("wall", "cpu"):
            m_s = paired["many"].samples if kind == "wall" else paired["many"].cpu_samples
            f_s = paired["few"].samples if kind == "wall" else paired["few"].cpu_samples
            diff_med = statistics.median(x - y for x, y in zip(m_s, f_s))
            m, f = statistics.median(m_s), statistics.median(f_s)
            ok = diff_med <= max(0.020, 0.10 * f)
            claim[kind] = {"many_median_s": round(m, 4), "few_median_s": round(f, 4),
                           "paired_diff_median_s": round(diff_med, 4), "holds": ok,
                           "many_samples_s": [round(x, 4) for x in m_s],
                           "few_samples_s": [round(x, 4) for x in f_s]}
            verdicts.append(f"{kind} {m:.3f}s vs {f:.3f}s, median paired difference "
                            f"{diff_med * 1000:+.0f} ms ({'holds' if ok else 'does NOT hold'})")
        claim["holds"] = all(claim[k]["holds"] for k in ("wall", "cpu"))
        mach = b.machine(product=False)
        doc: dict[str, Any] = {
            "bench": "core_loop",
            "params": {"files": a.files, "lines_per_file": 40, "tasks": a.tasks, "runs": K,
                       "hunks_per_big_task": a.hunks, "big_tasks": n_big,
                       "small_task_hunks": SMALL_FILES * len(SMALL_LINES),
                       "pending": a.pending, "few_pending": a.few_pending, "quick": a.quick},
            "machine": mach,
            "tree": checks,
            "setup": {k: round(v, 3) if isinstance(v, float) else v for k, v in setup.items()},
            "floor": floor.as_json(fm),
            "results": {n: timings[n].as_json(fm) for n in order},
            "claim_next_independent_of_inbox": claim,
            "total_s": b.total_s(),
        }
        write_json(a.out, doc)
        print(table)
        print(f"\ncoord next, {a.pending} vs {a.few_pending} pending, {pairs} pairs: "
              + "; ".join(verdicts))
        print(f"  listing the inbox (the only per-report work of coord next): "
              f"{listing_ms['many']:.2f} ms vs {listing_ms['few']:.2f} ms; "
              f"claim {'holds' if claim['holds'] else 'does NOT hold'}")
        print(load_line(mach))
        print(f"tree: {a.files} files, {checks['tree_changed_files']} changed, "
              f"{checks['tree_hunks']} hunks; {a.tasks} tasks; {K} runs; "
              f"coord assign cpu {assign_cpu[0]:.2f}s (1st task) -> {assign_cpu[-1]:.2f}s ({a.tasks}th)")
        b.finish(a.out, doc, home=True)
        return 0


def profile(sb: Sandbox, inbox: Inbox, pending: set[str], done_task: str) -> None:
    """cProfile `coord next`, `coord status` and `worker done` as run here, and -X importtime
    for `coord next`; top entries into bench/results/profile_*.txt."""
    import pstats

    RESULTS.mkdir(parents=True, exist_ok=True)
    jobs = [("coord_next", [BIN / "coord", "next", "--json"]),
            ("coord_status", [BIN / "coord", "status", "--json"]),
            ("worker_done", [BIN / "worker", "done", done_task, "--no-run-checks", "--json"])]
    for name, argv in jobs:
        raw = sb.root / f"{name}.prof"
        run([PYTHON, "-m", "cProfile", "-o", raw, *argv], sb.repo, sb.env).check()
        inbox.restore(pending)
        out = RESULTS / f"profile_{name}.txt"
        with open(out, "w") as f:
            st = pstats.Stats(str(raw), stream=f)
            st.strip_dirs().sort_stats("cumulative").print_stats(30)
            st.sort_stats("tottime").print_stats(15)
        log(f"  profile: {rel(out)}")
    r = run([PYTHON, "-X", "importtime", BIN / "coord", "next", "--json"], sb.repo, sb.env).check()
    inbox.restore(pending)
    rows = []
    for line in r.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            parts = line.split("|")
            rows.append((int(parts[1].strip()), parts[2].rstrip()))
    rows.sort(reverse=True)
    out = RESULTS / "profile_coord_next_importtime.txt"
    out.write_text("cumulative import time (us) of `coord next`, top 40\n" +
                   "\n".join(f"{us:>9}  {mod}" for us, mod in rows[:40]) + "\n")
    log(f"  profile: {rel(out)}")


if __name__ == "__main__":
    sys.exit(main())
