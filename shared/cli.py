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


def common(f: Callable[..., Any]) -> Callable[..., Any]:
    """`--repo` and `--json`, which every command takes (SPEC: "Commands")."""
    f = click.option("--repo", "repo", default=None, metavar="PATH",
                     help="Repository (default: the git top level of the current directory).")(f)
    f = click.option("--json", "as_json", is_flag=True, is_eager=True, callback=_remember_json,
                     help="Print one JSON document.")(f)
    return f


def version_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.version_option(package_name="hunkwise", message="%(prog)s %(version)s")(f)


def run(group: click.Group, prog: str, argv: Sequence[str] | None = None) -> int:
    """Run one command line in this process and return its exit code."""
    global _json_seen
    _json_seen = False
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
