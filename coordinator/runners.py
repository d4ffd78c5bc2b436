"""The programs the guard knows: wrappers that run a command, shells and interpreters that
run code, the shell's builtins that change what later names mean, and the programs whose
arguments are only data. programs.py resolves each simple command to one of these."""

from __future__ import annotations

import os

from hunkwise.coordinator import codescan
from hunkwise.coordinator.gitallow import DIRECT, Blocked
from hunkwise.coordinator.programs import check_line, env_danger, judge_argv
from hunkwise.coordinator.scope import READ_TREE, Scope, _block
from hunkwise.coordinator.shell import LazyRe, Record, Simple, Word
from hunkwise.coordinator.wrappers import S, Spec, _parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hunkwise.coordinator.scope import Judge


def wrapper(spec: Spec, start: int = 1) -> Judge:
    def judge(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
        parsed = _parse(words, spec, start)
        name = " ".join(w.text for w in words[:start])
        if parsed is None:
            # an option the guard does not know: the command could start at any later word
            from hunkwise.coordinator.programs import unknown

            return unknown(words, scope, cmd, f"`{name}` is given an option the guard does "
                           "not know, so the command it runs cannot be told apart")
        i, codes, seen = parsed
        for code in codes:
            found = follow_code(code, words, scope, name)
            if found is not None:
                return found
        if name == "env" or words[0].text.endswith("/env"):
            for k, w in enumerate(words[1:i], 1):  # -u NAME: unsetting counts as setting
                if w.text in ("-u", "--unset") and k + 1 < len(words):
                    found = env_danger(words[k + 1], scope, words)
                elif w.text.startswith("--unset="):
                    found = env_danger(Word(w.text.split("=", 1)[1], w.dynamic), scope, words)
                else:
                    continue
                if found is not None:
                    return found
            # env reads NAME=VALUE from its arguments, quoted or not
            while i < len(words) and "=" in words[i].text.lstrip("=") and \
                    not words[i].text.startswith("-"):
                found = env_danger(words[i], scope, words)
                if found is not None:
                    return found
                i += 1
        inner = words[i:]
        if not inner and appended:
            return _block(words, f"`{name}` runs the command it is handed (xargs, find -exec "
                          "... +), which the guard cannot see", DIRECT)
        if not inner:
            return None if not (spec.shell_flags & seen) else follow_stdin(
                words, scope, cmd, name, "shell")
        if spec.joined or spec.shell_flags & seen:
            if any(w.dynamic for w in inner):
                return _block(words, f"`{name}` runs its arguments through a shell, and they "
                              "hold expansions the guard cannot see", DIRECT)
            return follow_code(Word(" ".join(w.text for w in inner)), words, scope, name)
        found = judge_argv(inner, scope, cmd, appended or spec.appends)
        if found is not None:
            return _block(words, f"`{name}` runs `{found.what}`: {found.why}", found.instead)
        return None
    return judge


def follow_code(code: Word, words: list[Word], scope: Scope, name: str) -> Blocked | None:
    """A shell command line given as a string (`sh -c`, `eval`, `trap`, `watch`)."""
    if code.dynamic:
        return _block(words, f"`{name}` would run a command line built from expansions "
                      f"(`{code.text[:60]}`), which the guard cannot see", DIRECT)
    found = check_line(code.text, scope.child())
    if found is None:
        return None
    return _block(words, f"`{name}` runs `{found.what}`: {found.why}", found.instead)


def _produced(cmd: Simple | None) -> str | None:
    """What an `echo` or `printf` of literal words writes to the pipe, when it can be told."""
    if cmd is None or not cmd.words or any(w.dynamic for w in cmd.words):
        return None
    import re

    prog, args = cmd.words[0].text, [w.text for w in cmd.words[1:]]
    if prog == "echo":
        while args and re.fullmatch(r"-[neE]+", args[0]):
            args = args[1:]
        return codescan.normalise(" ".join(args)) + "\n"
    if prog == "printf" and args:
        fmt, rest = args[0], args[1:]
        if re.search(r"%(?!%|s|b)", fmt):
            return None
        parts = fmt.split("%%")
        out, k = [], 0
        for p in parts:
            def sub(_m: re.Match[str]) -> str:
                nonlocal k
                k += 1
                return rest[k - 1] if k <= len(rest) else ""
            out.append(re.sub(r"%[sb]", sub, p))
        if k < len(rest):
            return None  # printf repeats its format: not worth rendering
        return codescan.normalise("%".join(out))
    return None


def follow_stdin(words: list[Word], scope: Scope, cmd: Simple, name: str,
                 lang: str) -> Blocked | None:
    """Code a shell or an interpreter reads from its stdin."""
    text: str | None = None
    if cmd.stdin in ("heredoc", "herestring"):
        text = cmd.stdin_text or ""
    elif cmd.stdin == "pipe":
        text = _produced(cmd.piped_from)
        if text is None:
            return _block(words, f"`{name}` runs code piped into it, which the guard cannot "
                          "see", READ_TREE)
    elif cmd.stdin == "file" and not _terminal(cmd):
        target = next((t for op, t in cmd.redirs if op in ("<", "<>")), None)
        if target is None or target.dynamic:
            return _block(words, f"`{name}` runs a script the guard cannot name", READ_TREE)
        return _script_arg(target, words, scope, cmd, name, lang)
    if text is None:  # (its input is the call's own, or a terminal named for it)
        base = os.path.basename(name)
        info = {"--version", "--help"} if lang == "shell" else (
            {"--version", "-V", "--help", "-h", "-version"}
            | ({"-v"} if base in ("node", "nodejs", "perl") else set()))
        if len(words) > 1 and words[1].text in info:
            return None  # (it prints and exits: it reads nothing)
        # Its input is the call's own: an agent's terminal. Codex types into it later, by
        # write_stdin, which no hook is asked about (openai/codex#46372): what it would run
        # is never judged, and runs after the call's check.
        return _block(words, f"`{name}` runs the commands it reads from its input, and "
                      "input typed into it later (Codex's write_stdin) is never checked",
                      "run the commands directly, one call each, or put them in a script "
                      "and run that")
    if lang == "shell":
        found = check_line(text, scope.child())
        return None if found is None else _block(
            words, f"`{name}` runs `{found.what}` from its input: {found.why}", found.instead)
    why = codescan.opaque_verdict(text)
    return None if why is None else _block(words, f"the code `{name}` reads: {why}", READ_TREE)


def _terminal(cmd: Simple) -> bool:
    """Is its input redirected from a terminal (`< /dev/tty`): the call's own input again."""
    target = next((t for op, t in cmd.redirs if op in ("<", "<>")), None)
    return target is not None and not target.dynamic and (
        target.text == "/dev/tty" or target.text.startswith(("/dev/pts/", "/dev/tty")))


_STDIN_PATHS = LazyRe(r"^(-|/dev/stdin|/dev/fd/0|/proc/self/fd/0)$")
_FD_PATHS = LazyRe(r"^(/dev/fd/|/proc/[^/]+/fd/)")


def _script_arg(w: Word, words: list[Word], scope: Scope, cmd: Simple, name: str,
                lang: str) -> Blocked | None:
    """A script file a shell or an interpreter runs."""
    import os

    if w.dynamic:
        return _block(words, f"`{name}` runs a script whose name holds an expansion "
                      f"(`{w.text[:60]}`), which the guard cannot read", READ_TREE)
    if _STDIN_PATHS.match(w.text):
        return follow_stdin(words, scope, cmd, name, lang)
    if _FD_PATHS.match(w.text):
        return _block(words, f"`{name}` runs code from a file descriptor, which the guard "
                      "cannot read", READ_TREE)
    path = scope.where(w.text)
    if path in scope.made:
        return _block(words, f"`{name}` runs {w.text}, which this command line writes: the guard "
                      "cannot read it before it runs", "write the script in one call and run "
                      "it in another")
    if not os.path.isabs(path) or not os.path.isfile(path):
        return None
    real = os.path.realpath(path)
    if lang == "shell":
        import re

        if re.search(r"/bin/activate(\.sh)?$", real) and os.path.isfile(
                os.path.join(os.path.dirname(os.path.dirname(real)), "pyvenv.cfg")):
            return None  # a virtualenv's activate script: sets PATH and a prompt
        from hunkwise.coordinator.scope import read_script

        found = read_script(real) if not real.startswith("/usr/") else None
        if found is None or not codescan.may_reach_git(found[1]):
            return None  # a script that never names git cannot run it by itself
        inner = check_line(found[1], scope.child(), opaque_fallback=True)
        return None if inner is None else _block(
            words, f"the script {w.text} runs `{inner.what}`: {inner.why}", inner.instead)
    from hunkwise.coordinator.scope import our_scripts

    if real in our_scripts():  # `python3 .venv/bin/coord thaw` is `coord thaw`
        k = next(i for i, x in enumerate(words) if x is w)
        return judge_argv([Word(os.path.basename(real))] + words[k + 1:], scope, cmd, False)
    try:
        with open(real, encoding="utf-8", errors="replace") as f:
            text = f.read(256 * 1024)
    except OSError:
        return None
    why = codescan.opaque_verdict(text)
    return None if why is None else _block(words, f"the script {w.text}: {why}", READ_TREE)


# ---- shells and interpreters --------------------------------------------------------------

SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash",
          "posh", "rbash", "ksh93", "oksh", "loksh"}


