"""`coord launch`, `coord stop`, `coord attach`: agents the coordinator starts itself.

`coord launch ID --agent NAME` claims the task for a new session (`worker start --session
S`, run as the worker's own command: the coordinator never imports the worker), writes
the first prompt from the brief, and starts the agent detached with `COORD_SESSION` and
`COORD_TASK` in its environment: in a tmux window when tmux is there, else as a
background process in its own process group, its output in a log under the state
directory. The process is recorded on the task (`Launch`: pid, its start time in the
kernel's clock, log, tmux target), so `coord status`, the board and `coord watch` can
tell a running agent from one that exited without a report, and `coord stop` ends that
process group and no other (a pid whose start time differs is someone else's).

A launch that fails or is interrupted after the claim puts the claim back: no task is
left claimed without a process.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from hunkwise.shared.errors import CheckFailed, StateRefused, UsageError
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, get_task, new_session, refuse_if_frozen
from hunkwise.shared.state.models import Launch, Task, TaskState

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import NotifyEvent
    from hunkwise.shared.state.models import Checkpoint

STARTABLE = (TaskState.ASSIGNED, TaskState.CHANGES_REQUESTED)
TMUX_SESSION = "hunkwise"
LOG_TAIL_LINES = 12
STOP_GRACE_S = 5.0
RELAUNCH_GRACE_S = float(os.environ.get("HUNKWISE_RELAUNCH_GRACE", "10"))


@dataclass(frozen=True)
class Profile:
    """How to start one agent: `command` as a background process, `interactive` in a
    tmux window (None: the same command). Placeholders are replaced in every argument."""

    command: tuple[str, ...]
    interactive: tuple[str, ...] | None = None
    # Where its skills go (coordinator/skills.py), when it reads project skills.
    skills: str | None = None


# The built-in profiles. Flags as their CLIs document them (docs/launch.md cites each):
# Claude Code: `claude "query"` starts the interactive session with a first prompt,
# `claude -p "query"` answers and exits; `--permission-mode acceptEdits` lets it edit
# without asking, `--allowedTools "Bash(worker:*)"` lets a non-interactive run call the
# worker's commands. Codex: `codex "prompt"` starts the TUI with a first prompt, `codex
# exec "prompt"` runs without it; `--sandbox workspace-write` lets it edit the workspace.
BUILTIN: dict[str, Profile] = {
    "claude": Profile(
        command=("claude", "-p", "{prompt}", "--permission-mode", "acceptEdits",
                 "--allowedTools", "Bash(worker:*)", "Bash(coord:*)"),
        interactive=("claude", "--permission-mode", "acceptEdits", "{prompt}"),
        skills="claude"),
    "codex": Profile(
        command=("codex", "exec", "--sandbox", "workspace-write", "{prompt}"),
        interactive=("codex", "--sandbox", "workspace-write", "--ask-for-approval",
                     "on-request", "{prompt}"),
        skills="codex"),
    # A scripted stand-in that needs no model (coordinator/standin.py): `make demo`.
    "demo": Profile(command=("{python}", "-m", "hunkwise.coordinator.standin",
                             "{prompt_file}")),
}


class AgentStatus(TypedDict):
    """A launched agent as `coord status`, the board and `coord watch` show it."""

    agent: str
    session: str
    pid: int
    alive: bool
    # running | reported (its task left in_progress) | exited-without-report
    state: str
    started_at: float
    log: str
    tmux: str | None
    problem: str | None
    log_tail: str


class Launched(TypedDict):
    task: str
    session: str
    agent: str
    pid: int
    log: str
    prompt_file: str
    tmux: str | None
    command: list[str]


class LaunchResult(TypedDict):
    launched: list[Launched]


class StopResult(TypedDict):
    task: str
    pid: int | None
    stopped: bool
    released: bool
    handoff: Any


# ---- profiles and prompts --------------------------------------------------------------

def profile(ctx: Ctx, agent: str) -> Profile:
    """The profile `--agent NAME` names: `[agents.NAME]` of coord.toml first, then the
    built-in ones. Unknown: exit 2."""
    own = ctx.config.agents.get(agent)
    if own is not None:
        inter = tuple(own.interactive_command) if own.interactive_command else None
        return Profile(command=tuple(own.command), interactive=inter,
                       skills=BUILTIN[agent].skills if agent in BUILTIN else None)
    if agent in BUILTIN:
        return BUILTIN[agent]
    names = sorted(set(BUILTIN) | set(ctx.config.agents))
    raise UsageError(f"unknown agent {agent!r}: known are {', '.join(names)} "
                     "(define others with [agents.NAME] command = [...] in coord.toml)")


def _fill(argv: tuple[str, ...], values: dict[str, str]) -> list[str]:
    out = []
    for arg in argv:
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        out.append(arg)
    return out


def _executable(argv0: str, path: str) -> str | None:
    if "/" in argv0:
        return argv0 if os.access(argv0, os.X_OK) and os.path.isfile(argv0) else None
    return shutil.which(argv0, path=path)


def prompt_text(task: dict[str, Any], session: str, *, note: str | None,
                notes: list[dict[str, Any]], skill: str, why: str = "changes requested") -> str:
    """The first prompt: the note that sent the task back first, then the brief (title,
    expected result, grants in current lines, checks), then how to finish."""
    tid = task["id"]
    lines: list[str] = []
    if note:
        lines += [f"{why.upper()} for {tid}: {note}",
                  "Address this first; your earlier edits are still in the tree.", ""]
    lines += [f"You are a hunkwise worker on task {tid}: {task['title']}",
              f"Expected result: {task['expect']}",
              f"Your session is {session} (COORD_SESSION is set; the task is claimed for you).",
              "",
              "You may write only these grants (files, or PATH:START-END line ranges as "
              "they stand now):"]
    lines += [f"  - {g}" for g in task["grants"]]
    if task["checks"]:
        lines += ["Checks that must pass (worker done runs them):"]
        lines += [f"  - {c}" for c in task["checks"]]
    shown = [n for n in notes if n.get("text") and n.get("text") != note]
    if shown:
        lines += ["Notes:"] + [f"  - [{n.get('kind', 'note')}] {n['text']}" for n in shown[-5:]]
    lines += ["",
              "Other workers edit the same working tree at the same time: never stage, commit, "
              "stash, reset or check out anything, and leave their changes alone.",
              f"The worker skill says how to work: {skill}",
              f"`worker start {tid}` prints this brief again with any signals for you.",
              f"If you are stuck, `worker blocked {tid} --reason \"...\"` and stop.",
              f"Finish with `worker done {tid} --summary \"...\"`, then stop."]
    return "\n".join(lines) + "\n"


# ---- processes -------------------------------------------------------------------------

def proc_start(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22), or
    None where there is no /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def alive(rec: Launch) -> bool:
    """Is the recorded process still running, and still the one recorded?"""
    stat = Path(f"/proc/{rec.pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            raw = stat.read_bytes()
        except OSError:
            return False
        fields = raw[raw.rfind(b")") + 2:].split()
        if not fields or fields[0] in (b"Z", b"X"):
            return False  # exited; its parent has not reaped it yet
        return rec.proc_start is None or proc_start(rec.pid) == rec.proc_start
    try:  # pragma: no cover - no /proc (macOS): the pid alone
        os.kill(rec.pid, 0)
    except ProcessLookupError:  # pragma: no cover
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True  # pragma: no cover


def log_tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 8192))
            data = f.read()
    except OSError:
        return ""
    from hunkwise.shared.output import printable

    text = data.decode("utf-8", "replace").replace("\r", "")
    return "\n".join(printable(line) for line in text.rstrip("\n").split("\n")[-lines:])


def status_of(task: Task) -> AgentStatus | None:
    """The task's launched agent, judged now: running, reported, or exited without a
    report (its task still in progress under the launched session, its process gone)."""
    rec = task.launch
    if rec is None:
        return None
    up = alive(rec)
    holds = (task.state == TaskState.IN_PROGRESS and task.claim is not None
             and task.claim.session == rec.session)
    if holds and not up:
        state, problem = "exited-without-report", "agent exited without a report"
    elif holds:
        state, problem = "running", None
    else:
        state, problem = ("reported" if task.state == TaskState.REPORTED else str(task.state)), None
    return {"agent": rec.agent, "session": rec.session, "pid": rec.pid, "alive": up,
            "state": state, "started_at": rec.started, "log": rec.log, "tmux": rec.tmux,
            "problem": problem, "log_tail": log_tail(rec.log) if problem else ""}


def exited_events(ctx: Ctx) -> list[NotifyEvent]:
    """`coord watch`: one event per launched agent that exited without a report."""
    from hunkwise.coordinator.notify import event

    out: list[NotifyEvent] = []
    state = store.load(ctx.lay)
    for t in sorted(state.tasks.values(), key=lambda t: t.id):
        st = status_of(t)
        if st is not None and st["problem"]:
            assert t.launch is not None
            out.append(event("agent-exited", f"agent-exited:{t.id}:{t.launch.pid}:{t.launch.seq}",
                             f"{t.id}: agent exited without a report ({st['agent']}, pid "
                             f"{st['pid']})",
                             f"log {st['log']}:\n{st['log_tail']}\ncoord stop {t.id} releases "
                             f"the claim; coord launch {t.id} --agent {st['agent']} starts "
                             "it again", task_id=t.id, session=st["session"]))
    return out


def _bin_dir() -> str:
    """The folder of this installation's `coord` and `worker`: first on the agent's PATH."""
    return str(Path(sys.executable).parent)


def _agent_env(session: str, task_id: str, log: Path, seq: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COORD_SESSION", "COORD_TASK", "HUNKWISE_COORDINATOR")}
    env["COORD_SESSION"] = session
    env["COORD_TASK"] = task_id
    env["HUNKWISE_LAUNCH_LOG"] = str(log)
    env["HUNKWISE_LAUNCH_SEQ"] = str(seq)
    path = env.get("PATH", os.defpath)
    if _bin_dir() not in path.split(os.pathsep):
        env["PATH"] = _bin_dir() + os.pathsep + path
    return env


def _use_tmux(ctx: Ctx, tmux: bool | None) -> bool:
    if tmux is not None:
        return tmux
    if ctx.config.launch.tmux == "never" or os.environ.get("HUNKWISE_NO_TMUX") == "1":
        return False
    return shutil.which("tmux") is not None


def tmux_base() -> list[str]:
    """tmux on hunkwise's own server socket (`$HUNKWISE_TMUX_SOCKET`, default `hunkwise`),
    so launched agents never land in a server someone else's scripts drive."""
    return ["tmux", "-L", os.environ.get("HUNKWISE_TMUX_SOCKET", "hunkwise")]


