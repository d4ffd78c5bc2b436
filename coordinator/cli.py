"""The `coord` command: a thin click layer over the coordinator's core functions."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
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
from hunkwise.shared.output import clip, emit, one_line, paint_diff, paint_states, table

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        AssignResult,
        CoordSignalsResult,
        DiffResult,
        DiscardResult,
        EditResult,
        FreezeResult,
        HunkDoc,
        InboxResult,
        NextResult,
        RecoverResult,
        ReportDoc,
        StatusResult,
        StatusTask,
        Validation,
        VerifyResult,
    )


def _ctx(repo: str | None):  # type: ignore[no-untyped-def]
    from hunkwise.shared.state.context import open_repo

    return open_repo(repo)


def _autosync(ctx) -> None:  # type: ignore[no-untyped-def]
    """With `[remote] name` set, sync with the other machines first (warnings only)."""
    from hunkwise.shared.machines import sync

    sync.warn(sync.auto(ctx))


class CoordGroup(WorkflowGroup):
    """In a worker's session (COORD_SESSION naming a session the state knows from worker
    commands, of a role other than the coordinator's), the coordinator's commands are
    refused (3) before they act: the command parses as usual (so `--json` holds), then its
    callback checks the state and raises instead of acting."""

    # The help lists commands by workflow, in the order a coordinator meets them.
    sections = (
        ("plan: hand out work", ("init", "assign", "grant", "edit", "launch", "stop", "attach",
                                 "status")),
        ("review: read reports, commit exactly one task", (
            "inbox", "next", "review", "diff", "accept", "request-changes", "reject", "defer",
            "revert", "restore", "discard", "commit")),
        ("release: freeze, verify, thaw", ("freeze", "verify", "thaw")),
        ("sessions: claims, signals, decisions", (
            "recover", "signals", "audit", "decisions", "decide", "index", "watch", "board")),
        ("machines", ("sync",)),
        ("setup: hooks that guard the tree", ("install-hooks", "uninstall-hooks", "guard")),
    )

    def resolve_command(self, ctx: click.Context, args: list[str]):  # type: ignore[no-untyped-def]
        name, cmd, rest = super().resolve_command(ctx, args)
        import os

        if cmd is not None and cmd.callback is not None and (
                os.environ.get("COORD_SESSION") or os.environ.get("CLAUDE_CODE_SESSION_ID")
                or os.environ.get("CODEX_THREAD_ID")):
            from hunkwise.coordinator.coordallow import coord_refusal

            why = coord_refusal([name or "", *rest])
            if why is not None:
                cmd = click.Command(cmd.name, params=cmd.params,
                                    callback=_refusing(cmd.callback, why))
        return name, cmd, rest


def _refusing(act: Any, why: str) -> Any:
    """The command, refused (3) in a worker's shell: one whose `$COORD_SESSION`, or whose
    agent session variable (mapped at `worker start`), names a session the state knows as
    a worker's. The coordinator's mark (HUNKWISE_COORDINATOR) does not lift it: any shell
    can set that."""

    def refuse(**kw: object) -> object:
        import os

        from hunkwise.shared.errors import StateRefused
        from hunkwise.shared.state import store
        from hunkwise.shared.state.identity import agent_identity, lookup, session_role

        try:
            ctx = _ctx(kw.get("repo"))  # type: ignore[arg-type]
            state = store.load(ctx.lay)
        except Exception:  # noqa: BLE001 - no readable state: nothing to guard
            return act(**kw)
        mine = [os.environ.get("COORD_SESSION", "").strip()]
        agent = agent_identity(os.environ)
        if agent is not None:
            mine.append(lookup(ctx.lay.root, agent[1]) or "")
        for session in filter(None, mine):
            if session_role(session) in ("coord", "coordinator"):
                continue  # the coordinator's own session, by its role
            if session in state.sessions or any(
                    t.session == session or (t.claim and t.claim.session == session)
                    for t in state.tasks.values()):
                raise StateRefused(f"{why}; this shell runs worker session {session}")
        return act(**kw)
    return refuse


_EXAMPLES = """\
Start here (the coordinator; each worker then runs `worker start ID`):
  coord init
  coord assign --title "Fix the parser" --expect "tests pass" --write 'src/parser.py'
  coord status
  coord next                    # when a worker has reported: its contract and findings
  coord accept task-001         # commits exactly that task's changes
  coord freeze && coord verify  # the release gate, then: coord thaw

Every command takes --json and --repo PATH (also before its name: coord --repo ../app status).
`coord COMMAND --help` for one command; shell completion: eval "$(_COORD_COMPLETE=bash_source coord)"."""


@click.group(cls=CoordGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=_EXAMPLES)
@version_option
@group_options
def cli(repo: str | None) -> None:
    """Coordinate parallel workers on one git working tree.

    The coordinator hands out tasks with write grants, reads the workers' reports at its
    own checkpoints, and commits each task's changes alone.
    """


# ---- tasks ---------------------------------------------------------------------------

@cli.command()
@common
def init(as_json: bool, repo: str | None) -> None:
    """Create the state (idempotent) and print where it lives."""
    from hunkwise.coordinator import tasks

    doc = tasks.init(_ctx(repo))
    emit(doc, as_json, lambda d: f"state: {d['state_dir']}")


def _brief_arg(brief: str | None, brief_file: str | None) -> str | None:
    """`--brief-file F`, or `--brief -` (stdin) / `--brief TEXT`: the worker's brief."""
    from hunkwise.coordinator import tasks
    from hunkwise.shared.state.models import MAX_BRIEF

    if brief is not None and brief_file is not None:
        raise click.UsageError("give --brief or --brief-file, not both")
    if brief_file is not None:
        return tasks.read_brief(brief_file)
    if brief == "-":
        return tasks.read_brief("-", sys.stdin.buffer.read(MAX_BRIEF + 1))
    if brief is not None:
        return tasks.read_brief(None, brief.encode("utf-8", "surrogateescape"))
    return None


