"""The `worker` command: a thin click layer over the worker's core functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click
from hunkwise.shared.cli import (
    WorkflowGroup,
    common,
    exit_process,
    group_options,
    run,
    sync_command,
    version_option,
)
from hunkwise.shared.errors import CoordError
from hunkwise.shared.output import emit

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        CheckRunResult,
        DeliverResult,
        GuardKnows,
        HeartbeatResult,
        SessionResult,
        StartResult,
    )


def _session_opt(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--session", default=None, metavar="S",
                        help="Session id (default: $COORD_SESSION, else the claim's).")(f)


def _ctx(repo: str | None):  # type: ignore[no-untyped-def]
    from hunkwise.shared.state.context import open_repo

    ctx = open_repo(repo)
    _warn_staged(ctx)
    return ctx


def _warn_staged(ctx) -> None:  # type: ignore[no-untyped-def]
    """Workers never stage: a `git add` is named at the worker's own next command, every
    path of it, instead of surfacing later as a refusal of some other task's accept."""
    from hunkwise.shared import git

    try:
        staged = git.index_dirty(ctx.repo, remembered=True)
    except CoordError:
        return  # no HEAD yet, or an unreadable index: the command itself will say
    if staged:
        more = f" and {len(staged) - 20} more" if len(staged) > 20 else ""
        import sys

        sys.stderr.write(f"warning: staged in the index: {', '.join(staged[:20])}{more}. Workers "
                         "never stage (the coordinator's accept commits for you), and nothing "
                         "can be accepted while the index differs from HEAD: unstage with git "
                         "restore --staged -- PATH...\n")


def _autosync(ctx, fetching: bool = True) -> None:  # type: ignore[no-untyped-def]
    """With `[remote] name` set, sync with the other machines (warnings only)."""
    from hunkwise.shared.machines import sync

    sync.warn(sync.auto(ctx, fetching=fetching))


class WorkerGroup(WorkflowGroup):
    sections = (
        ("work on a task", ("start", "heartbeat", "check", "checkpoint", "done", "blocked",
                            "failed")),
        ("sessions: hand over, signal, ask", ("handoff", "signal", "signals", "ask", "review")),
        ("machines", ("sync",)),
    )


_EXAMPLES = """\
Start here (the coordinator gave you a task id):
  worker start task-001          # claim it, read the brief; export COORD_SESSION as printed
  worker heartbeat task-001      # while you work (any worker command is one)
  worker done task-001 --summary "what changed"   # runs the checks, delivers the report

Edit only your grants; never stage or commit. --repo PATH is also accepted before the
command name. Shell completion: eval "$(_WORKER_COMPLETE=bash_source worker)"."""


@click.group(cls=WorkerGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=_EXAMPLES)
@version_option
@group_options
def cli(repo: str | None) -> None:
    """Work on one task of a shared git working tree; never stage or commit."""


def _guard_text(g: GuardKnows | None) -> str:
    if g is None or not g["known"]:
        return ("guard: the agent hooks do not know this session (no CLAUDE_CODE_SESSION_ID or "
                "CODEX_THREAD_ID here): start the agent with COORD_SESSION set to it")
    if g["agent"] is None:
        return "guard: the agent hooks know this session from COORD_SESSION"
    return (f"guard: the agent hooks know this session from its next tool call on "
            f"({g['agent']}: {g['by']})")


def _session_text(d: SessionResult) -> str:
    lines = [f"session: {d['session']}", f"export COORD_SESSION={d['session']}",
             _guard_text(d.get("guard"))]
    lines += [f"signal {s['id']} {s['type']} from {s['from']} about {s['about']}: {s['payload']}"
              for s in d["signals"]]
    lines.append("answer an audit with: worker review ID --verdict approve|changes --notes N"
                 if d["role"] != "worker" else "claim a task with: worker start ID")
    return "\n".join(lines)


@cli.command()
@click.argument("task_id", required=False)
@_session_opt
@click.option("--role", default=None, help="Role in the session id (default: worker). "
              "Without TASK_ID: start a session of this role, e.g. --role review.")