def _tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*tmux_base(), *args], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


def _start_tmux(ctx: Ctx, task_id: str, argv: list[str], env: dict[str, str],
                log: Path) -> tuple[int, str]:
    """A window running the agent; its output also goes to `log`. (pane pid, target)."""
    keep = {k: env[k] for k in ("COORD_SESSION", "COORD_TASK", "HUNKWISE_LAUNCH_LOG",
                                "HUNKWISE_LAUNCH_SEQ", "HUNKWISE_STANDIN_SCRIPT", "PATH",
                                "HOME", "COORD_DIR", "HUNKWISE_MACHINE") if k in env}
    # `exec env`: the pane's process is the agent itself, so its pid is the agent's.
    line = "exec " + shlex.join(["env", "-u", "HUNKWISE_COORDINATOR",
                                 *(f"{k}={v}" for k, v in keep.items()), *argv])
    fmt = "#{pane_pid} #{session_name}:#{window_id}"
    has = _tmux("has-session", "-t", f"={TMUX_SESSION}")
    if has.returncode == 0:
        got = _tmux("new-window", "-d", "-t", f"={TMUX_SESSION}:", "-n", task_id, "-c",
                    str(ctx.repo), "-P", "-F", fmt, line)
    else:
        got = _tmux("new-session", "-d", "-s", TMUX_SESSION, "-n", task_id, "-c", str(ctx.repo),
                    "-x", "200", "-y", "50", "-P", "-F", fmt, line)
    if got.returncode != 0 or not got.stdout.strip():
        why = (got.stderr or got.stdout).strip().split("\n")[0] or f"exit {got.returncode}"
        raise StateRefused(f"tmux could not start a window for {task_id}: {why} "
                           "(coord launch --no-tmux starts a background process instead)")
    pid_text, target = got.stdout.strip().split(" ", 1)
    _tmux("pipe-pane", "-t", target, "-o", f"cat >> {shlex.quote(str(log))}")
    return int(pid_text), target