def _checks_arg(checks: tuple[str, ...], check_file: str | None) -> list[str]:
    from hunkwise.coordinator import tasks

    return list(checks) + (tasks.read_checks(check_file) if check_file else [])


@cli.command()
@click.argument("task_id", required=False)
@click.option("--title", required=True, help="What the task is, in a line.")
@click.option("--expect", required=True, help="The user-visible result expected.")
@click.option("--write", "writes", multiple=True, metavar="GRANT",
              help="GLOB (gitignore-style, from the root), PATH:START-END, PATH:N, PATH::NAME "
                   "(a Python symbol), PATH::NAME+ or PATH:+N (a shared insertion point). "
                   "Repeatable.")
@click.option("--check", "checks", multiple=True, metavar="CMD", help="Targeted check. Repeatable.")
@click.option("--check-file", default=None, metavar="F",
              help="Checks from a file: one command a line, # comments and blank lines skipped.")
@click.option("--brief-file", default=None, metavar="F",
              help="Free text for the worker (shown at worker start, never by coord next).")
@click.option("--brief", default=None, metavar="TEXT",
              help="The brief as text; '-' reads it from stdin.")
@click.option("--exclusive", is_flag=True, help="Exclude every other grant on the matched files.")
@common
def assign(task_id: str | None, title: str, expect: str, writes: tuple[str, ...],
           checks: tuple[str, ...], check_file: str | None, brief_file: str | None,
           brief: str | None, exclusive: bool, as_json: bool, repo: str | None) -> None:
    """Create a task with write grants; refuse (3) on any ownership conflict."""
    from hunkwise.coordinator import tasks

    doc = tasks.assign(_ctx(repo), task_id=task_id, title=title, expect=expect,
                       writes=list(writes), checks=_checks_arg(checks, check_file),
                       exclusive=exclusive, brief=_brief_arg(brief, brief_file) or "")

    def human(d: AssignResult) -> str:
        t = d["task"]
        held = " (next batch: starts after coord thaw)" if d.get("held_until_thaw") else ""
        return f"assigned {t['id']}: {', '.join(t['grants'])}{held}"

    emit(doc, as_json, human)


@cli.command(name="edit")
@click.argument("task_id")
@click.option("--title", default=None, help="A new title.")
@click.option("--expect", default=None, help="A new expected result.")
@click.option("--brief-file", default=None, metavar="F", help="A new brief from a file.")
@click.option("--brief", default=None, metavar="TEXT", help="A new brief; '-' reads stdin.")
@click.option("--check", "checks", multiple=True, metavar="CMD",
              help="Replace the checks with these. Repeatable.")
@click.option("--check-file", default=None, metavar="F", help="Replace the checks with a file's.")
@click.option("--no-checks", is_flag=True, help="Remove every check.")
@common
def edit_cmd(task_id: str, title: str | None, expect: str | None, brief_file: str | None,
             brief: str | None, checks: tuple[str, ...], check_file: str | None,
             no_checks: bool, as_json: bool, repo: str | None) -> None:
    """Change a task that is not accepted or rejected; its worker gets a signal."""
    from hunkwise.coordinator import tasks

    if no_checks and (checks or check_file):
        raise click.UsageError("--no-checks removes every check: give it without --check")
    new_checks = [] if no_checks else (_checks_arg(checks, check_file)
                                        if checks or check_file else None)
    doc = tasks.edit(_ctx(repo), task_id, title=title, expect=expect,
                     brief=_brief_arg(brief, brief_file), checks=new_checks)

    def human(d: EditResult) -> str:
        if not d["changed"]:
            return f"{task_id}: nothing changed"
        told = f"; {d['signal']['to']} is told ({d['signal']['id']})" if d["signal"] else ""
        return f"{task_id}: changed {', '.join(d['changed'])}{told}"

    emit(doc, as_json, human)


@cli.command()
@click.option("--all", "everything", is_flag=True,
              help="Every task ever, not only active ones and this batch's finished ones.")
@click.option("--brief", is_flag=True,
              help="A few lines for a phone: open claims and what waits for the supervisor.")
@click.option("--send", is_flag=True,
              help="With --brief: also send it to the notifiers ([notify] command and urls).")
@common
def status(everything: bool, brief: bool, send: bool, as_json: bool, repo: str | None) -> None:
    """Tasks, claims, freeze, inbox, and changes in the tree that no task may commit."""
    from hunkwise.coordinator import tasks

    if send and not brief:
        raise click.UsageError("--send goes with --brief")
    if brief:
        ctx = _ctx(repo)
        doc = tasks.brief(ctx)
        if send:
            from hunkwise.coordinator.notify import send_now

            first, _, rest = doc["brief"].partition("\n")
            doc["sent"] = send_now(ctx, first, rest or first)
            for err in doc["sent"]["errors"]:
                sys.stderr.write(f"warning: not sent: {err}\n")
        emit(doc, as_json, lambda d: d["brief"])
        return
    shown = tasks.status(_ctx(repo), everything=everything)

    emit(shown, as_json, _status_text, paint=paint_states)


