"""Errors that carry the exit codes of the product contract.

Core code raises these and never prints or exits; each CLI has one handler that turns them
into one line on stderr (or a JSON error document) and the exit code.
"""

from __future__ import annotations


class CoordError(Exception):
    """Base class: an error with an exit code."""

    exit_code = 2

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        # Lines that follow the one-line message on stderr (a failing check's output
        # tail, say); JSON carries them as "details".
        self.details = details


class CheckFailed(CoordError):
    """The check asked for is false (validation, checks, verify)."""

    exit_code = 1


class UsageError(CoordError):
    """Usage or bad input: unknown task, malformed id or grant, unreadable report."""

    exit_code = 2


class StateRefused(CoordError):
    """Refused by state: ownership conflict, frozen, wrong task state, live claim, lock timeout."""

    exit_code = 3


class GitError(CoordError):
    """A git command failed; the message shows the command, exit code and stderr."""

    exit_code = 2

    def __init__(self, args: tuple[str, ...], returncode: int, stderr: bytes) -> None:
        text = stderr.decode("utf-8", "replace").strip().splitlines()
        tail = text[-1] if text else "(no output)"
        super().__init__(f"git {' '.join(args[:4])}{' ...' if len(args) > 4 else ''} failed ({returncode}): {tail}")
        self.returncode = returncode
        self.stderr = stderr