@common
def start(task_id: str | None, session: str | None, role: str | None, as_json: bool,
          repo: str | None) -> None:
    """Claim a task and print its brief; without TASK_ID, start a session (a reviewer's)."""
    from hunkwise.worker import lifecycle
    from hunkwise.worker import session as core

    ctx = _ctx(repo)
    _autosync(ctx)
    if task_id is None:
        opened = core.open_session(ctx, session=session, role=role)
        opened["guard"] = core.record_identity(ctx, opened["session"])
        emit(opened, as_json, _session_text)
        return
    doc = lifecycle.start(ctx, task_id, session=session, role=role or "worker")
    doc["guard"] = core.record_identity(ctx, doc["session"])
    from hunkwise.shared.machines.chains import is_mirrored

    if is_mirrored(ctx, task_id):
        _autosync(ctx)  # the claim reaches the task's coordinator now

    from hunkwise.shared.hunks.places import place_text

    def human(d: StartResult) -> str:
        t = d["task"]
        lines = []
        cp = d["checkpoint"]
        if cp:  # before anything else: where the last session stopped
            lines += [f"{cp['kind']} from {cp['session']}: {cp['next']}"]
            lines += [f"  context: {cp['context']}"] if cp["context"] else []
            lines += [f"  files: {', '.join(cp['files'])}"] if cp["files"] else []
            lines += [f"  commit: {c}" for c in cp["commits"][:10]]
        lines += [f"session: {d['session']}", f"export COORD_SESSION={d['session']}",
                  f"{t['id']}: {t['title']}", f"expect: {t['expect']}",
                  "write: " + ", ".join(t["grants"])]
        lines += [f"  {place_text(p)}" for p in d.get("places", [])]
        if any(p["kind"] != "glob" for p in d.get("places", [])):
            lines.append("  (HEAD: line numbers of the grant; tree: where those lines are now. "
                         "Inserting right after a range's last line is inside it; a point "
                         "+N takes whole new lines right after line N)")
        lines += [f"check: {c}" for c in t["checks"]]
        if d.get("brief"):
            lines += ["brief:", *("  " + line for line in d["brief"].rstrip("\n").split("\n"))]
        lines += [f"note ({n['kind']} by {n['by']}): {n['text']}" for n in d["notes"]]
        lines += [f"signal {s['id']} {s['type']} from {s['from']} about {s['about']}: {s['payload']}"
                  for s in d["signals"]]
        lines.append(_guard_text(d.get("guard")))
        lines.append("never stage or commit; when finished: worker done " + t["id"])
        return "\n".join(lines)

    emit(doc, as_json, human)


def _report_text(d: DeliverResult) -> str:
    r = d["report"]
    out = [f"delivered {d['task']['id']} r{r['revision']} [{r['status']}]: {r['changes']} file(s), "
           f"{r['hunks']} hunk(s), checks {r['checks_passed']}/{r['checks_total']}"]
    out += [f"overlap: {o['path']}: {o['note']}" for o in r["overlaps"][:10]]
    if d.get("claimed"):
        from hunkwise.shared.hunks.places import claimed_text

        out.append("claimed (tree lines now):")
        out += [f"  {line}" for line in claimed_text(d["claimed"])]
    out.append("stop here: the coordinator reviews at its next checkpoint")
    return "\n".join(out)


@cli.command()
@click.argument("task_id")
@_session_opt
@click.option("--summary", default="", help="What changed, for the reviewer.")
@click.option("--unfinished", multiple=True, metavar="U", help="Something left undone. Repeatable.")
@click.option("--commit-message", "message", default=None, metavar="M",
              help="Proposed commit message (first line is the subject).")
@click.option("--no-run-checks", is_flag=True, help="Do not run the task's checks.")
@click.option("--claim", multiple=True, metavar="PATH[:LINES]|all",
              help="Lines at a boundary that only you or your neighbour can have written "
                   "are yours. Repeatable.")
@click.option("--disclaim", multiple=True, metavar="PATH[:LINES]|all",
              help="Lines at a boundary are not yours. Repeatable.")
@common
def done(task_id: str, session: str | None, summary: str, unfinished: tuple[str, ...],
         message: str | None, no_run_checks: bool, claim: tuple[str, ...],
         disclaim: tuple[str, ...], as_json: bool, repo: str | None) -> None:
    """Run the checks, then deliver the task's report."""
    from hunkwise.worker import lifecycle

    ctx = _ctx(repo)
    _autosync(ctx)
    doc = lifecycle.done(ctx, task_id, session=session, summary=summary,
                         unfinished=list(unfinished), message=message,
                         run_checks=not no_run_checks, claim=list(claim),
                         disclaim=list(disclaim))
    _autosync(ctx)  # the report travels now, not at the next command
    emit(doc, as_json, _report_text)