def _tasks_text(d: StatusResult) -> list[str]:
    """`coord status`'s table of tasks, each launched agent's problem, each line grant's place."""

    def claim(t: StatusTask) -> str:
        if t["stale"]:
            return "stale"
        if t["claim_age_s"] is None:
            return ""
        return "reported" if t["state"] == "reported" else f"{t['claim_age_s']:.0f}s"

    def agent(t: StatusTask) -> str:
        a = t.get("agent")
        if not a:
            return ""
        return f"{a['agent']} " + ("EXITED" if a["problem"] else a["state"])

    rows = [(t["id"], t["state"], t["batch"], t["session"], claim(t), agent(t),
             ", ".join(t["grants"])) for t in d["tasks"]]
    out = [table(rows, ("task", "state", "batch", "session", "claim", "agent", "grants"))
           if rows else "no tasks"]
    for t in d["tasks"]:
        a = t.get("agent")
        if a and a["problem"]:
            out.append(f"{t['id']}: {a['problem']} ({a['agent']}, pid {a['pid']}); "
                       f"coord stop {t['id']} releases the claim; log {a['log']}:")
            out += [f"    {line}" for line in a["log_tail"].split("\n") if line]
    placed = [(t["id"], p) for t in d["tasks"] for p in t.get("places", [])]
    if placed:
        from hunkwise.shared.hunks.places import place_text

        out.append("line grants (HEAD: as granted; tree: where those lines are now):")
        out += [f"  {tid}  {place_text(p)}" for tid, p in placed]
    return out


def _status_text(d: StatusResult) -> str:
    """`coord status` as text: the tasks, then the batch's and the tree's state."""
    out = _tasks_text(d)
    if d.get("hidden_tasks"):
        out.append(f"({d['hidden_tasks']} finished task(s) of earlier batches: coord status --all)")
    fz = d["freeze"]
    if fz:
        age = time.time() - fz["at"]
        out.append(f"freeze: batch {fz['batch']} at {fz['commit'] and fz['commit'][:12]} "
                   f"by {fz['by']}, {age / 60:.0f} min ago (coord thaw lifts it)")
    else:
        out.append("freeze: none")
    out.append(f"inbox: {d['inbox']['pending']} pending")
    if d["decisions_open"] or d["interventions"]:
        out.append(f"decisions: {d['decisions_open']} open; human interventions this batch: "
                   f"{d['interventions']}")
    for u in d["unowned"]:
        out.append(f"unowned: {u['path']} ({u['kind']}{', lines ' + u['lines'] if u['lines'] else ''})")
    for c in d["conflicts"]:
        where = f" lines {c['lines']}" if c["lines"] else ""
        out.append(f"conflict: {c['path']}{where} between {', '.join(c['tasks'])}")
    for a in d.get("ambiguous", []):
        out.append(f"ambiguous: {a['path']} lines {a['lines']} could be "
                   f"{' or '.join(a['tasks'])}'s (committed only for the one whose report "
                   "alone claims it)")
    for lost in d["lost"]:
        out.append(f"lost: {lost['task']}'s recorded changes are gone from "
                   f"{', '.join(lost['paths'])} (coord restore {lost['task']})")
    for tid in d.get("reports_gone", []):
        out.append(f"report gone: {tid}'s newest report is no longer in the inbox (removed?); "
                   f"its edits are in the tree: ask its worker to run `worker done {tid}` again")
    for ev in d.get("events", [])[-5:]:
        out.append(f"event {ev['at']}: {ev['kind']}: {ev['path']}")
    if d["index_dirty"]:
        from hunkwise.coordinator.validation import staged_text

        out.append(f"index: staged by someone else: {staged_text(d['staged'])} (nothing "
                   "can be accepted until they are unstaged: git restore --staged -- PATH...)")
    for sm in d.get("submodules", []):
        what = " and ".join(w for w, on in (("modified files", sm["modified"]),
                                            ("untracked files", sm["untracked"])) if on)
        out.append(f"submodule: {sm['path']} holds {what} inside it; hunkwise sees only "
                   "its pointer: commit inside the submodule (its own repository)")
    if d.get("settings_problem"):
        out.append(f"problem: {d['settings_problem']}")
    if d.get("config_differs"):
        out.append("warning: coord.toml in the working tree differs from HEAD's; settings "
                   "come from HEAD until the edit is committed")
    return "\n".join(out)


# ---- the inbox -------------------------------------------------------------------------

@cli.command(name="inbox")
@common
def inbox_cmd(as_json: bool, repo: str | None) -> None:
    """Pending reports, oldest first."""
    from hunkwise.coordinator import review

    doc = review.list_inbox(_ctx(repo))

    def human(d: InboxResult) -> str:
        # An audit verdict is not a work report: say which is which.
        rows = [(r["task_id"], r.get("kind", "report") + (f" ({r['role']})" if r.get("role") else ""),
                 r["status"], clip(r["title"], 40),
                 f"{r['checks_passed']}/{r['checks_total']}", f"{r['age_s']:.0f}s")
                for r in d["reports"]]
        return (table(rows, ("task", "kind", "status", "title", "checks", "age"))
                if rows else "inbox empty")

    emit(doc, as_json, human)


def _findings_text(v: Validation) -> str:
    lines = ["validation: ok" if v["ok"] else "validation: NOT ok"]
    for f in v["findings"]:
        where = f" {f['path']}:" if f.get("path") else ""
        lines.append(f"  - {f['code']}:{where} {f['detail']}")
    for f in v.get("warnings") or []:
        where = f" {f['path']}:" if f.get("path") else ""
        lines.append(f"  warning {f['code']}:{where} {f['detail']}")
    return "\n".join(lines)