def _start_background(ctx: Ctx, argv: list[str], env: dict[str, str], log: Path) -> int:
    with open(log, "ab") as out:
        p = subprocess.Popen(argv, cwd=ctx.repo, env=env, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                             close_fds=True)
    return p.pid


def _end_group(pid: int, rec: Launch | None = None, grace: float = STOP_GRACE_S) -> bool:
    """SIGTERM the process group led by `pid`, SIGKILL it after `grace`; True when it was
    running. With `rec`, only while the pid is still the recorded process."""
    if rec is not None and not alive(rec):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    except PermissionError:
        raise StateRefused(f"not allowed to signal process group {pid}") from None
    deadline = time.monotonic() + grace
    probe = rec or Launch(agent="?", session="?", pid=pid, proc_start=proc_start(pid),
                          started=0.0, log="", prompt_file="")
    while time.monotonic() < deadline and alive(probe):
        time.sleep(0.02)
    if alive(probe):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _reap(pid)
    return True


def _reap(pid: int) -> None:
    """A process this one started (a launch from a test, in-process) is reaped here."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# ---- the commands ----------------------------------------------------------------------

@dataclass
class _Plan:
    task_id: str
    prof: Profile
    argv_template: tuple[str, ...]
    was: TaskState


def _plan(ctx: Ctx, task_ids: list[str], agent: str, in_tmux: bool, *,
          replacing: bool) -> list[_Plan]:
    """Check everything that can be checked before any claim: exit 2 or 3, nothing done."""
    prof = profile(ctx, agent)
    template = (prof.interactive or prof.command) if in_tmux else prof.command
    path = os.environ.get("PATH", os.defpath)
    if _bin_dir() not in path.split(os.pathsep):
        path = _bin_dir() + os.pathsep + path
    first = _fill(template[:1], {"python": sys.executable})[0]
    if _executable(first, path) is None:
        raise UsageError(f"agent {agent!r}: {first!r} is not found on PATH (install it, or "
                         f"point [agents.{agent}] command at it in coord.toml)")
    if in_tmux and shutil.which("tmux") is None:
        raise UsageError("tmux is not on PATH (coord launch --no-tmux starts a background "
                         "process instead)")
    state = store.load(ctx.lay)
    refuse_if_frozen(state, "coord launch")
    plans = []
    for tid in dict.fromkeys(task_ids):
        task = get_task(state, tid)
        st = status_of(task)
        if st is not None and st["alive"] and not replacing:
            raise StateRefused(f"{tid}'s agent ({st['agent']}, pid {st['pid']}) is still running"
                               f" (coord stop {tid} ends it; coord attach {tid} opens it)")
        if task.held_until_thaw:
            raise StateRefused(f"{tid} belongs to batch {task.batch}, which opens at coord thaw")
        if task.state not in STARTABLE:
            raise StateRefused(f"{tid} is {task.state}; only assigned or changes_requested "
                               "tasks can be launched")
        plans.append(_Plan(tid, prof, template, task.state))
    return plans


def launch(ctx: Ctx, task_ids: list[str], *, agent: str, tmux: bool | None = None,
           note: str | None = None, why: str = "changes requested",
           replacing: bool = False) -> LaunchResult:
    if not task_ids:
        raise UsageError("give at least one task id")
    in_tmux = _use_tmux(ctx, tmux)
    plans = _plan(ctx, task_ids, agent, in_tmux, replacing=replacing)
    done: list[Launched] = []
    for p in plans:
        done.append(_launch_one(ctx, p, agent, in_tmux, note, why))
    return {"launched": done}


def _claim(ctx: Ctx, task_id: str, session: str) -> dict[str, Any]:
    """`worker start ID --session S`, as the worker's own command (its baseline, handoff
    and records are the worker's business); its JSON answer."""
    import json

    env = {k: v for k, v in os.environ.items()
           if k not in ("COORD_SESSION", "HUNKWISE_COORDINATOR")}
    code = "import sys\nfrom hunkwise.worker.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    p = subprocess.run([sys.executable, "-c", code, "start", task_id, "--session", session,
                        "--json", "--repo", str(ctx.repo)], capture_output=True, text=True,
                       env=env, stdin=subprocess.DEVNULL, timeout=300)
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else {}
    except ValueError:
        doc = {}
    if p.returncode != 0:
        err = doc.get("error", {}) if isinstance(doc, dict) else {}
        msg = err.get("message") or (p.stderr.strip().split("\n")[-1] if p.stderr else "")
        err_cls = {1: CheckFailed, 2: UsageError}.get(p.returncode, StateRefused)
        raise err_cls(msg or f"worker start {task_id} failed (exit {p.returncode})")
    return dict(doc)


