"""What both CLIs share: the common options and the one error handler.

Core code raises `CoordError` subclasses carrying the contract's exit codes and never
prints; `run` turns them, click's usage errors and unexpected failures into one line on
stderr (or one `{"error": ...}` document with `--json`) and the exit code. `--json` is
read from click's own parsing (an eager callback), so an option value that happens to be
the text "--json" never switches the output format (only a usage error that stops click
before it reads `--json` falls back to looking for the token).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import click
from hunkwise.shared.errors import CoordError, UsageError
from hunkwise.shared.output import fail

_json_seen = False


def _remember_json(_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    global _json_seen
    _json_seen = _json_seen or bool(value)
    return value


def _repo_or_group(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A command's `--repo`, else the one given before the command name
    (`coord --repo PATH status`, SPEC: "Commands")."""
    if value is not None:
        return value
    parent = ctx.parent
    while parent is not None:
        if parent.params.get("repo") is not None:
            return str(parent.params["repo"])
        parent = parent.parent
    return None


def _set_color(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        from hunkwise.shared import output

        output.set_color(value)
    return value


_COLOR_HELP = "Colour on a terminal: auto (default; NO_COLOR turns it off), always, never."


def color_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--color", type=click.Choice(["auto", "always", "never"]),
                        default=None, expose_value=False, is_eager=True, callback=_set_color,
                        help=_COLOR_HELP)(f)


def common(f: Callable[..., Any]) -> Callable[..., Any]:
    """`--repo` and `--json`, which every command takes (SPEC: "Commands"), and `--color`."""
    f = color_option(f)
    f = click.option("--repo", "repo", default=None, metavar="PATH", callback=_repo_or_group,
                     help="Repository (default: the git top level of the current directory).")(f)
    f = click.option("--json", "as_json", is_flag=True, is_eager=True, callback=_remember_json,
                     help="Print one JSON document.")(f)
    return f


def group_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """What a command line may give before the command name: `--repo PATH`, `--color`."""
    f = color_option(f)
    return click.option("--repo", "repo", default=None, metavar="PATH",
                        help="Repository for the command (also accepted after its name).")(f)


class WorkflowGroup(click.Group):
    """A group whose help lists its commands by workflow, in the order people use them,
    each with its first line in full, then the examples of the group's epilog.

    `sections` names the commands of each workflow; a command no section names (one added
    later) is listed under "other", so nothing registered is ever hidden from the help.
    """

    sections: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def list_commands(self, ctx: click.Context) -> list[str]:
        # Completion and `--help` follow the workflow order too.
        named = [n for _title, names in self.sections for n in names if n in self.commands]
        return named + sorted(n for n in self.commands if n not in named)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        placed: set[str] = set()
        groups: list[tuple[str, list[str]]] = []
        for title, names in self.sections:
            here = [n for n in names if n in self.commands and not self.commands[n].hidden]
            placed.update(here)
            if here:
                groups.append((title, here))
        rest = sorted(n for n, c in self.commands.items() if n not in placed and not c.hidden)
        if rest:
            groups.append(("other", rest))
        width = max((len(n) for _t, ns in groups for n in ns), default=0)
        for title, listed in groups:
            rows = [(n, self.commands[n].get_short_help_str(limit=200)) for n in listed]
            with formatter.section(title):
                formatter.write_dl(rows, col_max=max(width, 10))

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.epilog:  # examples: printed as written, never re-wrapped
            formatter.write("\n" + self.epilog.strip("\n") + "\n")


def version_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.version_option(package_name="hunkwise", message="%(prog)s %(version)s")(f)


def run(group: click.Group, prog: str, argv: Sequence[str] | None = None) -> int:
    """Run one command line in this process and return its exit code."""
    global _json_seen
    _json_seen = False
    from hunkwise.shared import output

    output.set_color("auto")  # in-process runs (tests) start from the default each time
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(group, prog, args)
    finally:
        from hunkwise.shared import git

        git.close_readers()


def _run(group: click.Group, prog: str, args: list[str]) -> int:
    try:
        rv = group.main(args=args, standalone_mode=False, prog_name=prog)
        return rv if isinstance(rv, int) else 0
    except CoordError as e:
        return fail(e, _json_seen, prog)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        fail(CoordError("interrupted"), _json_seen, prog)
        return 130
    except click.ClickException as e:
        # A usage error can stop click before it parses `--json`: then the token decides.
        as_json = _json_seen or "--json" in args
        if not as_json:
            e.show()
            return e.exit_code
        return fail(UsageError(e.format_message()), as_json, prog)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0  # the reader went away (`coord status | head`): nothing left to say
    except Exception as e:  # noqa: BLE001 - a bug: say so in one line, keep the trace on stderr
        import traceback

        traceback.print_exc()
        return fail(CoordError(f"internal error: {type(e).__name__}: {e}"), _json_seen, prog)


def exit_process(code: int) -> None:
    """End a CLI process: skip the collector's last sweep over every object the command
    made, which costs more than most commands' own work."""
    import gc

    gc.freeze()
    sys.exit(code)


def sync_command() -> click.Command:
    """`coord sync` and `worker sync`: one command, the same on both sides."""

    @click.command(name="sync")
    @click.option("--remote", default=None, metavar="NAME",
                  help="Git remote (default: [remote] name).")
    @common
    def sync_cmd(remote: str | None, as_json: bool, repo: str | None) -> None:
        """Push this machine's refs/hunkwise/ records and fetch and apply the others'."""
        from hunkwise.shared.machines import sync
        from hunkwise.shared.output import emit
        from hunkwise.shared.state.context import open_repo

        doc = sync.sync(open_repo(repo), remote)
        sync.warn(doc["warnings"])
        emit(doc, as_json, sync.sync_text)

    return sync_cmd
