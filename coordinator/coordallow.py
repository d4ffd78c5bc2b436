"""Which `coord` commands a worker may run: those that only read."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

# `coord` commands a worker may run: they only read. `next` moves reports, `review` records
# a verdict, `status --send` notifies, `signals --ack` closes signals, `index --output`
# writes a file: the coordinator's.
COORD_READS = {"status", "inbox", "diff", "index", "signals", "decisions", "guard"}
_COORD_WRITING_OPTIONS = {"status": ("--send",), "signals": ("--ack",), "index": ("--output",)}


def coord_refusal(args: Sequence[str]) -> str | None:
    """Why a worker may not run `coord ARGS`, or None: the reading commands pass."""
    sub = next((a for a in args if not a.startswith("-")), "")
    if not sub or any(a in ("-h", "--help", "--version") for a in args):
        return None
    opts = _COORD_WRITING_OPTIONS.get(sub, ())
    if sub in COORD_READS and not any(a.split("=", 1)[0] in opts for a in args):
        return None
    return (f"coord {sub} is the coordinator's: a worker may run only the reading coord "
            f"commands ({', '.join(sorted(COORD_READS - {'guard'}))})")