def _release(ctx: Ctx, before: Task, session: str, handoff: Checkpoint | None) -> None:
    """Undo a claim this launch took (its process never started or was ended): the task
    as it was before (`before`), so a later start takes it as the first one would."""
    with store.transaction(ctx.lay) as state:
        task = state.tasks.get(before.id)
        if task is None or task.claim is None or task.claim.session != session:
            return
        for field in ("state", "claim", "session", "inherited", "reserved_for", "updated_at"):
            setattr(task, field, getattr(before, field))
        state.sessions.pop(session, None)
        if handoff is not None and f"handoff|{before.id}" not in state.checkpoints:
            state.checkpoints[f"handoff|{before.id}"] = handoff


def _record(ctx: Ctx, task_id: str, session: str, rec: Launch) -> None:
    with store.transaction(ctx.lay) as st:
        t = get_task(st, task_id)
        if t.claim is None or t.claim.session != session:
            raise StateRefused(f"{task_id}'s claim changed hands while its agent started")
        t.launch = rec


def _launch_one(ctx: Ctx, p: _Plan, agent: str, in_tmux: bool, note: str | None,
                why: str) -> Launched:
    from hunkwise.coordinator import skills

    state = store.load(ctx.lay)
    task = get_task(state, p.task_id)
    session = new_session(state, "worker")
    handoff = state.checkpoints.get(f"handoff|{p.task_id}")
    seq = task.launch.seq + 1 if task.launch is not None else 1
    folder = ctx.lay.root / "launch"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{p.task_id}.{seq}.log"
    prompt_file = folder / f"{p.task_id}.{seq}.prompt.md"
    if p.prof.skills is not None:
        skills.install(ctx, p.prof.skills)
    pid: int | None = None
    claimed = False
    try:
        # Set first: an interrupt while `worker start` runs may land after its claim. The
        # release undoes only a claim of this very session, so a refused start loses nothing.
        claimed = True
        brief = _claim(ctx, p.task_id, session)
        text = prompt_text(brief["task"], session, note=note, notes=brief.get("notes") or [],
                           skill=str(skills.skill_file()), why=why)
        store.atomic_write(prompt_file, text.encode())
        argv = _fill(p.argv_template, {"prompt": text, "prompt_file": str(prompt_file),
                                       "task": p.task_id, "session": session,
                                       "repo": str(ctx.repo), "python": sys.executable})
        env = _agent_env(session, p.task_id, log, seq)
        target = None
        if in_tmux:
            log.touch()
            pid, target = _start_tmux(ctx, p.task_id, argv, env, log)
        else:
            pid = _start_background(ctx, argv, env, log)
        rec = Launch(agent=agent, session=session, pid=pid, proc_start=proc_start(pid),
                     started=store.now(), log=str(log), prompt_file=str(prompt_file),
                     tmux=target, command=[a if len(a) < 200 else a[:60] + "..." for a in argv],
                     seq=seq)
        _record(ctx, p.task_id, session, rec)
    except BaseException:
        # No claimed task without a process, and no process without its claim.
        try:
            if pid is not None:
                _end_group(pid, grace=1.0)
        finally:
            if claimed:
                _release(ctx, task, session, handoff)
        raise
    return {"task": p.task_id, "session": session, "agent": agent, "pid": pid,
            "log": str(log), "prompt_file": str(prompt_file), "tmux": target,
            "command": rec.command}


