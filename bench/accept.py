"""`coord accept` of a 1,000-hunk task out of a tree that also holds another task's 1,000 hunks
in the very same files, against plain git doing the same unavoidable work.

    .venv/bin/python bench/accept.py [--quick] [--files N] [--extra-files N] [--runs K] [--profile] [--keep]

The repo: N text files of 40 lines (default 500) plus optional untouched files. Task A holds
the range grant `PATH:1-20` of every changed file and edits lines 2 and 10 of each; task B
holds `PATH:21-40` and edits lines 25 and 35: 2N hunks each, never adjacent, in the same N
files. Both are started and have reported (`worker done`). The repository is then repacked
and its whole `.git` (objects, refs, index, hunkwise state and inbox) is saved; before every
timed run it is put back, so each `coord accept A` starts from the identical state and does
all of its work (it writes its blobs, trees and commit afresh). The working tree itself is
never touched by accept, so it is not copied and git's stat cache stays valid.

The floor, on the same state: copy the index, `git add -A` into the copy (GIT_INDEX_FILE),
`git write-tree`, `git diff -U0 HEAD <tree>`, `git hash-object -w --stdin-paths` of the N new
blobs (HEAD + A's edits, prepared untimed), `git commit-tree`. A second, informational row
also builds the commit's real tree (read-tree HEAD, update-index --index-info, write-tree)
and commits that one. Results: bench/results/accept.json and a table on stdout.
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
    PYTHON,
    Bench,
    Restorer,
    Step,
    Timing,
    aim_line,
    commit_all,
    count_hunks,
    cprofile_cli,
    edit_lines,
    floor_ratios,
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
    vs_floor,
    write_json,
)

A_LINES, A_RANGE = (2, 10), (1, 20)
B_LINES, B_RANGE = (25, 35), (21, 40)
TAG_A, TAG_B = "task A", "task B"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def extra_files(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--extra-files", type=int, default=0,
                        help="untouched files in the repo too (default 0)")

    return parse_bench_args(
        argv, __doc__, "accept.json", files=(500, 100), runs=(7, 3),
        files_help="files both tasks change (default 500: 1,000 hunks a task; quick 100)",
        before_runs=extra_files, profile_help="also cProfile one coord accept")


def added_lines(patch: bytes) -> list[bytes]:
    return [ln for ln in patch.split(b"\n") if ln.startswith(b"+") and not ln.startswith(b"+++")]


def a_only(data: bytes) -> bytes:
    """The file as HEAD + A's edits only (what edit_lines does, in memory)."""
    rows = data.split(b"\n")
    for n in A_LINES:
        rows[n - 1] = rows[n - 1] + f"  # edited: {TAG_A}".encode()
    return b"\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    K, N = a.runs, a.files
    with Bench(keep=a.keep) as b:
        sb = b.sb
        setup: dict[str, float] = {}
        total = N + a.extra_files
        log(f"repo: {sb.repo} ({total} files, {N} changed by both tasks, {K} runs)")
        t0 = time.perf_counter()
        layout = generate_repo(sb, total, max(5, total // 200))
        paths = sorted(p for ps in layout.values() for p in ps)
        changed = paths[:: max(1, len(paths) // N)][:N]
        assert len(changed) == N
        commit_all(sb, "generated")
        setup["repo_s"] = time.perf_counter() - t0

        # ---- two tasks on disjoint line ranges of the same files -----------------------
        t0 = time.perf_counter()
        run([BIN / "coord", "init", "--json"], sb.repo, sb.env).check()
        for tid, (lo, hi) in (("A", A_RANGE), ("B", B_RANGE)):
            grants = [x for p in changed for x in ("--write", f"{p}:{lo}-{hi}")]
            run([BIN / "coord", "assign", tid, "--title", f"bench task {tid}",
                 "--expect", f"{tid}'s lines are edited", *grants, "--json"], sb.repo, sb.env).check()
            run([BIN / "worker", "start", tid, "--json"], sb.repo, sb.env).check()
        setup["assign_start_s"] = time.perf_counter() - t0

        floor_dir = sb.root / "floor-blobs"  # HEAD + A's edits: the blobs the commit needs
        floor_dir.mkdir()
        blob_list = []
        for i, p in enumerate(changed):
            f = sb.repo / p
            (floor_dir / str(i)).write_bytes(a_only(f.read_bytes()))
            blob_list.append(str(floor_dir / str(i)))
            edit_lines(f, A_LINES, TAG_A)
            edit_lines(f, B_LINES, TAG_B)
        stdin_paths = ("\n".join(blob_list) + "\n").encode()
        tree_hunks = count_hunks(git(sb, "diff", "-U0"))
        assert tree_hunks == 4 * N, tree_hunks

        t0 = time.perf_counter()
        for tid in ("A", "B"):
            r = run([BIN / "worker", "done", tid, "--no-run-checks", "--json"], sb.repo, sb.env).check()
            assert r.doc["report"]["hunks"] == 2 * N, r.doc["report"]
            assert r.doc["report"]["changes"] == N, r.doc["report"]
        setup["worker_done_both_s"] = time.perf_counter() - t0
        git(sb, "repack", "-a", "-d", "-q")
        head = git(sb, "rev-parse", "HEAD").decode().strip()
        saved = Restorer(sb.repo / ".git", sb.root / "git-saved")
        setup["git_dir_bytes"] = sum(f.stat().st_size for f in saved.store.rglob("*") if f.is_file())

        # ---- the expected tree: HEAD + exactly A's edits (built here, then restored away) -----
        idx = sb.root / "expect.index"
        e = dict(sb.env, GIT_INDEX_FILE=str(idx))
        run(["git", "read-tree", head], sb.repo, e).check()
        oids = run(["git", "hash-object", "-w", "--no-filters", "--stdin-paths"], sb.repo, e,
                   input=stdin_paths).check().stdout.decode().split()
        info = b"".join(f"100644 {o}\t{p}\0".encode() for o, p in zip(oids, changed))
        run(["git", "update-index", "-z", "--index-info"], sb.repo, e, input=info).check()
        expected_tree = run(["git", "write-tree"], sb.repo, e).check().stdout.decode().strip()
        idx.unlink()

        # ---- the timed commands -------------------------------------------------------------
        restore_s: list[float] = []
        commits: set[str] = set()
        floor_parts: dict[str, Timing] = {}
        memory: dict[str, list[int]] = {"coord accept A": [], "floor": [], "floor + commit's tree": []}

        def restore() -> None:
            restore_s.append(saved.restore())

        def accept_once(i: int) -> tuple[float, float]:
            r = run_ru([BIN / "coord", "accept", "A", "--json"], sb.repo, sb.env).check()
            doc = r.doc
            # The result, checked every run (untimed): the commit holds exactly A's hunks.
            new_head = git(sb, "rev-parse", "HEAD").decode().strip()
            assert doc["commit"] == new_head and doc["task"] == "A", doc
            assert len(doc["paths"]) == N and set(doc["paths"]) == set(changed)
            assert git(sb, "rev-parse", "HEAD^{tree}").decode().strip() == expected_tree
            assert git(sb, "rev-parse", "HEAD~1").decode().strip() == head
            committed = git(sb, "diff", "-U0", "HEAD~1", "HEAD")
            plus = added_lines(committed)
            assert count_hunks(committed) == 2 * N and len(plus) == 2 * N
            assert all(TAG_A.encode() in ln for ln in plus)
            left = git(sb, "diff", "-U0", "HEAD")
            plus = added_lines(left)
            assert count_hunks(left) == 2 * N and all(TAG_B.encode() in ln for ln in plus)
            assert git(sb, "diff-index", "--cached", "--name-only", "HEAD") == b""
            assert b"Coord-Task: A" in git(sb, "log", "-1", "--format=%B")
            commits.add(new_head)
            if i >= 0:
                memory["coord accept A"].append(r.maxrss_kb)
            return r.seconds, r.cpu

        def floor_once(build_tree: bool, key: str):
            def once(i: int) -> tuple[float, float]:
                tmp = Path(tempfile.mkdtemp(prefix="floor-", dir=sb.repo / ".git"))
                steps: list[Any] = []
                t0 = time.perf_counter()
                shutil.copy2(sb.repo / ".git" / "index", tmp / "index")
                e1 = dict(sb.env, GIT_INDEX_FILE=str(tmp / "index"))
                steps.append(run_ru(["git", "add", "-A"], sb.repo, e1).check())
                w = run_ru(["git", "write-tree"], sb.repo, e1).check()
                steps.append(w)
                snap = w.stdout.decode().strip()
                d = run_ru(["git", "diff", "-U0", head, snap], sb.repo, sb.env).check()
                steps.append(d)
                h = run_ru(["git", "hash-object", "-w", "--stdin-paths"], sb.repo, sb.env,
                           input=stdin_paths).check()
                steps.append(h)
                tree = snap
                if build_tree:
                    e2 = dict(sb.env, GIT_INDEX_FILE=str(tmp / "index2"))
                    steps.append(run_ru(["git", "read-tree", head], sb.repo, e2).check())
                    info = b"".join(f"100644 {o}\t{p}\0".encode()
                                    for o, p in zip(h.stdout.decode().split(), changed))
                    steps.append(run_ru(["git", "update-index", "-z", "--index-info"], sb.repo, e2,
                                        input=info).check())
                    w2 = run_ru(["git", "write-tree"], sb.repo, e2).check()
                    steps.append(w2)
                    tree = w2.stdout.decode().strip()
                c = run_ru(["git", "commit-tree", tree, "-p", head, "-m", "floor"], sb.repo, sb.env).check()
                steps.append(c)
                wall = time.perf_counter() - t0
                shutil.rmtree(tmp)
                assert count_hunks(d.stdout) == 4 * N
                assert h.stdout.decode().split() == oids
                if build_tree:
                    assert tree == expected_tree
                if i >= 0:
                    memory[key].append(max(s.maxrss_kb for s in steps))
                    if not build_tree:
                        for s in steps:
                            floor_parts.setdefault(f"git {s.argv[1]}", Timing(s.argv[1])).add(s.seconds)
                return wall, sum(s.cpu for s in steps)
            return once

        steps = [
            Step("floor", floor_once(False, "floor"), before=restore,
                 note="cp index; add -A; write-tree; diff -U0 HEAD tree; hash-object -w --stdin-paths; commit-tree"),
            Step("coord accept A", accept_once, before=restore,
                 note=f"{2 * N} hunks of A out of {4 * N} in {N} files"),
            Step("floor + commit's tree", floor_once(True, "floor + commit's tree"), before=restore,
                 note="the floor plus read-tree HEAD, update-index --index-info, write-tree"),
            Step("python -c pass", ru_step(sb, [PYTHON, "-c", "pass"])),
        ]
        t0 = time.perf_counter()
        timings = interleave(steps, K, warmup=1, log=log)
        setup["measure_s"] = time.perf_counter() - t0
        assert len(commits) == 1, commits  # pinned dates: every run made the very same commit

        if a.profile:
            restore()
            cprofile_cli("accept", ["coord", "accept", "A", "--json"], sb.repo, sb)
            restore()
            git_trace("accept", [BIN / "coord", "accept", "A", "--json"], sb.repo, sb)

        # ---- report -------------------------------------------------------------------------
        floor: Timing = timings["floor"]
        fm = floor.median
        order = ["floor", "coord accept A", "floor + commit's tree", "python -c pass"]
        rows = []
        for n in order:
            rows.append([n, *vs_floor(timings[n], floor), mib(memory.get(n, []))])
        table = print_table(rows, ["command", "median s", "x floor", "cpu s", "cpu x floor",
                                   "peak MiB"])
        acc = timings["coord accept A"]
        doc: dict[str, Any] = {
            "bench": "accept",
            "params": {"changed_files": N, "extra_files": a.extra_files, "lines_per_file": 40,
                       "hunks_per_task": 2 * N, "runs": K, "quick": a.quick,
                       "task_A": {"grant": f"PATH:{A_RANGE[0]}-{A_RANGE[1]}", "lines": A_LINES},
                       "task_B": {"grant": f"PATH:{B_RANGE[0]}-{B_RANGE[1]}", "lines": B_LINES}},
            "machine": b.machine(),
            "setup": {k: round(v, 3) for k, v in setup.items()},
            "restore_median_s": round(sorted(restore_s)[len(restore_s) // 2], 3),
            "floor": floor.as_json(fm),
            "results": {n: timings[n].as_json(fm) for n in order},
            "floor_parts_median_s": {k: round(t.median, 4) for k, t in floor_parts.items()},
            "peak_rss_kib": {k: v for k, v in memory.items()},
            "peak_rss_note": "largest RSS of one process in the command's tree (the command "
                             "and the git children it waited for), per run, from wait4",
            **floor_ratios(acc, floor),
            "aim": "within 2x of the floor",
            "aim_met": acc.median / fm <= 2.0,
            "checked": "every run: HEAD^{tree} is HEAD + exactly A's edits, HEAD~1..HEAD holds "
                       f"{2 * N} hunks all A's, the tree still holds B's {2 * N} hunks, the index "
                       "equals HEAD, the trailer is present, and all runs made the same commit",
            "total_s": b.total_s(),
        }
        write_json(a.out, doc)
        print(table)
        print(aim_line("coord accept A", acc, floor, 2.0, doc["aim_met"]))
        print("floor parts (medians): " + ", ".join(f"{k} {t.median * 1000:.0f} ms"
                                                     for k, t in floor_parts.items()))
        print(f"peak RSS: coord accept {mib(memory['coord accept A'])} MiB, "
              f"floor {mib(memory['floor'])} MiB (largest single process)")
        print(f"tree: {total} files, {N} changed, {4 * N} hunks ({2 * N} A, {2 * N} B); {K} runs; "
              f"state restored before each run in {doc['restore_median_s'] * 1000:.0f} ms (untimed)")
        print(load_line(doc["machine"]))
        b.finish(a.out, doc)
        return 0


if __name__ == "__main__":
    sys.exit(main())
