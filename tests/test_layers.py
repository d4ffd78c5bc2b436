"""The house's floor plan: which package may import which, imports inside functions included.

`shared/` is cut by concern into sub-packages; each may import only the layers below it, as
this one table says. A new import that crosses the plan fails here with the file and line,
so the layering is kept by the suite rather than by memory (docs/design.md, "The house").
No module imports itself back through others, and no function runs past 80 lines without
saying why.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from testing.env import ROOT

# Each unit (a module, or a package with everything inside it) and the units it may import.
# Longest prefix wins: `shared.state.models` names one module of `shared.state`.
ERRORS = "shared.errors"
ALLOWED: dict[str, set[str]] = {
    "shared.errors": set(),
    "shared.fastjson": set(),
    "shared.gitspawn": {ERRORS},
    "shared.proc": set(),
    "shared.git": {ERRORS, "shared.gitspawn"},
    "shared.state": {ERRORS, "shared.git", "shared.fastjson"},
    # bytes in, owners out: knows the records it reads and the repository's context, never
    # the store that keeps them
    "shared.hunks": {ERRORS, "shared.git", "shared.state.models", "shared.state.schema",
                     "shared.state.documents", "shared.state.context",
                     "shared.state.provenance"},
    "shared.work": {ERRORS, "shared.proc", "shared.git", "shared.state", "shared.hunks"},
    "inbox": {ERRORS, "shared.git", "shared.state", "shared.hunks", "shared.work"},
    # the one layer above inbox
    "shared.machines": {ERRORS, "shared.git", "shared.state", "shared.hunks", "shared.work",
                        "inbox"},
    "shared.output": {ERRORS, "shared.state.documents"},
    "shared.diffview": {ERRORS, "shared.git", "shared.state", "shared.hunks", "shared.work",
                        "shared.machines"},
    "shared.mcp": {ERRORS},
    "shared.cli": {ERRORS, "shared.git", "shared.state", "shared.output", "shared.machines"},
    "coordinator": {"shared", "inbox"},
    "worker": {"shared", "inbox"},
}
SOURCES = ["shared", "inbox", "coordinator", "worker"]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _unit(module: str) -> str | None:
    best = None
    for unit in ALLOWED:
        if (module == unit or module.startswith(unit + ".")) and (best is None or len(unit) > len(best)):
            best = unit
    return best


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A source file's tree, parsed once for every test here (none of them changes it)."""
    return ast.parse(path.read_bytes(), str(path))


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every product module `path` imports, at any depth of the file, without `hunkwise.`."""
    me = _module(path).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    found = []
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("hunkwise"):
                mod = node.module.removeprefix("hunkwise").lstrip(".")
            else:
                continue
            # `from pkg import mod` imports the module pkg.mod where one exists
            names = []
            for a in node.names:
                sub = f"{mod}.{a.name}" if mod else a.name
                names.append(sub if _exists(sub) else mod)
        else:
            continue
        for name in names:
            name = name.removeprefix("hunkwise").lstrip(".")
            if name and name.split(".")[0] in SOURCES:
                found.append((node.lineno, name))
    return found


def _exists(module: str) -> bool:
    p = ROOT / module.replace(".", "/")
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    return {module: set(deps) for module, deps in _graph_once().items()}


@functools.cache
def _graph_once() -> dict[str, frozenset[str]]:
    return {_module(p): frozenset(m for _, m in _imports(p))
            for d in SOURCES for p in sorted((ROOT / d).rglob("*.py"))}


def test_every_module_belongs_to_a_layer() -> None:
    orphans = [m for m in _graph() if _unit(m) is None and m not in ("shared",)]
    assert orphans == [], f"add these to the layer table: {orphans}"


def test_no_import_crosses_the_layer_table() -> None:
    bad = []
    for d in SOURCES:
        for path in sorted((ROOT / d).rglob("*.py")):
            me = _unit(_module(path))
            if me is None:
                continue
            for line, name in _imports(path):
                them = _unit(name) or name
                if them == me or them.startswith(me + ".") or me.startswith(them + "."):
                    continue
                allowed = ALLOWED[me]
                if not any(name == a or name.startswith(a + ".") for a in allowed):
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {me} imports {name}")
    assert bad == [], "imports against the layer table:\n" + "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_floor_has_no_import_cycles() -> None:
    """Counting imports inside functions: a cycle hidden in a function is still a cycle."""
    graph = {m: deps for m, deps in _graph().items() if m.split(".")[0] in ("shared", "inbox")}
    assert _cycles(graph) == []


def test_the_layers_themselves_have_no_cycles() -> None:
    """Between layers as well as modules: `machines` may import `inbox` only because
    nothing in `inbox` (or below it) imports `machines`."""
    units: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        me = _unit(module)
        if me is None:
            continue
        units.setdefault(me, set()).update(
            u for u in (_unit(d) for d in deps) if u is not None and u != me)
    assert _cycles(units) == []


# The agent guard's modules import one another (the judge, the shell reader and the
# programs it knows): that group is being reworked, and is the one cycle left.
def test_the_product_has_no_module_cycles() -> None:
    """shared, inbox, coordinator and worker, counting imports inside functions: a module
    that borrows from another that borrows back is a cycle too (validation, the accept
    journal, the event log live on their own for that reason; the guard's table of
    programs is filled by judges.py, never imported back by the modules it judges with)."""
    assert _cycles(_graph()) == []


# ---- function length --------------------------------------------------------------------

MAX_LINES = 80
# Over MAX_LINES in files being reworked by others right now: the reason lives here until
# it moves into the function's docstring (a `Long:` sentence) or the function is split.
LONG_ELSEWHERE = {
    "coordinator.shell.lex": "one pass of bash's tokenizer, a state machine over the "
                             "characters",
    "coordinator.runners.interpreter": "one pass over an interpreter's options, each kind "
                                       "of option (code, value, clustered letters) in turn",
    "shared.hunks.regions._settle_all": "one scoring of every boundary's cuts together, by "
                                        "the rules its docstring lists in order",
    "shared.hunks.regions._point_hunks": "each new line at a point settled by the rules its "
                                         "docstring lists in order",
    "shared.state.schema._compile": "the record reader is to be replaced (issue 20, item 4)",
}


def _functions(tree: ast.Module, prefix: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method of a module, nested ones too, by qualified name."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def walk(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((f"{name}.{child.name}", child))
                walk(child, f"{name}.{child.name}")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{name}.{child.name}")
            else:
                walk(child, name)

    walk(tree, prefix)
    return out


def _says_why(doc: str | None) -> bool:
    """A docstring sentence that begins `Long:` and says something after it."""
    return doc is not None and any(
        part.strip().removeprefix("Long:").strip()
        for part in doc.replace("\n", " ").split("Long:")[1:])


def test_no_function_runs_past_80_lines_without_saying_why() -> None:
    """From its `def` to its last line. A function that long is usually two things: split it,
    or say in its docstring, in a sentence that begins `Long:`, why it is one."""
    long = []
    for d in SOURCES:
        for path in sorted((ROOT / d).rglob("*.py")):
            tree = _parsed(path)
            for name, fn in _functions(tree, _module(path)):
                lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
                if lines > MAX_LINES and name not in LONG_ELSEWHERE \
                        and not _says_why(ast.get_docstring(fn)):
                    long.append(f"{path.relative_to(ROOT)}:{fn.lineno}: {name} ({lines} lines)")
    assert long == [], "split these, or say why in a `Long:` sentence:\n" + "\n".join(long)


def test_a_long_function_is_known_by_its_reason() -> None:
    """The rule itself: a docstring names its reason after `Long:`; `Long:` alone is none.
    And every function excused above still exists and is still long."""
    assert _says_why("Parse it.\n\nLong: one state machine over the characters.")
    assert not _says_why("Parse it.\n\nLong:")
    assert not _says_why("A long story, told whole.")
    found = {}
    for name in LONG_ELSEWHERE:
        module = name.rsplit(".", 1)[0]
        path = ROOT / (module.replace(".", "/") + ".py")
        for qual, fn in _functions(_parsed(path), module):
            found[qual] = (fn.end_lineno or fn.lineno) - fn.lineno + 1
    stale = [n for n in LONG_ELSEWHERE if found.get(n, 0) <= MAX_LINES]
    assert stale == [], f"no longer long (or gone): drop them from LONG_ELSEWHERE: {stale}"