def stop(ctx: Ctx, task_id: str, note: str = "") -> StopResult:
    """End the task's launched agent (its process group, if the pid is still the one
    recorded) and, while the task is in progress under its session, release the claim
    with a retroactive handoff, as `coord recover` writes one."""
    from hunkwise.coordinator.sessions import recover

    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    rec = task.launch
    if rec is None:
        raise StateRefused(f"{task_id} has no launched agent (coord launch {task_id} --agent "
                           "NAME starts one)")
    stopped = _end_group(rec.pid, rec)
    if rec.tmux:
        _tmux("kill-window", "-t", rec.tmux)
    handoff = None
    released = False
    if (task.state == TaskState.IN_PROGRESS and task.claim is not None
            and task.claim.session == rec.session):
        done = recover(ctx, task_id, note or f"stopped by coord stop ({rec.agent}, pid {rec.pid})",
                       live_ok=True)
        handoff, released = done["handoff"], True
    # The record stays: it numbers the next launch's log, and names the agent a relaunch
    # starts; its process is gone, so nothing is flagged for it.
    return {"task": task_id, "pid": rec.pid, "stopped": stopped, "released": released,
            "handoff": handoff}


def relaunch(ctx: Ctx, task_id: str, note: str, *, why: str = "changes requested",
             agent: str | None = None) -> LaunchResult:
    """Start the task's agent again (after changes were requested, or a decision answered),
    the note first in its prompt. Its previous agent, if still running, is ended first:
    its task was sent back, so its claim is over."""
    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    rec = task.launch
    name = agent or (rec.agent if rec else None)
    if name is None:
        raise StateRefused(f"{task_id} was never launched, so there is no agent to start "
                           f"again; coord launch {task_id} --agent NAME")
    if rec is not None:
        # An agent that just reported may still be finishing its `worker done`: give it
        # time to exit on its own before its group is ended (an interactive one never does).
        deadline = time.monotonic() + RELAUNCH_GRACE_S
        while time.monotonic() < deadline and alive(rec):
            time.sleep(0.05)
        _end_group(rec.pid, rec)
        if rec.tmux:
            _tmux("kill-window", "-t", rec.tmux)
    tmux = None if rec is None else rec.tmux is not None
    return launch(ctx, [task_id], agent=name, tmux=tmux, note=note, why=why, replacing=True)


def wants_relaunch(ctx: Ctx, asked: bool | None) -> bool:
    return ctx.config.launch.relaunch if asked is None else asked


def attach_argv(ctx: Ctx, task_id: str) -> list[str]:
    """The tmux command that opens the task's agent window."""
    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    rec = task.launch
    if rec is None:
        raise StateRefused(f"{task_id} has no launched agent")
    if rec.tmux is None:
        raise StateRefused(f"{task_id}'s agent runs without tmux; its output is in {rec.log} "
                           f"(tail -f {shlex.quote(rec.log)})")
    if not alive(rec):
        raise StateRefused(f"{task_id}'s agent has exited; its output is in {rec.log}")
    session = rec.tmux.split(":", 1)[0]
    _tmux("select-window", "-t", rec.tmux)
    return [*tmux_base(), "attach-session", "-t", session]