@cli.command()
@click.argument("task_id")
@common
def check(task_id: str, as_json: bool, repo: str | None) -> None:
    """Run the task's checks as worker done would ([checks] where), delivering nothing."""
    from hunkwise.worker import lifecycle

    doc = lifecycle.check(_ctx(repo), task_id)

    def human(d: CheckRunResult) -> str:
        lines = [f"{'pass' if c['passed'] else 'FAIL'}  {c['duration_s']:7.2f}s  {c['command']}"
                 + ("" if c["passed"] else f"  (exit {c['exit_code']})") for c in d["checks"]]
        if not d["passed"]:
            for c in d["checks"]:
                if not c["passed"] and c["output_tail"].strip():
                    lines.append(f"--- output tail of {c['command']!r}:")
                    lines += [f"    {ln}" for ln in c["output_tail"].rstrip("\n").split("\n")[-15:]]
        if d["note"]:
            lines += d["note"].split("\n")
        lines.append(f"{d['task']}: checks {'pass' if d['passed'] else 'FAILED'} ({d['where']})")
        return "\n".join(lines)

    emit(doc, as_json, human)
    if not doc["passed"]:
        raise click.exceptions.Exit(1)


@cli.command()
@click.argument("task_id")
@_session_opt
@click.option("--reason", required=True, help="What blocks the task.")
@common
def blocked(task_id: str, session: str | None, reason: str, as_json: bool, repo: str | None) -> None:
    """Deliver a report saying the task is blocked."""
    from hunkwise.worker import lifecycle

    emit(lifecycle.stopped(_ctx(repo), task_id, status="blocked", session=session, reason=reason),
         as_json, _report_text)


@cli.command()
@click.argument("task_id")
@_session_opt
@click.option("--reason", required=True, help="Why the task failed.")
@common
def failed(task_id: str, session: str | None, reason: str, as_json: bool, repo: str | None) -> None:
    """Deliver a report saying the task failed."""
    from hunkwise.worker import lifecycle

    emit(lifecycle.stopped(_ctx(repo), task_id, status="failed", session=session, reason=reason),
         as_json, _report_text)


# ---- session practices -------------------------------------------------------------------

@cli.command()
@click.argument("task_id")
@_session_opt
@common
def heartbeat(task_id: str, session: str | None, as_json: bool, repo: str | None) -> None:
    """Keep the claim alive."""
    from hunkwise.worker import session as core

    doc = core.heartbeat(_ctx(repo), task_id, session=session)
    def human(d: HeartbeatResult) -> str:
        if "deferred" in d:
            return (f"{task_id}: deferred to batch {d['deferred']['batch']} by the release "
                    f"freeze; {d['deferred']['next']}")
        return (f"{task_id}: heartbeat at {d['heartbeat']} (ttl {d['ttl_s']}s)"
                + "".join(f"\nsignal {c['id']} TASK_CHANGED: the coordinator changed the task "
                          f"({c['payload']}): worker start {task_id} shows it anew; worker "
                          "signals --ack clears it" for c in d.get("changed", [])))

    emit(doc, as_json, human)


@cli.command()
@click.argument("task_id")
@_session_opt
@click.option("--next", "next_step", required=True,
              help='Where to resume: "resume <file> at <## Section> - context: <one line>".')
@click.option("--context", default="", help="Context that is not in git.")
@common
def checkpoint(task_id: str, session: str | None, next_step: str, context: str, as_json: bool,
               repo: str | None) -> None:
    """Record where you stand; the next worker start of this session shows it first."""
    from hunkwise.worker import session as core

    doc = core.checkpoint(_ctx(repo), task_id, session=session, next_step=next_step, context=context)
    emit(doc, as_json, lambda d: f"checkpoint {d['signal']['id']}: {d['checkpoint']['next']}")


@cli.command()
@click.argument("task_id")
@_session_opt
@click.option("--to", "target", required=True, help="Session id, <role>@<machine> or *.")
@click.option("--next", "next_step", required=True, help="Where the next session resumes.")
@click.option("--context", default="", help="Context that is not in git.")
@common
def handoff(task_id: str, session: str | None, target: str, next_step: str, context: str,
            as_json: bool, repo: str | None) -> None:
    """Hand the task to another session and release the claim."""
    from hunkwise.worker import session as core

    ctx = _ctx(repo)
    doc = core.handoff(ctx, task_id, session=session, to=target, next_step=next_step,
                       context=context)
    _autosync(ctx)  # the handoff and its edits travel now
    emit(doc, as_json, lambda d: f"{task_id} handed to {target} ({d['signal']['id']}); "
         f"file: {d['handoff']['file']}")


