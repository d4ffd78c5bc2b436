"""State that stays small: the hot commands with a small history and with a large one.

    .venv/bin/python bench/history.py [--runs K] [--quick] [--keep]

One small repository, one scene, two copies that differ only in their history:
- **small**: 20 finished tasks, 20 delivered signals and 20 read reports;
- **large**: 20,000 finished tasks, 10,000 delivered signals and 5,000 read reports.

The history is made as the product makes it. Two batches run for real in-process (assign,
start, edit, done, next, accept; a signal sent and acknowledged; freeze and thaw, which moves
finished tasks and delivered signals into `archive.jsonl`). Those archived records and read
reports are then replicated with new ids: the records through `store.archive` (the writer
`coord thaw` uses), the reports into `inbox/old/` (where a thaw moves the read reports of
the tasks it archives) under names that follow inbox/maildir.py.
The scene on top, the same on both sides, is batch 3: task A in progress with a one-line
change, task B reported with a one-line change (its report pending) and two assigned tasks.

Timed: `coord status`, `coord next` (B's report), `worker done A`, `coord accept B` (after an
untimed `coord next`). Before every run the repository's `.git` (state, inbox, refs, index)
is put back from a pristine copy (hard links; reflogs and `info/` copied), so each run
starts from the identical state. Runs are paired: every command runs on one side and then
the other, back to back, the side that goes first alternating, the command order rotating
each round; the ratio large/small is taken per pair and its median printed against the
target "the same within +-10%". Results: bench/results/history.json. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BIN,
    Bench,
    Sandbox,
    Timing,
    commit_all,
    edit_lines,
    enter_env,
    generate_repo,
    load_line,
    log,
    parse_bench_args,
    print_table,
    run_ru,
    verdict,
    write_json,
)

SIZES = {"small": {"tasks": 20, "signals": 20, "reports": 20},
         "large": {"tasks": 20_000, "signals": 10_000, "reports": 5_000}}
TARGET = 0.10
COMMANDS = ("coord status", "coord next", "worker done", "coord accept")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return parse_bench_args(argv, __doc__, "history.json", runs=(11, 3),
                            runs_help="pairs per command (default 11)",
                            quick_help="3 pairs per command")


# ---- scene-setting, in-process --------------------------------------------------------

def cli(main: Callable[[list[str]], int], *argv: str) -> Any:
    """One CLI call in-process (`main(argv) -> int`), its JSON document returned."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--json"])
    if code != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {out.getvalue()[-2000:]}")
    return json.loads(out.getvalue())


def build_scene(sb: Sandbox) -> dict[str, Any]:
    """The real part of the history (two batches) and the scene of batch 3, in sb.repo."""
    from hunkwise.coordinator.cli import main as coord
    from hunkwise.worker.cli import main as worker

    layout = generate_repo(sb, 60, 3)
    commit_all(sb, "generated")
    enter_env(sb.env)
    os.chdir(sb.repo)
    cli(coord, "init")
    files = iter(layout[0] + layout[1])
    n = 0
    for batch in (1, 2):
        sessions = []
        for _ in range(2):
            n += 1
            tid, path = f"H{n}", next(files)
            cli(coord, "assign", tid, "--title", f"history task {n}", "--expect", "a line is edited",
                "--write", path)
            sessions.append(cli(worker, "start", tid)["session"])
            edit_lines(sb.repo / path, [3], tid)
            cli(worker, "done", tid, "--no-run-checks", "--summary", f"edited {path}")
            nxt = cli(coord, "next")["next"]
            assert nxt["report"]["task_id"] == tid and nxt["validation"]["ok"], nxt
            cli(coord, "accept", tid)
        cli(worker, "signal", "--session", sessions[0], "--to", sessions[1], "--type", "CHECKPOINT",
            "--about", f"H{n}", "--payload", "handing over what I learnt")
        cli(worker, "signals", "--session", sessions[1], "--ack")
        cli(coord, "freeze")
        assert cli(coord, "thaw")["archived"] >= 3
    # Batch 3: the scene every timed command sees.
    a_path, b_path = layout[2][0], layout[2][1]
    for tid, path in (("A", a_path), ("B", b_path), ("C", layout[2][2]), ("D", layout[2][3])):
        cli(coord, "assign", tid, "--title", f"active task {tid}", "--expect", "a line is edited",
            "--write", path)
    for tid, path in (("A", a_path), ("B", b_path)):
        cli(worker, "start", tid)
        edit_lines(sb.repo / path, [7], tid)
    cli(worker, "done", "B", "--no-run-checks", "--summary", "B's one-line change")
    return {"a_path": a_path, "b_path": b_path}


