"""The table of the programs the guard knows, filled from the modules that judge them.

scope.py holds the table and programs.py reads it; wrappers (wrappers.py, runners.py),
shells and interpreters (runners.py), the shell's builtins and the programs with ways of
their own (builtins.py, filters.py), and the programs that write files (shellwrites.py)
fill it here, once, before the first line is judged: none of them is imported by
programs.py, so the judges import downward only.
"""

from __future__ import annotations

from hunkwise.coordinator import scope
from hunkwise.coordinator.builtins import DATA, HANDLERS_MORE, RUNNERS_MORE
from hunkwise.coordinator.runners import LANGS, SHELLS, interpreter_for, shell, wrapper
from hunkwise.coordinator.wrappers import WRAPPERS


def _fill() -> None:
    if scope.HANDLERS:
        return
    scope.HANDLERS.update({name: wrapper(spec) for name, spec in WRAPPERS.items()})
    scope.HANDLERS.update({name: shell for name in SHELLS})
    scope.HANDLERS.update(HANDLERS_MORE)
    scope.DATA.update(DATA)
    scope.RUNNERS.update(set(scope.HANDLERS) | set(LANGS) | RUNNERS_MORE)
    scope.FALLBACK.append(interpreter_for)


_fill()