@cli.command(name="signal")
@_session_opt
@click.option("--to", "target", required=True, help="Session id, <role>@<machine> or *.")
@click.option("--type", "kind", required=True, help="READY_FOR_REVIEW, REVIEWED, BLOCKED_ON, ...")
@click.option("--about", required=True, help="What it is about (a task id, a file, ...).")
@click.option("--payload", default="", help="Free text.")
@common
def signal_cmd(session: str | None, target: str, kind: str, about: str, payload: str,
               as_json: bool, repo: str | None) -> None:
    """Send a signal to a session, a role, or everyone."""
    from hunkwise.worker import session as core

    doc = core.signal(_ctx(repo), session=session, to=target, kind=kind, about=about, payload=payload)
    emit(doc, as_json, lambda d: f"sent {d['signal']['id']} to {target}")


@cli.command()
@_session_opt
@click.option("--ack", "do_ack", is_flag=True, help="Mark the listed signals delivered.")
@click.option("--all", "everything", is_flag=True, help="History too: closed and acknowledged.")
@common
def signals(session: str | None, do_ack: bool, everything: bool, as_json: bool,
            repo: str | None) -> None:
    """Pending signals for this session (direct and broadcast); --all for history."""
    from hunkwise.worker import session as core

    ctx = _ctx(repo)
    _autosync(ctx)
    doc = core.signals(ctx, session=session, do_ack=do_ack, everything=everything)
    emit(doc, as_json, lambda d: "\n".join(
        f"{s['id']}  {s['type']:<17} from {s['from']}  about {s['about']}: {s['payload']}"
        + (f"  [{s['state']}]" if everything else "")
        for s in d["signals"]) or ("no signals" if everything else "no pending signals"))


@cli.command(name="review")
@click.argument("task_id")
@_session_opt
@click.option("--verdict", type=click.Choice(["approve", "changes"]), default=None,
              help="Your verdict; without it, print the task's diff to review.")
@click.option("--notes", default="", help="What you found.")
@click.option("--role", default=None, help="Without a session: the role of the session this "
              "opens (default: review).")
@click.option("--stat", is_flag=True, help="With no verdict: a summary per file.")
@common
def review_cmd(task_id: str, session: str | None, verdict: str | None, notes: str,
               role: str | None, stat: bool, as_json: bool, repo: str | None) -> None:
    """Read a task's diff (no --verdict), then answer the audit request for your role
    (read from the session id); without a session, open one of --role."""
    from hunkwise.worker import session as core

    ctx = _ctx(repo)
    _autosync(ctx)
    if verdict is None:
        from hunkwise.shared.diffview import snapshot_diff, task_diff

        # Exactly what accept would commit; from the report's pushed snapshot when the
        # task's edits are not in this machine's tree.
        shown = task_diff(ctx, task_id, stat=stat)
        if not shown["files"]:
            try:
                shown = snapshot_diff(ctx, task_id, stat=stat)
            except CoordError:
                pass  # no report anywhere either: nothing to review yet
        emit(shown, as_json, lambda d: (d.get("stat") if stat else d["patch"])
             or f"{task_id}: no changes to review")
        return
    doc = core.give_verdict(ctx, task_id, session=session, verdict=verdict, notes=notes,
                            role=role)
    _autosync(ctx, fetching=False)  # the verdict travels now (fetched when this began)
    emit(doc, as_json, lambda d: f"{task_id}: {d['role']} {verdict} delivered by {d['session']}"
         f"\nexport COORD_SESSION={d['session']}")


@cli.command()
@click.argument("task_id")
@_session_opt
@click.option("--question", required=True, help="The fork that needs a human.")
@click.option("--kind", type=click.Choice(["priority", "architecture", "scope", "deploy"]),
              default="scope", show_default=True)
@common
def ask(task_id: str, session: str | None, question: str, kind: str, as_json: bool,
        repo: str | None) -> None:
    """Raise a decision for the human supervisor; the answer comes as a signal."""
    from hunkwise.worker import session as core

    doc = core.ask(_ctx(repo), task_id, session=session, question=question, kind=kind)
    emit(doc, as_json, lambda d: f"asked {d['decision']['id']}; see worker signals for the answer")


@cli.command()
@common
def mcp(as_json: bool, repo: str | None) -> None:
    """Serve the worker's reading and reporting commands over MCP on stdio (the mcp extra)."""
    from hunkwise.worker import mcpserver

    ctx = _ctx(repo)
    mcpserver.server_class()  # exit 2 before anything when the SDK is missing
    mcpserver.serve(ctx.repo)


cli.add_command(sync_command())


def main(argv: Sequence[str] | None = None) -> int:
    """Run `worker` with `argv` (default: the process's arguments); return the exit code."""
    return run(cli, "worker", argv)


def entry() -> None:
    exit_process(main())