def replicate_history(root: Path, tasks: int, signals: int, reports: int) -> dict[str, Any]:
    """Grow the archive and the read inbox of the state directory `root` to the given sizes,
    by copying the records and reports the real batches left there, under new ids."""
    from hunkwise import inbox
    from hunkwise.shared.state import store

    lay = store.Layout(repo=root.parent.parent, root=root)
    t_tmpl = store.archived(lay, "task")
    s_tmpl = store.archived(lay, "signal")
    # A thaw moves the read reports of the tasks it archives from inbox/cur to inbox/old
    # (inbox.retire): the real batches' reports are there, and so go their copies.
    cur = root / "inbox" / "old"
    r_tmpl = sorted(cur.iterdir())
    assert t_tmpl and s_tmpl and r_tmpl, (len(t_tmpl), len(s_tmpl), len(r_tmpl))
    records: list[dict[str, Any]] = []
    names: list[str] = []
    base_ns = time.time_ns() - 10**15  # older than anything real
    host = r_tmpl[0].name.split(",")[0].split(".", 2)[2]
    for i in range(tasks - len(t_tmpl)):
        tid = f"old{i + 1:05d}"
        data = dict(t_tmpl[i % len(t_tmpl)], id=tid, title=f"finished task {i + 1}")
        if len(names) < reports - len(r_tmpl):
            # Its read report: the template's, renamed to it, under a name inbox/maildir.py
            # would give it (the task and revision in the name, as deliver() writes them).
            src = r_tmpl[i % len(r_tmpl)]
            doc = json.loads(src.read_bytes())
            doc.update(task_id=tid, revision=1, report_id=f"rep-{tid}-r1-history")
            name = f"{base_ns + i * 10**9:020d}.P{1000 + i % 30000}R{i:012x}.{host},task={tid},rev=1"
            entry = inbox.maildir._entry(cur / name, "old")
            assert entry is not None and entry.task_id == tid, name
            (cur / name).write_bytes(json.dumps(doc).encode())
            names.append(name)
            data.update(revision=1, last_report=name, served_revision=1)
        records.append({"kind": "task", "data": data})
    day0 = 20250101
    for i in range(signals - len(s_tmpl)):
        sid = f"sig-{day0 + i // 900:08d}-{i % 900 + 1:03d}"
        records.append({"kind": "signal", "data": dict(s_tmpl[i % len(s_tmpl)], id=sid,
                                                         about=f"old{i % max(1, tasks) + 1:05d}")})
    store.archive(lay, records)  # the writer coord thaw uses: one append, fsynced
    # Spot-check: what was written reads back as the product's models.
    from hunkwise.shared.state.models import Signal, Task

    Task.model_validate(store.archived(lay, "task")[-1])
    Signal.model_validate(store.archived(lay, "signal")[-1])
    if names:
        inbox.read_report(cur / names[-1])
    return history_size(root)


def history_size(root: Path) -> dict[str, Any]:
    from hunkwise.shared.state import store

    lay = store.Layout(repo=root.parent.parent, root=root)
    archive = root / store.ARCHIVE
    return {"archived_tasks": len(store.archived(lay, "task")),
            "archived_signals": len(store.archived(lay, "signal")),
            "read_reports": sum(len(os.listdir(root / "inbox" / d)) for d in ("cur", "old")
                                if (root / "inbox" / d).is_dir()),
            "pending_reports": len(os.listdir(root / "inbox" / "new")),
            "archive_bytes": archive.stat().st_size if archive.exists() else 0,
            "state_bytes": (root / "state.json").stat().st_size}


# ---- putting .git back between runs ---------------------------------------------------

