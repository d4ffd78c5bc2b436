"""How hunkwise runs git, at its lightest: the pinned configuration and environment the
door (`shared/git`) gives every git process, and a runner for the agent hooks.

The hooks start a process on every tool call of every agent; a worker's shell call runs
`git status` before and after it. The door's own imports (subprocess, pathlib, typing)
cost such a call some 25 ms; `run` here starts git with `os.posix_spawnp` and reads its
output through pipes, importing nothing heavy: the same command, pins and environment.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Configuration that would otherwise leak into plumbing output or trigger side effects.
CONFIG_PINS: tuple[str, ...] = (
    "-c", "core.quotePath=false",
    "-c", "color.ui=never",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "core.fsmonitor=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    # Commit messages are UTF-8 text; a user's legacy encoding would mislabel them.
    "-c", "i18n.commitEncoding=UTF-8",
)
# Variables of the user's that would change which repository, index or program git uses.
_DROPPED = ("GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_PAGER", "PAGER", "GIT_INDEX_FILE",
            "GIT_DIR", "GIT_WORK_TREE", "GIT_PREFIX")


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git process hunkwise starts: no prompt, no optional locks
    (a read never rewrites the index under a worker), the C locale."""
    env = dict(os.environ)
    for key in _DROPPED:
        env.pop(key, None)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    if extra:
        env.update(extra)
    return env


def run(repo: str, *args: str) -> bytes:
    """`git ARGS` in `repo`, its standard input empty: its standard output; GitError (with
    its error output) when it fails."""
    spawn = getattr(os, "posix_spawnp", None)
    cmd = ["git", "-C", repo, *CONFIG_PINS, *args]
    if spawn is None:  # pragma: no cover - every POSIX system Python supports has it
        import subprocess

        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                              env=base_env())
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    else:
        code, out, err = _spawn(spawn, cmd)
    if code != 0:
        from hunkwise.shared.errors import GitError

        raise GitError(args, code, err)
    return out


def _spawn(spawn: Any, cmd: list[str]) -> tuple[int, bytes, bytes]:
    import _signal  # type: ignore[import-not-found]  # signal's C core: signal imports enum
    import select

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = spawn("git", cmd, base_env(),
                    file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                  (os.POSIX_SPAWN_DUP2, out_w, 1),
                                  (os.POSIX_SPAWN_DUP2, err_w, 2),
                                  (os.POSIX_SPAWN_CLOSE, out_r),
                                  (os.POSIX_SPAWN_CLOSE, err_r)],
                    # as subprocess does: the child gets back the signals Python ignores
                    setsigdef=[s for s in (getattr(_signal, n, None)
                                           for n in ("SIGPIPE", "SIGXFZ", "SIGXFSZ")) if s])
    except BaseException:
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        raise
    os.close(out_w)
    os.close(err_w)
    got: dict[int, list[bytes]] = {out_r: [], err_r: []}
    try:
        open_fds = [out_r, err_r]
        while open_fds:
            ready, _w, _x = select.select(open_fds, [], [])
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    got[fd].append(chunk)
                else:
                    open_fds.remove(fd)
    finally:
        os.close(out_r)
        os.close(err_r)
        _pid, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(got[out_r]), b"".join(got[err_r])