def _contract_text(r: ReportDoc) -> str:
    """A report as the coordinator reads it. Every value a worker wrote goes through
    `one_line`: its own line breaks cannot forge a line of this output."""
    o = one_line
    if r.get("kind") == "review":
        return (f"{o(r['task_id'])} r{r['revision']} audit by {o(r['role'])}: {o(r['verdict'])}\n"
                f"  notes:   {o(r['summary'])}\n  session: {o(r['session'])}")
    lines = [f"{o(r['task_id'])} r{r['revision']} [{o(r['status'])}] {o(r['title'])}",
             f"  expect:  {o(r['expect'])}",
             f"  session: {o(r['session'])}"]
    if r.get("summary"):
        lines.append(f"  summary: {o(r['summary'])}")
    if r.get("reason"):
        lines.append(f"  reason:  {o(r['reason'])}")
    if r.get("checks_skipped"):
        lines.append("  checks:  SKIPPED (--no-run-checks)")
    for c in r["changes"]:
        spans = ", ".join(_lines(h) for h in c["hunks"][:6])
        more = f" (+{len(c['hunks']) - 6})" if len(c["hunks"]) > 6 else ""
        lines.append(f"  {c['kind']:<9}{o(c['path'])}  {spans}{more}")
    for ck in r["checks"]:
        lines.append(f"  check {'pass' if ck['passed'] else 'FAIL'} ({ck['duration_s']:.2f}s): {o(ck['command'])}")
    for u in r["unfinished"]:
        lines.append(f"  unfinished: {o(u)}")
    for ov in r["overlaps"][:10]:
        lines.append(f"  overlap: {o(ov['path'])}: {o(ov['note'])}")
    lines.append(f"  commit:  {o(r['proposed_commit']['subject'])}")
    return "\n".join(lines)


def _lines(h: HunkDoc) -> str:
    """A hunk as people count lines: `lines 135-137`, `after line 12` for an insertion."""
    if h["old_lines"] == 0:
        return f"+{h['new_lines']} after line {h['old_start']}"
    end = h["old_start"] + h["old_lines"] - 1
    span = f"line {h['old_start']}" if end == h["old_start"] else f"lines {h['old_start']}-{end}"
    return span + (f" -> {h['new_lines']}" if h["new_lines"] != h["old_lines"] else "")


@cli.command(name="next")
@click.option("--diff", "with_diff", is_flag=True, help="Also print the patch accept would commit.")
@click.option("--full", is_flag=True,
              help="The whole review contract (expectation, every check, every hunk), not "
                   "only what the coordinator does not already know.")
@common
def next_cmd(with_diff: bool, full: bool, as_json: bool, repo: str | None) -> None:
    """Safe checkpoint: take the oldest pending report, validate it, print its contract."""
    from hunkwise.coordinator import review

    ctx = _ctx(repo)
    _autosync(ctx)
    doc = review.next_report(ctx)
    n = doc["next"]
    if with_diff and n is not None and n["report"].get("kind") != "review":
        from hunkwise.shared.diffview import task_diff

        doc["diff"] = task_diff(ctx, n["report"]["task_id"])

    def human(d: NextResult) -> str:
        if d["next"] is None:
            return "inbox empty"
        n = d["next"]
        if not full:
            text = review.next_text(d, _findings_text(n["validation"]))
            return text + ("\n" + d["diff"]["patch"] if d.get("diff") else "")
        audit = n.get("audit") or {}
        verdicts = ("audit: " + ", ".join(f"{r} {v}" for r, v in sorted(audit.items())) + "\n"
                    if audit else "")
        from hunkwise.shared.hunks.places import place_text

        where = "".join(f"  grant {place_text(p)}\n" for p in n.get("places", []))
        text = (f"{_contract_text(n['report'])}\n{where}{verdicts}"
                f"{_findings_text(n['validation'])}\n({d['pending']} more pending)")
        return text + ("\n" + d["diff"]["patch"] if d.get("diff") else "")

    emit(doc, as_json, human, paint=paint_diff if with_diff else None)


@cli.command(name="diff")
@click.argument("task_id")
@click.option("--stat", is_flag=True, help="A summary per file instead of the patch.")
@click.option("--from-snapshot", "from_snapshot", is_flag=True,
              help="From the newest report's snapshot (any synced machine's), not the tree; "
                   "automatic for a task another machine coordinates.")
@common
def diff_cmd(task_id: str, stat: bool, from_snapshot: bool, as_json: bool, repo: str | None) -> None:
    """Exactly the patch `coord accept ID` would commit now."""
    from hunkwise.shared.diffview import snapshot_diff, task_diff
    from hunkwise.shared.machines.chains import is_mirrored

    ctx = _ctx(repo)
    if from_snapshot or is_mirrored(ctx, task_id):
        doc = snapshot_diff(ctx, task_id, stat=stat)
    else:
        doc = task_diff(ctx, task_id, stat=stat)

    def human(d: DiffResult) -> str:
        from hunkwise.shared.hunks.places import place_text

        # Before the patch, as text git apply and patch skip: where the grants stand.
        where = "".join(f"# {place_text(p)}\n" for p in d.get("places", []))
        if not d["files"]:
            return f"{where}{task_id}: no changes to commit"
        return where + str(d["stat"] if stat else d["patch"])

    emit(doc, as_json, human, paint=paint_diff, pager=True)


