"""What judging a worker's shell line knows and shares: where it runs and what it writes
(`Scope`, `Write`), how a refusal is worded, which file a command name runs (git under
any name, a script, this installation's own commands), and the table of the programs the
guard knows.

The table is filled by coordinator/judges.py from the modules that judge each kind of
program (runners.py, builtins.py, filters.py, shellwrites.py); programs.py reads it. So
the modules import downward only: shell -> gitallow/codescan/wrappers -> scope ->
shellwrites -> programs -> runners/filters/builtins -> judges -> guard.
"""

from __future__ import annotations

import os

from hunkwise.coordinator.gitallow import DIRECT, Blocked
from hunkwise.coordinator.shell import Record, Simple, Word

TYPE_CHECKING = False
if TYPE_CHECKING:  # (no `typing`, `re` or `shutil` at run time: a hook call pays for each)
    from collections.abc import Callable, Mapping


class Write(Record):
    """A file (or a tree) a command line writes."""

    __slots__ = ("path", "what", "tree", "formatter", "judged")

    def __init__(self, path: str, what: str, tree: bool = False, formatter: str = "",
                 judged: bool = True) -> None:
        self.path = path  # as the command names it, joined to the directory it runs in
        self.what = what  # the command, as shown to the agent
        self.tree = tree  # a directory: every file under it
        self.formatter = formatter  # the formatter that rewrites it, if one does
        self.judged = judged  # False: some files under it, unknown which (protection only)


class Scope(Record):
    """What judging one command line knows: the environment, where it runs, what it writes."""

    __slots__ = ("env", "cwd", "depth", "names_git", "writes", "refused", "made", "held")

    def __init__(self, env: Mapping[str, str], cwd: str | None, depth: int = 0,
                 names_git: bool = False, writes: list[Write] | None = None,
                 refused: Blocked | None = None, made: set[str] | None = None,
                 held: Callable[[], list[str] | None] | None = None) -> None:
        self.env = env
        self.cwd = cwd
        self.depth = depth
        self.names_git = names_git  # the whole line names git somewhere (after normalising)
        self.writes: list[Write] = [] if writes is None else writes
        self.refused = refused  # a write the line makes that is refused outright
        self.made: set[str] = set() if made is None else made  # paths it writes, normalised
        # The task ids the worker making the call holds (read from the state only when a
        # `worker` command asks), or None where that is not known.
        self.held = held

    def child(self) -> Scope:
        # One level deeper; the lists are shared.
        return Scope(self.env, self.cwd, self.depth + 1, self.names_git, self.writes,
                     self.refused, self.made, self.held)

    def where(self, path: str) -> str:
        joined = path if os.path.isabs(path) or self.cwd is None else os.path.join(self.cwd, path)
        return os.path.normpath(joined)


if TYPE_CHECKING:
    Judge = Callable[[list[Word], Scope, Simple, bool], Blocked | None]
SHOWN = 120


def shown(words: list[Word]) -> str:
    return " ".join(w.text for w in words)[:SHOWN]


def _block(words: list[Word], why: str, instead: str = DIRECT) -> Blocked:
    return Blocked(shown(words), why, instead)


READ_TREE = ("run the commands directly, each on its own, so the guard can read them")


# ---- the programs the guard knows: filled by judges.py ------------------------------------

HANDLERS: dict[str, Judge] = {}  # program name -> how it is judged
DATA: set[str] = set()  # programs whose arguments are only data
RUNNERS: set[str] = set()  # programs that run a command or code given to them
# a judge for a name no table holds (python3.12, perl5.36: interpreters by their stem)
FALLBACK: list[Callable[[str], Judge | None]] = []


def handler_for(base: str) -> Judge | None:
    found = HANDLERS.get(base)
    if found is not None:
        return found
    for f in FALLBACK:
        found = f(base)
        if found is not None:
            return found
    return None


# ---- resolving the program ----------------------------------------------------------------