def shell(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    name = words[0].text.rsplit("/", 1)[-1]
    i, want_code, stdin = 1, False, False
    while i < len(words):
        w = words[i]
        t = w.text
        if w.dynamic and t.startswith(("-", "+")):
            return _block(words, f"options of `{name}` with expansions cannot be checked", DIRECT)
        if t in ("--", "-") and not w.quoted:
            i += 1
            break
        if t in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if t in ("--rcfile", "--init-file"):
            if i + 1 < len(words):
                found = _script_arg(words[i + 1], words, scope, cmd, name, "shell")
                if found is not None:
                    return found
            i += 2
            continue
        if t.startswith("--"):
            i += 1
            continue
        if len(t) > 1 and t[0] in "-+" and not w.quoted:
            want_code = want_code or "c" in t[1:]
            stdin = stdin or "s" in t[1:] or "i" in t[1:]
            i += 1
            continue
        break
    rest = words[i:]
    if want_code:
        if not rest:
            return _block(words, f"`{name} -c` without a command", DIRECT)
        return follow_code(rest[0], words, scope, f"{name} -c")
    if rest and not stdin:
        return _script_arg(rest[0], words, scope, cmd, name, "shell")
    return follow_stdin(words, scope, cmd, name, "shell")


class Lang(Record):
    """How an interpreter takes code: its options."""

    __slots__ = ("code", "values", "letters_with_value", "module", "inplace")

    def __init__(self, code: frozenset[str], values: frozenset[str], letters_with_value: str = "",
                 module: str = "", inplace: str = "") -> None:
        self.code = code  # options whose value is code
        self.values = values  # options taking a value
        self.letters_with_value = letters_with_value  # short options whose value may be attached
        self.module = module  # python's -m
        self.inplace = inplace  # the letter of in-place editing (-i): the files are written


def L(code: str, values: str = "", letters: str = "", module: str = "", inplace: str = "") -> Lang:
    return Lang(frozenset(code.split()), frozenset(values.split()), letters, module, inplace)


LANGS: dict[str, Lang] = {
    "python": L("-c", "-W -X --check-hash-based-pycs", "WX", module="-m"),
    "perl": L("-e -E", "-I -M -m -x -C -l -0 -F -d -D", "IMmxCl0FdD", inplace="i"),
    "ruby": L("-e", "-I -r -C -F -E --encoding -x -K -T -W", "IrCFEKxTW", inplace="i"),
    "node": L("-e --eval -p --print", "-r --require --import --input-type --loader "
              "--experimental-loader -C --conditions --env-file --stack-size"),
    "php": L("-r -B -R -E", "-d -c -z -f", "dcz"),
    "lua": L("-e", "-l", "l"), "luajit": L("-e", "-l -j -O", "ljO"),
    "Rscript": L("-e", ""), "osascript": L("-e", "-l"), "expect": L("-c", "-f"),
    "tclsh": L("", ""), "wish": L("", ""), "julia": L("-e -E --eval --print", "-J -L --project"),
    "pwsh": L("-c -Command -command -EncodedCommand -e -ec -encodedcommand",
              "-File -f -ExecutionPolicy -ex -WorkingDirectory -wd -ConfigurationName"),
    "deno": L("", ""), "bun": L("-e --eval -p --print", ""),
}
LANGS["powershell"] = LANGS["pwsh"]
LANGS["nodejs"] = LANGS["node"]
_PY_MODULES = {"pytest": "pytest", "unittest": "pytest", "pip": "pip", "mypy": "mypy",
               "black": "black", "isort": "isort", "ruff": "ruff", "coverage": "coverage",
               "venv": "pip", "build": "pip", "pyflakes": "pyflakes", "flake8": "flake8",
               "pylint": "pylint", "json.tool": "jq", "http.server": "pytest",
               "py_compile": "pip", "compileall": "pip",
               "tox": "tox", "nox": "nox", "pydoc": "jq", "tabnanny": "jq", "autopep8": "autopep8",
               "yapf": "yapf", "pyright": "pyright", "pre_commit": "pre-commit"}


# Modules that run the code, script or module they are given (a file this line writes is
# refused there as any script is); timeit runs its statements.
_RUNS_A_FILE = {"cProfile", "profile", "pdb", "trace", "doctest", "runpy"}


def _module(words: list[Word], module: str, rest: list[Word], scope: Scope, cmd: Simple,
            appended: bool) -> Blocked | None:
    """`python -m MODULE ARGS`."""
    import os

    name = words[0].text.rsplit("/", 1)[-1]
    if module.startswith("hunkwise"):
        if module in ("hunkwise.coordinator.cli", "hunkwise.worker.cli"):
            prog = "coord" if ".coordinator." in module else "worker"
            return judge_argv([Word(prog)] + rest, scope, cmd, appended)
        return _block(words, f"`{name} -m {module}` runs hunkwise's own internals (its hooks, "
                      "its state)", "use the coord and worker commands")
    if module == "timeit":
        stmts = [w for w in rest if not w.text.startswith("-")]
        for k, w in enumerate(rest[:-1]):
            if w.text in ("-s", "--setup"):
                stmts.append(rest[k + 1])
        return _opaque(words, stmts, f"{name} -m timeit")
    if module == "pydoc" and any(w.text == "-w" for w in rest):
        return _block(words, "`pydoc -w` writes HTML files where it runs", "read with pydoc")
    if module in _RUNS_A_FILE:
        args = [w for w in rest if not w.text.startswith("-")]
        for w in args[:1]:
            target = w.text if w.text.endswith(".py") or "/" in w.text else \
                w.text.replace(".", "/") + ".py"
            if w.dynamic or os.path.exists(scope.where(target)) or \
                    scope.where(target) in scope.made:
                return _script_arg(Word(target, dynamic=w.dynamic), words, scope, cmd, name,
                                   "other")
        return None
    prog = _PY_MODULES.get(module, module)
    return judge_argv([Word(prog)] + rest, scope, cmd, appended)


def lang_of(base: str) -> Lang | None:
    if base in LANGS:
        return LANGS[base]
    stem = base.removesuffix("-dbg")
    stem = stem.removesuffix("m") if stem == base else stem
    stem = stem.rstrip("0123456789.")
    if stem not in ("python", "pypy", "perl", "ruby", "node", "php", "lua"):
        return None  # (python|pypy|perl|ruby|node|php|lua)[0-9.]*(-dbg|m)?
    return LANGS.get("python" if stem == "pypy" else stem)


def interpreter(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    from hunkwise.coordinator import shellwrites

    name = words[0].text.rsplit("/", 1)[-1]
    lang = lang_of(name)
    assert lang is not None
    if name in ("pwsh", "powershell") and any(w.text.lower() in ("-encodedcommand", "-e", "-ec")
                                             for w in words[1:]):
        return _block(words, "an encoded PowerShell command cannot be read", READ_TREE)
    if name in ("deno", "bun") and len(words) > 1 and words[1].text in ("eval", "-e", "--eval"):
        return _opaque(words, words[2:3], name)
    if name == "bun" and len(words) > 1 and words[1].text == "x":
        return wrapper(S("", None), 2)(words, scope, cmd, appended)
    codes: list[Word] = []
    inplace = False
    i = 1
    while i < len(words):
        w = words[i]
        t = w.text
        if t == "--" and not w.quoted:
            i += 1
            break
        if not t.startswith("-") or t == "-" or w.quoted:
            break
        if w.dynamic:
            return _block(words, f"options of `{name}` with expansions cannot be checked", DIRECT)
        opt, eq, val = t.partition("=")
        if lang.module and t.startswith(lang.module):
            module = t[len(lang.module):] or (words[i + 1].text if i + 1 < len(words) else "")
            rest = words[i + (1 if len(t) > len(lang.module) else 2):]
            return _module(words, module, rest, scope, cmd, appended)
        if opt in lang.code or (len(t) > 2 and t[:2] in lang.code and not t.startswith("--")):
            if eq or (len(t) > 2 and t[:2] in lang.code and not t.startswith("--")):
                codes.append(Word(val if eq else t[2:]))
                i += 1
            else:
                codes.append(words[i + 1] if i + 1 < len(words) else Word(""))
                i += 2
            continue
        if opt in lang.values:
            i += 1 if eq else 2
            continue
        if not t.startswith("--"):
            # clustered letters: -pi.bak, -lne CODE, -Idir
            j = 1
            while j < len(t):
                c = t[j]
                if f"-{c}" in lang.code:
                    codes.append(Word(t[j + 1:]) if j + 1 < len(t) else (
                        words[i + 1] if i + 1 < len(words) else Word("")))
                    if j + 1 >= len(t):
                        i += 1
                    break
                if c == lang.inplace and c:
                    inplace = True
                    break
                if c in lang.letters_with_value and name.startswith("perl") and c in "l0":
                    j += 1
                    while j < len(t) and t[j] in "0123456789abcdefxABCDEF" and c == "0" or (
                            j < len(t) and t[j].isdigit()):
                        j += 1
                    continue
                if c in lang.letters_with_value:
                    if j + 1 >= len(t):
                        i += 1
                    break
                j += 1
        i += 1
    for code in codes:
        found = _opaque(words, [code], name)
        if found is not None:
            return found
    if name.startswith(("python", "pypy", "node")) and any(w.text == "-i" for w in words[1:i]):
        # `-i`: a prompt after the script or the code, reading what comes next from its input.
        found = follow_stdin(words, scope, cmd, name, "other")
        if found is not None:
            return found
    rest = words[i:]
    if inplace:
        shellwrites.record(rest, scope, words)
    if codes:
        # The words after the code are its argv: code that runs `sys.argv[1:]` runs them.
        from hunkwise.coordinator.programs import unknown

        return unknown([words[0]] + rest, scope, cmd, f"`{name}` code runs with arguments")
    if rest and rest[0].text != "-":
        return _script_arg(rest[0], words, scope, cmd, name, "other")
    return follow_stdin(words, scope, cmd, name, "other")


def _opaque(words: list[Word], code: list[Word], name: str) -> Blocked | None:
    if not code:
        return None
    text = "\n".join(c.text for c in code)
    if any(c.dynamic for c in code):
        return _block(words, f"the code `{name}` runs holds expansions the guard cannot see",
                      READ_TREE)
    why = codescan.inline_verdict(text)
    if why is None and name in ("pwsh", "powershell") and codescan.names_git(code[0].text):
        why = "it names git, and PowerShell runs what it names"
    return None if why is None else _block(words, f"the code `{name}` runs: {why}",
                                           "run the git-free part as its own command; git "
                                           "itself only read-only and directly")


def interpreter_for(base: str) -> Judge | None:
    """The judge of an interpreter known by its stem (python3.12, perl5.36)."""
    return interpreter if lang_of(base) is not None else None