@cli.command(name="review")
@click.argument("task_id")
@common
def review_cmd(task_id: str, as_json: bool, repo: str | None) -> None:
    """Validate a task's newest report: exit 0 valid, 1 not."""
    from hunkwise.coordinator import review

    doc = review.review(_ctx(repo), task_id)
    emit(doc, as_json, lambda d: f"{task_id} r{d['revision']}: {_findings_text(d)}")
    if not doc["ok"]:
        raise click.exceptions.Exit(1)


@cli.command(name="grant")
@click.argument("task_id")
@click.option("--write", "writes", multiple=True, required=True, metavar="GRANT",
              help="GLOB or PATH:START-END (or PATH:N). Repeatable.")
@common
def grant_cmd(task_id: str, writes: tuple[str, ...], as_json: bool, repo: str | None) -> None:
    """Widen an active task's grants (same ownership rules as assign)."""
    from hunkwise.coordinator import tasks

    doc = tasks.grant(_ctx(repo), task_id, list(writes))
    emit(doc, as_json, lambda d: f"{task_id} now holds {', '.join(d['task']['grants'])}")


@cli.command(name="commit")
@click.argument("paths", nargs=-1, required=True)
@click.option("-m", "--message", required=True, metavar="MSG", help="The commit message.")
@common
def commit_cmd(paths: tuple[str, ...], message: str, as_json: bool, repo: str | None) -> None:
    """Commit the coordinator's own files (never a file a task holds)."""
    from hunkwise.coordinator.commit import commit_own

    doc = commit_own(_ctx(repo), list(paths), message)
    emit(doc, as_json, lambda d: f"committed {d['commit']}: {', '.join(d['paths'])}")


# ---- verdicts ----------------------------------------------------------------------------

@cli.command()
@click.argument("task_id")
@click.option("--message", default=None, metavar="M", help="Commit message instead of the report's.")
@click.option("--recheck/--no-recheck", default=None,
              help="Run the task's checks on HEAD + exactly its changes first ([accept] recheck).")
@common
def accept(task_id: str, message: str | None, recheck: bool | None, as_json: bool,
           repo: str | None) -> None:
    """Validate, then commit exactly the task's changes; print the commit id."""
    from hunkwise.coordinator import accept as core

    doc = core.accept(_ctx(repo), task_id, message=message, recheck=recheck)
    emit(doc, as_json, lambda d: "\n".join(
        core.recheck_lines(d["recheck"]["checks"])
        + [f"{d['commit']}  {task_id}: {len(d['paths'])} path(s)"]))


@cli.command(name="request-changes")
@click.argument("task_id")
@click.option("--note", required=True, help="What to change; the worker sees it at start.")
@click.option("--relaunch/--no-relaunch", default=None,
              help="Start the task's launched agent again, the note first in its prompt "
                   "([launch] relaunch).")
@common
def request_changes(task_id: str, note: str, relaunch: bool | None, as_json: bool,
                    repo: str | None) -> None:
    """Send the task back to its worker with a note (a CHANGES_REQUESTED signal)."""
    from hunkwise.coordinator import outcomes

    doc = outcomes.request_changes(_ctx(repo), task_id, note, relaunch=relaunch)
    emit(doc, as_json, lambda d: f"{task_id}: changes requested" + "".join(
        f"; relaunched {a['agent']} (pid {a['pid']})"
        for a in (d.get("relaunched") or {"launched": []})["launched"]))


@cli.command()
@click.argument("task_id")
@click.option("--note", required=True, help="Why.")
@click.option("--discard", is_flag=True, help="Also remove exactly the task's changes from the tree.")
@common
def reject(task_id: str, note: str, discard: bool, as_json: bool, repo: str | None) -> None:
    """Reject a task; its grants are released."""
    from hunkwise.coordinator import outcomes

    doc = outcomes.reject(_ctx(repo), task_id, note, discard)
    emit(doc, as_json, lambda d: f"{task_id}: rejected"
         + (f"; discarded {', '.join(d['discarded'])}" if d["discarded"] else ""))


@cli.command()
@click.argument("task_id")
@common
def defer(task_id: str, as_json: bool, repo: str | None) -> None:
    """Move a task to the next batch; its grants and edits stay."""
    from hunkwise.coordinator import outcomes

    doc = outcomes.defer(_ctx(repo), task_id)
    emit(doc, as_json, lambda d: f"{task_id}: deferred to batch {d['task']['batch']}")


@cli.command()
@click.argument("task_id")
@common
def revert(task_id: str, as_json: bool, repo: str | None) -> None:
    """Commit the exact inverse of an accepted task's commit."""
    from hunkwise.coordinator import revert as core

    doc = core.revert(_ctx(repo), task_id)
    emit(doc, as_json, lambda d: f"{d['commit']}  reverts {d['reverts'][:12]} ({task_id})"
         + (f"; uncommitted edits kept in {', '.join(d['tree_left'])}" if d["tree_left"] else ""))


# ---- the session index -------------------------------------------------------------------

@cli.command()
@click.argument("task_id")
@click.option("--note", default="", help="Added to the retroactive handoff.")
@common
def recover(task_id: str, note: str, as_json: bool, repo: str | None) -> None:
    """Free a stale claim with a retroactive handoff; the task goes back to assigned."""
    from hunkwise.coordinator import sessions

    doc = sessions.recover(_ctx(repo), task_id, note)

    def human(d: RecoverResult) -> str:
        if d.get("released_reservation"):
            return f"{task_id}: handoff to {d['released_reservation']} released"
        assert d["handoff"] is not None  # a recovery writes its retroactive handoff
        return (f"{task_id}: recovered from {d['stale_session']}; "
                f"files: {', '.join(d['handoff']['files']) or 'none'}")

    emit(doc, as_json, human)


