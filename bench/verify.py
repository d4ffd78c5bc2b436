"""`coord verify` overhead on a 10,000-file repo against `git worktree add` + `remove`.

    .venv/bin/python bench/verify.py [--quick] [--files N] [--dirty N] [--runs K] [--profile] [--keep]

The repo: N text files of 40 lines (default 10,000, in 50 directories) and a tracked
`coord.toml` with `[verify] commands = ["true"]`, so what is timed is verify's own overhead:
read the freeze, make a clean detached worktree of the frozen commit, run `true` in it,
remove the worktree, then fingerprint the working tree and index again (snapshot through a
throwaway index, `ls-files -s`) and save the verification record. `--dirty` files (default
20) carry uncommitted edits when `coord freeze` runs, as a frozen shared tree usually does;
they stay as they are, so every verify must pass (exit 0, `ok`, HEAD and fingerprint
unchanged). Verify changes nothing that a later verify depends on, so the runs repeat on
the same frozen state.

The floor: `git worktree add --detach <tmp> HEAD` then `git worktree remove <tmp>` of the same
commit, two processes. Plain `remove` first checks that the checkout is clean, which on a
fresh checkout re-hashes every racily clean file; verify removes with `--force` and skips
that, so a strict floor (`remove --force`) is measured too. Each row is a fresh checkout of
all N files, so the default is 5 runs. Results: bench/results/verify.json and a table on stdout.
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
    Step,
    Timing,
    aim_line,
    commit_all,
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
    verdict,
    vs_floor,
    write_json,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def dirty(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--dirty", type=int, default=20,
                        help="files with uncommitted edits at the freeze (default 20)")

    return parse_bench_args(argv, __doc__, "verify.json", files=(10000, 2000), runs=(5, 3),
                            before_runs=dirty, profile_help="also cProfile one coord verify")


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    K = a.runs
    with Bench(keep=a.keep) as b:
        sb = b.sb
        setup: dict[str, float] = {}
        log(f"repo: {sb.repo} ({a.files} files, {a.dirty} dirty, {K} runs)")
        t0 = time.perf_counter()
        layout = generate_repo(sb, a.files, 50)
        (sb.repo / "coord.toml").write_text('[verify]\ncommands = ["true"]\n')
        commit_all(sb, "generated")
        setup["repo_s"] = time.perf_counter() - t0
        paths = sorted(p for ps in layout.values() for p in ps)
        for p in paths[:: max(1, len(paths) // max(1, a.dirty))][: a.dirty]:
            edit_lines(sb.repo / p, (5, 30), "deferred work")
        dirty = [x for x in git(sb, "status", "--porcelain").decode().splitlines() if x]
        assert len(dirty) == a.dirty, dirty

        run([BIN / "coord", "init", "--json"], sb.repo, sb.env).check()
        head = git(sb, "rev-parse", "HEAD").decode().strip()
        fz = run([BIN / "coord", "freeze", "--json"], sb.repo, sb.env).check().doc
        assert fz["freeze"]["commit"] == head, fz

        STRICT = "floor, strict: remove --force"
        memory: dict[str, list[int]] = {"coord verify": [], "floor": [], STRICT: []}
        floor_parts = {"git worktree add": Timing("add"), "git worktree remove": Timing("remove"),
                       "git worktree remove --force": Timing("remove --force")}

        def verify_once(i: int) -> tuple[float, float]:
            r = run_ru([BIN / "coord", "verify", "--json"], sb.repo, sb.env).check()
            doc = r.doc
            assert doc["ok"] and doc["commit"] == head and not doc["problems"], doc
            assert [c["command"] for c in doc["commands"]] == ["true"], doc["commands"]
            assert doc["commands"][0]["exit_code"] == 0
            if i >= 0:
                memory["coord verify"].append(r.maxrss_kb)
            return r.seconds, r.cpu

        def floor_once(force: bool):
            def once(i: int) -> tuple[float, float]:
                parent = Path(tempfile.mkdtemp(prefix="floor-wt-", dir=sb.root))
                where = parent / "tree"
                t0 = time.perf_counter()
                add = run_ru(["git", "worktree", "add", "--detach", where, "HEAD"], sb.repo, sb.env).check()
                assert (where / "coord.toml").exists()
                rm = run_ru(["git", "worktree", "remove", *(["--force"] if force else []), where],
                            sb.repo, sb.env).check()
                wall = time.perf_counter() - t0
                assert not where.exists()
                shutil.rmtree(parent)
                if i >= 0:
                    memory[STRICT if force else "floor"].append(max(add.maxrss_kb, rm.maxrss_kb))
                    floor_parts["git worktree add"].add((add.seconds, add.cpu))
                    floor_parts["git worktree remove --force" if force else "git worktree remove"].add(
                        (rm.seconds, rm.cpu))
                return wall, add.cpu + rm.cpu
            return once

        steps = [
            Step("floor", floor_once(False), note="git worktree add --detach TMP HEAD; git worktree remove TMP"),
            Step(STRICT, floor_once(True),
                 note="the same with remove --force, as verify does: no clean-check of the "
                      "fresh checkout (which re-hashes its racily clean files)"),
            Step("coord verify", verify_once, note='[verify] commands = ["true"]'),
            Step("git status --porcelain", ru_step(sb, ["git", "status", "--porcelain"])),
            Step("python -c pass", ru_step(sb, [PYTHON, "-c", "pass"])),
        ]
        t0 = time.perf_counter()
        timings = interleave(steps, K, warmup=1, log=log)
        setup["measure_s"] = time.perf_counter() - t0
        # Nothing leaked: no worktree left registered, the tree as frozen.
        wts = git(sb, "worktree", "list", "--porcelain").decode().count("worktree ")
        assert wts == 1, git(sb, "worktree", "list").decode()
        assert len([x for x in git(sb, "status", "--porcelain").decode().splitlines() if x]) == a.dirty

        if a.profile:
            cprofile_cli("verify", ["coord", "verify", "--json"], sb.repo, sb)
            git_trace("verify", [BIN / "coord", "verify", "--json"], sb.repo, sb)

        floor = timings["floor"]
        fm = floor.median
        timings.update(floor_parts)
        order = ["floor", STRICT, "coord verify", "git worktree add", "git worktree remove",
                 "git worktree remove --force", "git status --porcelain", "python -c pass"]
        rows = []
        for n in order:
            rows.append([n, *vs_floor(timings[n], floor), mib(memory.get(n, []))])
        table = print_table(rows, ["command", "median s", "x floor", "cpu s", "cpu x floor", "peak MiB"])
        v = timings["coord verify"]
        doc: dict[str, Any] = {
            "bench": "verify",
            "params": {"files": a.files, "dirty_files": a.dirty, "lines_per_file": 40, "runs": K,
                       "verify_commands": ["true"], "quick": a.quick},
            "machine": b.machine(),
            "setup": {k: round(x, 3) for k, x in setup.items()},
            "floor": floor.as_json(fm),
            "results": {n: timings[n].as_json(fm) for n in order},
            "peak_rss_kib": memory,
            **floor_ratios(v, floor),
            "ratio_to_strict_floor": round(v.median / timings[STRICT].median, 2),
            "cpu_ratio_to_strict_floor": round(v.cpu_median / timings[STRICT].cpu_median, 2),
            "aim": "within 1.5x of the floor",
            "aim_met": v.median / fm <= 1.5,
            "aim_met_against_strict_floor": v.median / timings[STRICT].median <= 1.5,
            "total_s": b.total_s(),
        }
        write_json(a.out, doc)
        print(table)
        print(aim_line("coord verify", v, floor, 1.5, doc["aim_met"]))
        st = timings[STRICT]
        print(f"  against the strict floor (remove --force): {v.median / st.median:.2f}x "
              f"({v.cpu_median / st.cpu_median:.2f}x in CPU); aim "
              f"{verdict(doc['aim_met_against_strict_floor'])}")
        print(f"peak RSS: coord verify {mib(memory['coord verify'])} MiB, "
              f"floor {mib(memory['floor'])} MiB (largest single process)")
        print(f"tree: {a.files} files, {a.dirty} with uncommitted edits at the freeze; {K} runs")
        print(load_line(doc["machine"]))
        b.finish(a.out, doc)
        return 0


if __name__ == "__main__":
    sys.exit(main())