_SHELL_NAMES = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"}
_SYSTEM_DIRS = ("/usr/", "/bin/", "/sbin/", "/lib", "/etc/", "/snap/", "/nix/store/")
_GIT_BINARIES: list[tuple[str, int]] = []
BUILTINS = {"cd", "echo", "printf", "read", "test", "[", "true", "false", "pwd", "export",
            "declare", "typeset", "local", "readonly", "unset", "set", "shift", "exit",
            "return", "wait", "kill", "jobs", "fg", "bg", "umask", "ulimit", "getopts",
            "break", "continue", ":", "type", "hash", "alias", "unalias", "trap", "eval",
            "source", ".", "exec", "command", "builtin", "enable", "mapfile", "readarray",
            "shopt", "pushd", "popd", "dirs", "let", "history", "help", "logout", "times",
            "caller", "disown", "suspend", "compgen", "complete", "compopt", "bind", "fc"}


def _git_binaries() -> list[tuple[str, int]]:
    if not _GIT_BINARIES:
        for p in (which("git", os.environ.get("PATH", os.defpath)), "/usr/bin/git",
                  "/usr/lib/git-core/git"):
            if p and os.path.exists(p):
                real = os.path.realpath(p)
                if all(real != r for r, _s in _GIT_BINARIES):
                    _GIT_BINARIES.append((real, os.path.getsize(real)))
    return _GIT_BINARIES


_OURS: list[str] = []


def our_scripts() -> list[str]:
    """The real paths of this installation's own `coord` and `worker` (beside the
    interpreter the hook runs): judged by what they are asked, not read as scripts."""
    if not _OURS:
        import sys

        here = os.path.dirname(sys.executable)
        _OURS.extend(os.path.realpath(os.path.join(here, n)) for n in ("coord", "worker"))
    return _OURS


def is_git_binary(real: str) -> bool:
    """The git program itself: by name, by link, or a byte-for-byte copy."""
    base = os.path.basename(real)
    if base == "git" or base.startswith("git-") or base == "scalar":
        return True
    try:
        size = os.path.getsize(real)
    except OSError:
        return False
    for git_real, git_size in _git_binaries():
        if real == git_real:
            return True
        if size == git_size:
            import filecmp

            if filecmp.cmp(real, git_real, shallow=False):
                return True
    return False


def git_named(text: str) -> bool:
    base = text.rsplit("/", 1)[-1]
    return base == "git" or base.startswith("git-") or base == "scalar"


def which(name: str, path: str) -> str | None:
    """`shutil.which(name, path=path)` for a bare name (shutil costs a hook call its import):
    the first executable file of that name in the folders of `path`."""
    if not path:
        return None
    seen = set()
    for d in path.split(os.pathsep):
        if d in seen:
            continue
        seen.add(d)
        p = os.path.join(d, name)
        if os.path.exists(p) and os.access(p, os.X_OK) and not os.path.isdir(p):
            return p
    return None


def resolve(name: str, scope: Scope) -> str | None:
    """The real path of the file this command name runs, when it can be found."""
    if "/" in name:
        path = scope.where(name)
        if not os.path.isabs(path):
            return None
    elif name in BUILTINS:
        return None
    else:
        path = which(name, scope.env.get("PATH", os.defpath)) or ""
        if not path:
            return None
    return os.path.realpath(path) if os.path.exists(path) else None


def read_script(real: str) -> tuple[str, str] | None:
    """(language, text) of a script outside the system's directories: "shell" or "other"."""
    if real.startswith(_SYSTEM_DIRS) or not os.path.isfile(real):
        return None
    try:
        with open(real, "rb") as f:
            data = f.read(256 * 1024)
    except OSError:
        return None
    if b"\0" in data[:4096]:
        return None  # a binary (its copy of git was checked above)
    text = data.decode("utf-8", "replace")
    first = text.split("\n", 1)[0]
    if first.startswith("#!"):
        interp = first[2:].strip().split()
        prog = interp[0].rsplit("/", 1)[-1] if interp else ""
        if prog == "env" and len(interp) > 1:
            prog = interp[-1].rsplit("/", 1)[-1]
        return ("shell" if prog in _SHELL_NAMES else "other"), text
    return "shell", text  # a text file without #! runs under sh