@cli.command(name="signals")
@click.option("--pending", "pending_only", is_flag=True, help="Only pending signals.")
@click.option("--ack", "ack", multiple=True, metavar="ID|all",
              help="Acknowledge a signal addressed to the coordinator (repeatable; 'all' for "
                   "every pending one).")
@common
def signals_cmd(pending_only: bool, ack: tuple[str, ...], as_json: bool, repo: str | None) -> None:
    """Every signal between sessions; --ack closes those addressed to the coordinator."""
    from hunkwise.coordinator import sessions

    doc = sessions.signals(_ctx(repo), pending_only=pending_only, ack=list(ack))

    def human(d: CoordSignalsResult) -> str:
        head = f"acknowledged: {', '.join(d['acked']) or 'nothing'}\n" if "acked" in d else ""
        body = (table([(s["id"], s["from"], s["to"], s["type"], s["about"],
                        clip(s["payload"], 40), s["state"]) for s in d["signals"]],
                      ("id", "from", "to", "type", "about", "payload", "state"))
                if d["signals"] else "no signals")
        return head + body

    emit(doc, as_json, human)


@cli.command()
@click.argument("task_id")
@click.option("--roles", required=True, help="Comma-separated roles, e.g. review,security,test.")
@common
def audit(task_id: str, roles: str, as_json: bool, repo: str | None) -> None:
    """Ask reviewers of several roles; accept waits for every approval."""
    from hunkwise.coordinator import sessions

    doc = sessions.audit(_ctx(repo), task_id, roles.split(","))
    emit(doc, as_json, lambda d: f"{task_id}: audit requested from {', '.join(d['audit'])}")


@cli.command()
@click.option("--all", "include_answered", is_flag=True, help="Include answered decisions.")
@common
def decisions(include_answered: bool, as_json: bool, repo: str | None) -> None:
    """Decisions waiting for the human supervisor."""
    from hunkwise.coordinator import decisions as core

    doc = core.decisions(_ctx(repo), include_answered=include_answered)
    emit(doc, as_json, lambda d: (table([(x["id"], x["task"], x["kind"], x["state"],
                                          clip(x["question"], 50), x["answer"])
                                         for x in d["decisions"]],
                                        ("id", "task", "kind", "state", "question", "answer"))
                                  if d["decisions"] else "no open decisions")
         + f"\ninterventions this batch: {d['interventions']}")


@cli.command()
@click.argument("decision_id")
@click.option("--answer", required=True, help="The supervisor's answer.")
@click.option("--relaunch/--no-relaunch", default=None,
              help="A task blocked on it: start its launched agent again with the answer "
                   "([launch] relaunch).")
@common
def decide(decision_id: str, answer: str, relaunch: bool | None, as_json: bool,
           repo: str | None) -> None:
    """Answer a decision; the asking worker sees it in worker signals."""
    from hunkwise.coordinator import decisions

    doc = decisions.decide(_ctx(repo), decision_id, answer, relaunch=relaunch)
    emit(doc, as_json, lambda d: f"{decision_id}: answered" + (
        f"; {d['reopened']} was blocked on it and can start again (worker start "
        f"{d['reopened']})" if d.get("reopened") else "") + "".join(
        f"; relaunched {a['agent']} on {a['task']} (pid {a['pid']})"
        for a in (d.get("relaunched") or {"launched": []})["launched"]))


@cli.command(name="index")
@click.option("--output", default=None, is_flag=False, flag_value="", metavar="[FILE]",
              help="Also write the Markdown to FILE; alone, to SESSIONS.md in the state "
                   "directory (a file inside the working tree is git-excluded).")
@click.option("--all", "everything", is_flag=True, help="Every signal, not only pending ones.")
@common
def index_cmd(output: str | None, everything: bool, as_json: bool, repo: str | None) -> None:
    """Render the session index (claims, stale claims, pending signals) as Markdown."""
    from hunkwise.coordinator import sessions

    doc = sessions.index(_ctx(repo), output, everything=everything)
    emit(doc, as_json, lambda d: d["markdown"])
    if doc["output"] and not as_json:  # stdout is the Markdown: where it went, on stderr
        sys.stderr.write(f"wrote the index to {doc['output']}\n")


# ---- launched agents ----------------------------------------------------------------------

@cli.command()
@click.argument("task_ids", nargs=-1, required=True, metavar="ID...")
@click.option("--agent", required=True, metavar="claude|codex|demo|NAME",
              help="A built-in profile or an [agents.NAME] of coord.toml.")
@click.option("--tmux/--no-tmux", default=None,
              help="In a tmux window (default when tmux is on PATH) or a background process.")
@common
def launch(task_ids: tuple[str, ...], agent: str, tmux: bool | None, as_json: bool,
           repo: str | None) -> None:
    """Start one detached agent per task, the task claimed for a new session."""
    from hunkwise.coordinator import launch as core

    doc = core.launch(_ctx(repo), list(task_ids), agent=agent, tmux=tmux)
    emit(doc, as_json, lambda d: "\n".join(
        f"{a['task']}: {a['agent']} started as {a['session']} (pid {a['pid']}"
        + (f", tmux {a['tmux']}: coord attach {a['task']}" if a["tmux"] else f", log {a['log']}")
        + ")" for a in d["launched"]))


