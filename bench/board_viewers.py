"""Fifty viewers on `coord board`: does the CLI slow down while they watch?

    .venv/bin/python bench/board_viewers.py [--viewers 50] [--runs 24] [--quick]
    make bench-board

A repository with 24 tasks (16 in progress, 4 reported, 4 assigned) and the real
`coord board` on a free loopback port. A thread changes the state every second (a
heartbeat through the worker's core function, rotating over the claims). Fifty viewers,
in a process of their own as browser tabs would be, each poll `fragment` once a second
with `If-None-Match`, exactly as the page does. The CLI's latency is the wall time of a
`coord status --json` process, measured in three phases:

  - no board     the board's process is stopped (SIGSTOP), the viewers are paused
  - board idle   the board runs, the viewers are paused
  - viewers      the board runs and the fifty viewers poll it

The phases take turns in blocks of three runs, in a rotating order, so load from elsewhere
on the machine falls on all three alike.

It prints the medians and the ratios (the target: 50 viewers / board idle <= 1.10), the
viewers' own figures (requests, 200/304, errors, fragment latency) and the board's CPU,
and writes bench/results/board_viewers.json. Not part of `make bench` (about 90 s).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    BIN,
    RESULTS,
    Sandbox,
    Timing,
    coord,
    git,
    log,
    machine_info,
    print_table,
    run,
    write_json,
)

SESSION = "sess-20260101-0900-w{:02d}@bench"
PHASES = ("no board", "board idle", "viewers")


# ---- the viewers' process ------------------------------------------------------------------

def viewers_child(url: str, n: int) -> int:
    """N viewers polling `fragment` every second while resumed; stdin lines `pause` and
    `resume` switch them (they start paused); at EOF one JSON line of figures on stdout."""
    host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    stop, running = threading.Event(), threading.Event()
    lock = threading.Lock()
    figures = {"requests": 0, "ok": 0, "not_modified": 0, "errors": 0, "bytes": 0}
    latencies: list[float] = []

    def viewer(i: int) -> None:
        etag = ""
        rnd = random.Random(i)
        while not stop.is_set():
            if not running.is_set():
                running.wait()
                stop.wait(rnd.random())  # tabs come back at different moments
                continue
            t0 = time.monotonic()
            try:
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                conn.request("GET", "/fragment", headers={"If-None-Match": etag})
                r = conn.getresponse()
                body = r.read()
                conn.close()
                code = r.status
                if code == 200:
                    etag = r.getheader("ETag") or ""
            except OSError:
                code = -1
                body = b""
            dt = time.monotonic() - t0
            with lock:
                figures["requests"] += 1
                figures["bytes"] += len(body)
                if code == 200:
                    figures["ok"] += 1
                elif code == 304:
                    figures["not_modified"] += 1
                else:
                    figures["errors"] += 1
                latencies.append(dt)
            stop.wait(max(0.0, 1.0 - dt))  # the page polls again a second after an answer

    threads = [threading.Thread(target=viewer, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    print("viewers: ready", flush=True)
    busy, since = [0.0], 0.0  # seconds spent polling (the viewers' CPU share is over these)
    for line in sys.stdin:
        if line.strip() == "resume" and not running.is_set():
            since = time.monotonic()
            running.set()
        elif line.strip() == "pause" and running.is_set():
            busy[0] += time.monotonic() - since
            running.clear()
    stop.set()
    running.set()
    for t in threads:
        t.join(timeout=15)
    lat = sorted(latencies) or [0.0]
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    figures.update({"cpu_share": round((cpu.ru_utime + cpu.ru_stime) / max(busy[0], 1e-9), 4),
                    "median_ms": round(statistics.median(lat) * 1000, 2),
                    "p95_ms": round(lat[max(0, int(len(lat) * 0.95) - 1)] * 1000, 2),
                    "max_ms": round(lat[-1] * 1000, 2)})
    print(json.dumps(figures), flush=True)
    return 0


# ---- the scene -------------------------------------------------------------------------------

def build(sb: Sandbox) -> list[tuple[str, str]]:
    """24 tasks on 24 files; returns the (task, session) pairs holding a live claim."""
    for i in range(24):
        (sb.repo / f"mod{i:02d}.py").write_text("".join(f"x{n} = {n}\n" for n in range(40)))
    git(sb, "init", "-q", "-b", "main")
    git(sb, "add", "-A")
    git(sb, "commit", "-q", "-m", "base")
    claimed = []
    for i in range(24):
        tid = f"t{i:02d}"
        coord(sb, "assign", tid, "--title", f"Task {i}", "--expect", "e",
              "--write", f"mod{i:02d}.py").check()
        if i < 20:
            sess = SESSION.format(i)
            run([BIN / "worker", "start", tid, "--session", sess, "--json"], sb.repo, sb.env).check()
            p = sb.repo / f"mod{i:02d}.py"
            p.write_text(p.read_text().replace("x1 = 1\n", f"x1 = {i + 100}\n"))
            if i >= 16:
                run([BIN / "worker", "done", tid, "--session", sess, "--no-run-checks", "--json"],
                    sb.repo, sb.env).check()
            else:
                claimed.append((tid, sess))
    return claimed


class Changer:
    """Changes the state once a second: a heartbeat through the worker's core function."""

    def __init__(self, repo: Path, claimed: list[tuple[str, str]]) -> None:
        from hunkwise.shared.state.context import open_repo

        self.ctx = open_repo(str(repo))
        self.claimed = claimed
        self.changes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from hunkwise.worker.session import heartbeat

        i = 0
        while not self._stop.wait(1.0):
            tid, sess = self.claimed[i % len(self.claimed)]
            heartbeat(self.ctx, tid, session=sess)
            self.changes += 1
            i += 1

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