def _link_or_copy(src: str, dst: str) -> None:
    # Reflogs and info/exclude are appended in place: copied. Everything else git and
    # hunkwise replace by rename (objects, refs, index, state.json, reports) or never
    # write (lock files): hard links are safe and fast.
    parts = Path(src).parts
    if "logs" in parts or "info" in parts:
        shutil.copy2(src, dst)
    else:
        os.link(src, dst)


class Pristine:
    """Named copies of a repository's .git, put back before each timed run."""

    def __init__(self, repo: Path, store: Path) -> None:
        self.repo, self.store = repo, store
        self.copies: dict[str, Path] = {}

    def take(self, name: str) -> None:
        dst = self.store / name
        shutil.copytree(self.repo / ".git", dst, symlinks=True, copy_function=shutil.copy2)
        self.copies[name] = dst

    def restore(self, name: str) -> None:
        shutil.rmtree(self.repo / ".git")
        shutil.copytree(self.copies[name], self.repo / ".git", symlinks=True,
                        copy_function=_link_or_copy)


# ---- main -------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    K = a.runs
    b = Bench(keep=a.keep)
    sb = b.sb
    cwd = os.getcwd()
    env0 = dict(os.environ)
    setup: dict[str, float] = {}
    try:
        log(f"repo: {sb.repo} ({K} pairs per command)")
        t0 = time.perf_counter()
        paths = build_scene(sb)
        setup["real_batches_and_scene_s"] = round(time.perf_counter() - t0, 2)

        # Two sides: the repository as built, and a copy of it; then git's stat cache of the
        # copy refreshed (new inodes) once the clock has moved on, so neither side re-hashes.
        repos = {"small": sb.root / "small", "large": sb.root / "large"}
        shutil.copytree(sb.repo, repos["large"], symlinks=True, copy_function=shutil.copy2)
        os.chdir(sb.root)
        sb.repo.rename(repos["small"])
        time.sleep(1.1)
        sizes: dict[str, Any] = {}
        for side, repo in repos.items():
            t0 = time.perf_counter()
            sizes[side] = replicate_history(repo / ".git" / "coord", **SIZES[side])
            setup[f"replicate_{side}_s"] = round(time.perf_counter() - t0, 2)
            enter_env(sb.env)
            for args in (("update-index", "-q", "--really-refresh"), ("status", "--porcelain")):
                run_ru(["git", *args], repo, sb.env)
        log(f"  history: {sizes}")
        assert sizes["small"]["state_bytes"] == sizes["large"]["state_bytes"], sizes

        # Pristine copies: `base` (B pending) for status, next and done; `served` (B taken by
        # an untimed coord next) for accept.
        pristine = {}
        for side, repo in repos.items():
            p = pristine[side] = Pristine(repo, sb.root / f"pristine-{side}")
            p.take("base")
            r = run_ru([BIN / "coord", "next", "--json"], repo, sb.env).check()
            assert r.doc["next"]["report"]["task_id"] == "B", r.doc
            p.take("served")
            p.restore("base")

        def check_status(d: Any) -> None:
            assert d["inbox"]["pending"] == 1 and len(d["tasks"]) == 4, (d["inbox"], len(d["tasks"]))

        def check_next(d: Any) -> None:
            n = d["next"]
            assert n["report"]["task_id"] == "B" and n["validation"]["ok"], n

        def check_done(d: Any) -> None:
            assert d["report"]["hunks"] == 1, d["report"]

        def check_accept(d: Any) -> None:
            assert d.get("commit"), d

        cmds: dict[str, tuple[str, list[Any], Callable[[Any], None]]] = {
            "coord status": ("base", [BIN / "coord", "status", "--json"], check_status),
            "coord next": ("base", [BIN / "coord", "next", "--json"], check_next),
            "worker done": ("base", [BIN / "worker", "done", "A", "--no-run-checks", "--json"],
                            check_done),
            "coord accept": ("served", [BIN / "coord", "accept", "B", "--json"], check_accept),
        }
        timings = {(c, s): Timing(f"{c} [{s}]") for c in COMMANDS for s in repos}
        t0 = time.perf_counter()
        for rnd in range(-1, K):
            shift = rnd % len(COMMANDS)
            for ci, c in enumerate(COMMANDS[shift:] + COMMANDS[:shift]):
                start, argv_, check = cmds[c]
                sides = ("small", "large") if (rnd + ci) % 2 == 0 else ("large", "small")
                for side in sides:
                    pristine[side].restore(start)
                    r = run_ru(argv_, repos[side], sb.env).check()
                    check(r.doc)
                    if rnd >= 0:
                        timings[(c, side)].add((r.seconds, r.cpu))
            log(f"  round {'warm-up' if rnd < 0 else rnd + 1} done")
        setup["measure_s"] = round(time.perf_counter() - t0, 1)
        for side in repos:
            pristine[side].restore("base")
        after = {side: history_size(repos[side] / ".git" / "coord") for side in repos}
        assert after == sizes, ("the pristine copies changed", after, sizes)

        # ---- report ---------------------------------------------------------------------
        rows = []
        results: dict[str, Any] = {}
        verdicts = {}
        for c in COMMANDS:
            s_, l_ = timings[(c, "small")], timings[(c, "large")]
            wall_r = statistics.median(x / y for x, y in zip(l_.samples, s_.samples))
            cpu_r = statistics.median(x / y for x, y in zip(l_.cpu_samples, s_.cpu_samples))
            ok = abs(wall_r - 1) <= TARGET
            cpu_ok = abs(cpu_r - 1) <= TARGET
            verdicts[c] = ok
            rows.append([c, f"{s_.median * 1000:.0f}", f"{l_.median * 1000:.0f}",
                         f"{wall_r:.2f}", f"{l_.median / s_.median:.2f}",
                         f"{s_.cpu_median * 1000:.0f}",
                         f"{l_.cpu_median * 1000:.0f}", f"{cpu_r:.2f}",
                         verdict(ok) + ("" if cpu_ok == ok else f" (cpu: {verdict(cpu_ok)})")])
            results[c] = {"small": s_.as_json(), "large": l_.as_json(),
                          "paired_ratio_median": round(wall_r, 3),
                          "paired_cpu_ratio_median": round(cpu_r, 3),
                          "ratio_of_medians": round(l_.median / s_.median, 3),
                          "target_met": ok, "cpu_target_met": cpu_ok}
        table = print_table(rows, ["command", "small ms", "large ms", "large/small",
                                   "of medians",
                                   "cpu small", "cpu large", "cpu l/s", "+-10%"])
        doc: dict[str, Any] = {
            "bench": "history",
            "params": {"runs": K, "quick": a.quick, "sizes": SIZES,
                       "scene": {"active": ["A in_progress (1 hunk)", "B reported (1 hunk)",
                                            "C assigned", "D assigned"], **paths}},
            "machine": b.machine(),
            "history": sizes,
            "setup": setup,
            "target": {"ratio_within": TARGET, "met": verdicts, "all_met": all(verdicts.values()),
                       "rule": "median over pairs of large/small wall time within 1 +- 0.10"},
            "results": results,
            "total_s": b.total_s(),
        }
        write_json(a.out, doc)
        print(table)
        sm, lg = sizes["small"], sizes["large"]
        print(f"\nhistory: small {sm['archived_tasks']} tasks, {sm['archived_signals']} signals, "
              f"{sm['read_reports']} read reports (archive {sm['archive_bytes'] / 1e3:.0f} kB); "
              f"large {lg['archived_tasks']:,} tasks, {lg['archived_signals']:,} signals, "
              f"{lg['read_reports']:,} read reports (archive {lg['archive_bytes'] / 1e6:.1f} MB); "
              f"state.json {sm['state_bytes'] / 1e3:.1f} kB on both sides")
        print(f"large/small: the median of {K} paired ratios (the verdict, wall; cpu in "
              "brackets where it differs), and the ratio of the two medians")
        print(f"large/small within +-10% (median of {K} paired ratios, wall): "
              f"{sum(verdicts.values())} of {len(verdicts)} commands: target "
              f"{verdict(all(verdicts.values()))}")
        print(load_line(doc["machine"]))
        b.finish(a.out, doc, home=True)
        return 0
    finally:
        os.chdir(cwd)
        enter_env(env0)
        b.close()


if __name__ == "__main__":
    sys.exit(main())