@cli.command()
@click.argument("task_id")
@click.option("--note", default="", help="Added to the retroactive handoff.")
@common
def stop(task_id: str, note: str, as_json: bool, repo: str | None) -> None:
    """End a launched agent's process group and release its claim with a handoff."""
    from hunkwise.coordinator import launch as core

    doc = core.stop(_ctx(repo), task_id, note)
    emit(doc, as_json, lambda d: f"{task_id}: "
         + ("agent stopped" if d["stopped"] else "agent had exited already")
         + ("; claim released with a retroactive handoff (coord launch or worker start "
            f"{task_id} resumes it)" if d["released"] else ""))


@cli.command()
@click.argument("task_id")
@common
def attach(task_id: str, as_json: bool, repo: str | None) -> None:
    """Open the tmux window of a task's launched agent (--json: print the command)."""
    import os

    from hunkwise.coordinator import launch as core

    argv = core.attach_argv(_ctx(repo), task_id)
    if as_json:
        emit({"task": task_id, "command": argv}, True, str)
        return
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}  # from inside tmux too
    os.execvpe(argv[0], argv, env)


# ---- protection and recovery ---------------------------------------------------------------

@cli.command()
@click.argument("task_id")
@common
def restore(task_id: str, as_json: bool, repo: str | None) -> None:
    """Put a task's reported changes back into the tree after something destroyed them."""
    from hunkwise.coordinator import restore as recover

    doc = recover.restore(_ctx(repo), task_id)
    emit(doc, as_json, lambda d: f"{task_id}: restored {', '.join(d['restored'])}"
         if d["restored"] else f"{task_id}: nothing was missing")


@cli.command(name="discard")
@click.argument("target", required=False, metavar="PATH[:START-END]")
@click.option("--undo", default=None, metavar="REF",
              help="Put back what an earlier discard removed (its refs/hunkwise/discarded/N).")
@common
def discard_cmd(target: str | None, undo: str | None, as_json: bool, repo: str | None) -> None:
    """Remove the unowned changes of a path (or of its lines) from the tree, restorably."""
    from hunkwise.coordinator import discard as core
    from hunkwise.shared.errors import UsageError

    if (target is None) == (undo is None):
        raise UsageError("give PATH[:START-END] to discard, or --undo REF to put a discard back")
    if undo is not None:
        undone = core.undo(_ctx(repo), undo)
        emit(undone, as_json, lambda d: f"put back {', '.join(d['restored'])} from {d['ref']}")
        return
    assert target is not None
    doc = core.discard(_ctx(repo), target)

    def human(d: DiscardResult) -> str:
        out = [f"discarded {u['path']}" + (f" lines {u['lines']}" if u["lines"] else f" ({u['kind']})")
               for u in d["discarded"]] or [f"nothing unowned to discard in {d['target']}"]
        out += [f"kept {k['path']}" + (f" lines {k['lines']}" if k["lines"] else "")
                + f": {k['reason']}" for k in d["kept"]]
        if d["ref"]:
            out.append(f"saved as {d['ref']}: see it with git diff {d['ref']}^ {d['ref']}; "
                       f"undo with {d['undo']}")
        return "\n".join(out)

    emit(doc, as_json, human)


@cli.command(name="install-hooks")
@click.option("--agent", "agents", multiple=True, metavar="NAME",
              help="Also install the agent guard: claude (.claude/settings.local.json) or "
                   "codex (.codex/hooks.json, skills in .agents/skills). Repeatable.")
@common
def install_hooks(agents: tuple[str, ...], as_json: bool, repo: str | None) -> None:
    """Refuse commits and moves of HEAD, branches and refs/stash by anyone but the coordinator."""
    from hunkwise.coordinator import hooks

    doc = hooks.install_hooks(_ctx(repo), agents)
    emit(doc, as_json, lambda d: "installed: " + ", ".join(d["hooks"])
         + (f"\nchained existing: {', '.join(d['chained'])}" if d["chained"] else "")
         + "".join(f"\n{name} hook: {a['hook']}" + "".join(f"\n{name} skill: {s}"
                                                          for s in a.get("skills", []))
                   for name, a in d.get("agents", {}).items())
         + "".join(f"\nnote: {n}" for n in d.get("notes", [])))


@cli.command(name="uninstall-hooks")
@common
def uninstall_hooks(as_json: bool, repo: str | None) -> None:
    """Remove hunkwise's hooks and put back the hooks they chained."""
    from hunkwise.coordinator import hooks

    doc = hooks.uninstall_hooks(_ctx(repo))
    emit(doc, as_json, lambda d: f"removed {len(d['removed'])} hook(s)"
         + (f"; restored {', '.join(d['restored'])}" if d["restored"] else ""))


@cli.command()
def guard() -> None:
    """Agent hook (Claude Code, Codex PreToolUse): read the tool call on stdin, exit 2 to block."""
    from hunkwise.coordinator import guard as agent_guard

    code, message = agent_guard.guard(sys.stdin.buffer.read().decode("utf-8", "replace"))
    if message:
        sys.stderr.write(message + "\n")
    raise click.exceptions.Exit(code)


@cli.command()
@click.option("--timeout", type=float, default=None, metavar="S", help="Stop after S seconds.")
@click.option("--interval", type=float, default=5.0, show_default=True, metavar="S",
              help="Rescan the inbox at least this often.")