class BoardProc:
    def __init__(self, sb: Sandbox) -> None:
        self.proc = subprocess.Popen([str(BIN / "coord"), "board", "--port", "0"], cwd=sb.repo,
                                     env=sb.env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        if "board: ready at " not in line:
            raise RuntimeError(f"coord board said {line!r}")
        self.url = line.split("board: ready at ", 1)[1].strip()

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


class Viewers:
    """The viewers' process; `on()` / `off()` switch its polling."""

    def __init__(self, url: str, n: int, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-B", __file__, "--viewer-child", url,
                                      "--viewers", str(n)], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.stdin = self.proc.stdin
        if "ready" not in self.proc.stdout.readline():
            raise RuntimeError("the viewers did not start")

    def _say(self, word: str) -> None:
        self.stdin.write(word + "\n")
        self.stdin.flush()

    def on(self) -> None:
        self._say("resume")
        time.sleep(2.0)  # every viewer is back (within 1 s) and has polled at least once

    def off(self) -> None:
        self._say("pause")
        time.sleep(0.5)  # requests in flight are answered

    def stop(self) -> dict[str, Any]:
        out, _ = self.proc.communicate(timeout=60)
        return dict(json.loads(out.strip().splitlines()[-1]))


# ---- the measurement ---------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description="CLI latency with 50 viewers on coord board")
    ap.add_argument("--viewers", type=int, default=50)
    ap.add_argument("--runs", type=int, default=24, help="coord status runs per phase (24)")
    ap.add_argument("--block", type=int, default=3,
                    help="runs in a row before the viewers switch on or off (3)")
    ap.add_argument("--quick", action="store_true", help="8 runs per phase")
    ap.add_argument("--viewer-child", metavar="URL", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=RESULTS / "board_viewers.json")
    args = ap.parse_args()
    if args.viewer_child:
        return viewers_child(args.viewer_child, args.viewers)
    if args.quick:
        args.runs = 8

    sb = Sandbox.create()
    os.environ.update(sb.env)  # the state changer runs here, in the sandbox's environment
    started = time.monotonic()
    load0 = os.getloadavg()
    timings = {p: Timing(p) for p in PHASES}
    board_cpu: dict[str, list[float]] = {"board idle": [], "viewers": []}
    try:
        log("building the scene (24 tasks) ...")
        claimed = build(sb)
        changer = Changer(sb.repo, claimed)
        changer.start()
        coord(sb, "status").check()  # warm the caches

        def measure(phase: str, n: int, board: BoardProc | None = None) -> None:
            c0, t0 = (board.cpu_s(), time.monotonic()) if board else (0.0, 0.0)
            for _ in range(n):
                r = coord(sb, "status").check()
                timings[phase].add((r.seconds, r.cpu))
            if board:
                board_cpu[phase].append((board.cpu_s() - c0) / (time.monotonic() - t0))

        board = BoardProc(sb)
        viewers = Viewers(board.url, args.viewers, sb.env)
        try:
            # Blocks of runs in a rotating order of the three phases, so whatever else the
            # machine does falls on all of them alike. "No board" is the board's process
            # stopped (SIGSTOP): it takes no CPU and answers nothing, as if it were not there.
            done, k = 0, 0
            blocks: list[dict[str, float]] = []  # per round of blocks: each phase's median
            while done < args.runs:
                n = min(args.block, args.runs - done)
                for phase in PHASES[k % 3:] + PHASES[:k % 3]:
                    if phase == "no board":
                        viewers.off()
                        board.pause()
                        measure(phase, n)
                        board.resume()
                    else:
                        (viewers.on if phase == "viewers" else viewers.off)()
                        measure(phase, n, board)
                blocks.append({ph: statistics.median(timings[ph].samples[-n:]) for ph in PHASES})
                done += n
                k += 1
                log(f"  {done}/{args.runs}: " + ", ".join(
                    f"{p} {timings[p].median * 1000:.0f} ms" for p in PHASES if timings[p].samples))
            viewer_figs = viewers.stop()
        finally:
            if viewers.proc.poll() is None:
                viewers.proc.kill()
            board.resume()
            board.stop()
        changer.stop()
    finally:
        sb.close()

    med = {p: timings[p].median for p in PHASES}
    ratio_idle = med["viewers"] / med["board idle"]
    ratio_none = med["viewers"] / med["no board"]
    # The same ratio taken within each round of blocks (seconds apart), then its median:
    # steadier than the ratio of the medians while the machine's load drifts.
    paired = statistics.median(b["viewers"] / b["board idle"] for b in blocks)
    rows = [[p, f"{med[p] * 1000:.0f} ms", f"{min(timings[p].samples) * 1000:.0f} ms",
             f"{max(timings[p].samples) * 1000:.0f} ms", f"{timings[p].cpu_median * 1000:.0f} ms",
             str(len(timings[p].samples))] for p in PHASES]
    f = viewer_figs
    print(f"\ncoord status --json, {args.runs} runs per phase; {args.viewers} viewers polling "
          f"/fragment every second; the state changed {changer.changes} times (once a second); "
          f"load average {load0[0]:.1f} at the start")
    print(print_table(rows, ["phase", "median", "min", "max", "CPU median", "runs"]))
    print(f"\n{args.viewers} viewers / board idle: {ratio_idle:.3f} "
          f"({'within' if ratio_idle <= 1.10 else 'OVER'} the +10% target); "
          f"{args.viewers} viewers / no board: {ratio_none:.3f}; paired within rounds "
          f"(median of {len(blocks)}): {paired:.3f}")
    print(f"viewers: {f['requests']} requests ({f['ok']} x 200, {f['not_modified']} x 304, "
          f"{f['errors']} errors); fragment median {f['median_ms']:.1f} ms, "
          f"p95 {f['p95_ms']:.1f} ms, max {f['max_ms']:.1f} ms")
    print("board CPU: idle {:.1%} of a core, with viewers {:.1%}; the viewers' own process "
          "{:.1%}".format(statistics.median(board_cpu["board idle"]),
                          statistics.median(board_cpu["viewers"]), f["cpu_share"]))
    write_json(args.out, {
        "machine": {**machine_info(), "load_before": load0, "load_after": os.getloadavg()},
        "viewers": args.viewers, "runs": args.runs, "block": args.block,
        "state_changes": changer.changes,
        "coord_status": {p: timings[p].as_json() for p in PHASES},
        "ratio_viewers_to_board_idle": round(ratio_idle, 3),
        "ratio_viewers_to_no_board": round(ratio_none, 3),
        "ratio_viewers_to_board_idle_paired": round(paired, 3),
        "blocks": blocks,
        "viewer_figures": viewer_figs,
        "board_cpu_share": board_cpu,
        "wall_s": round(time.monotonic() - started, 1),
    })
    log(f"wrote {args.out} in {time.monotonic() - started:.0f}s")
    return 0 if f["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