@common
def watch(timeout: float | None, interval: float, as_json: bool, repo: str | None) -> None:
    """Watch the inbox and the tree; notify on reports, record writes outside grants."""
    from hunkwise.coordinator import watch as core

    doc = core.watch(_ctx(repo), timeout=timeout, interval=max(0.1, interval))
    emit(doc, as_json, lambda d: f"watched: {len(d['notified'])} report(s), {len(d['events'])} event(s)")


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback needs --token.")
@click.option("--port", type=int, default=8765, show_default=True, help="0 picks a free port.")
@click.option("--token", envvar="HUNKWISE_BOARD_TOKEN", default=None, metavar="T",
              help="Access token every request must carry (env HUNKWISE_BOARD_TOKEN).")
@click.option("--timeout", type=float, default=None, metavar="S", help="Stop after S seconds.")
@common
def board(host: str, port: int, token: str | None, timeout: float | None, as_json: bool,
          repo: str | None) -> None:
    """Serve a live page of the state; decisions can be answered from it."""
    from hunkwise.coordinator import board as core

    doc = core.serve(_ctx(repo), host=host, port=port, token=token, timeout=timeout)
    emit(doc, as_json, lambda d: f"board stopped: served {d['requests']} request(s)")


# ---- release freeze ----------------------------------------------------------------------

@cli.command()
@click.option("--defer-running", is_flag=True, help="Move in-progress tasks to the next batch.")
@common
def freeze(defer_running: bool, as_json: bool, repo: str | None) -> None:
    """Close the batch: stop worker mutations and record the frozen set."""
    from hunkwise.coordinator import freeze as core

    doc = core.freeze(_ctx(repo), defer_running=defer_running)

    def human(d: FreezeResult) -> str:
        f = d["freeze"]
        head = "already frozen" if d["already"] else "frozen"
        deferred = f"; deferred {', '.join(f['deferred'])}" if f["deferred"] else ""
        return f"{head}: batch {f['batch']} at {f['commit']}{deferred}"

    emit(doc, as_json, human)


@cli.command()
@click.option("--junit", default=None, metavar="FILE", help="Also write a JUnit XML record.")
@click.option("--dry", is_flag=True,
              help="Run the commands on HEAD without a freeze; refuse nothing, record nothing.")
@click.option("--bisect/--no-bisect", default=None,
              help="When the frozen set fails, find the batch's first task commit that fails "
                   "([verify] bisect).")
@common
def verify(junit: str | None, dry: bool, bisect: bool | None, as_json: bool,
           repo: str | None) -> None:
    """Run [verify] commands on exactly the frozen commit, in a clean checkout."""
    from hunkwise.coordinator import freeze as core

    if dry and bisect:
        raise click.UsageError("--bisect needs a frozen batch; --dry has none")
    doc = core.verify(_ctx(repo), junit=junit, dry=dry, bisect=bisect)

    def human(d: VerifyResult) -> str:
        lines = [f"{'pass' if c['exit_code'] == 0 else 'FAIL'}  {c['duration_s']:7.2f}s  {c['command']}"
                 for c in d["commands"]]
        lines += [f"problem: {p}" for p in d["problems"]]
        for e in d.get("deferred_edits", []):
            lines.append(f"note: deferred task {e['task']} edited its own grant during the "
                         f"freeze ({', '.join(e['paths'])}); the frozen commit is unaffected")
        if not d["ok"] and not d.get("dry"):
            lines.append(f"batch {d['batch']}: accepted tasks "
                         f"{', '.join(d.get('tasks', [])) or '(none)'}")
        if not d["ok"]:
            setup = d.get("setup")
            for c in d["commands"] + ([setup] if setup else []):
                if c["exit_code"] != 0 and c.get("output_tail"):
                    lines.append(f"--- output tail of {c['command']!r}:")
                    lines += [f"    {line}" for line in c["output_tail"].split("\n")[-15:]]
        b = d.get("bisect")
        if b is not None:
            for p in b["ran"]:
                lines.append(f"bisect: ran {p['command']!r} on {p['task'] or '?'}"
                             f"{' alone on the base' if p['alone'] else ''} "
                             f"({p['commit'][:12]}): {'pass' if p['passed'] else 'FAIL'} "
                             f"in {p['duration_s']:.1f}s")
            lines.append(f"bisect: culprit {b['culprit'] or '(none)'}"
                         + (f" ({b['commit'][:12]})" if b["commit"] else "") + f": {b['note']}")
        lines.append(f"verify{' --dry' if d.get('dry') else ''} "
                     f"{'ok' if d['ok'] else 'FAILED'}: {d['commit']}")
        return "\n".join(lines)

    emit(doc, as_json, human)
    if not doc["ok"]:
        raise click.exceptions.Exit(1)


@cli.command()
@common
def thaw(as_json: bool, repo: str | None) -> None:
    """Lift the freeze; deferred tasks become startable in the new batch."""
    from hunkwise.coordinator import freeze as core

    doc = core.thaw(_ctx(repo))
    emit(doc, as_json, lambda d: (f"thawed: batch {d['batch']} open" if d["thawed"] else "not frozen")
         + (f"; startable again: {', '.join(d['reopened'])}" if d["reopened"] else ""))


@cli.command()
@common
def mcp(as_json: bool, repo: str | None) -> None:
    """Serve the coordinator's reading commands over MCP on stdio (the mcp extra)."""
    from hunkwise.coordinator import mcpserver

    ctx = _ctx(repo)
    mcpserver.server_class()  # exit 2 before anything when the SDK is missing
    mcpserver.serve(ctx.repo)


cli.add_command(sync_command())


def main(argv: Sequence[str] | None = None) -> int:
    """Run `coord` with `argv` (default: the process's arguments); return the exit code."""
    return run(cli, "coord", argv)


def entry() -> None:
    exit_process(main())
