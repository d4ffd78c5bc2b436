"""A shell command line split the way bash splits it, closely enough to find every command.

The agent guard judges each simple command of a line: the lexer follows quotes, escapes,
operators (`;`, `&&`, `||`, `|`, `&`, newlines, subshells), redirections and here-documents,
and collects every command substitution (`$(...)`, backticks, `<(...)`, `${...}`) so that
its contents are judged too. What it cannot follow raises `Unparsable`: the guard blocks it.
"""

from __future__ import annotations

# `re` (and `typing`) are imported only where a rare line needs them: they cost a hook call,
# which starts a process on every tool call of every agent, milliseconds each.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from typing import Any


class Unparsable(ValueError):
    pass


class LazyRe:
    """A regular expression compiled when first used: the guard starts a process on every
    tool call, and most of its patterns serve rare lines."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._rx: re.Pattern[str] | None = None

    def _get(self) -> re.Pattern[str]:
        if self._rx is None:
            import re

            self._rx = re.compile(self.pattern)
        return self._rx

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self._get().search(text, pos)

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self._get().match(text, pos)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self._get().fullmatch(text)

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self._get().sub(repl, text)

    def findall(self, text: str) -> list[Any]:
        return self._get().findall(text)


class Record:
    """Equality and a repr by `__slots__`: what the guard's few record classes need of a
    dataclass, without importing dataclasses (and inspect) on every hook call."""

    __slots__: tuple[str, ...] = ()
    __hash__ = None  # type: ignore[assignment]  # mutable

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, f) == getattr(other, f) for f in self.__slots__)

    def __repr__(self) -> str:
        inside = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__)
        return f"{type(self).__name__}({inside})"


class Word(Record):
    __slots__ = ("text", "dynamic", "glob", "quoted", "plain")

    def __init__(self, text: str, dynamic: bool = False, glob: bool = False,
                 quoted: bool = False, plain: int = -1) -> None:
        self.text = text
        self.dynamic = dynamic  # holds an expansion: $x, ${x}, $(...), `...`, $'...', {a,b}
        self.glob = glob
        self.quoted = quoted
        self.plain = plain  # how many leading characters were unquoted literals (-1: all)


class Lexed(Record):
    __slots__ = ("tokens", "subs", "heredocs")

    def __init__(self, tokens: list[Word | str] | None = None, subs: list[str] | None = None,
                 heredocs: list[str] | None = None) -> None:
        self.tokens: list[Word | str] = [] if tokens is None else tokens  # str: an operator
        self.subs: list[str] = [] if subs is None else subs  # command and process substitutions
        self.heredocs: list[str] = [] if heredocs is None else heredocs


_OPS = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "|", "&", "(", ")", "\n")
_REDIRS = ("<<<", "<<-", "<<", "<>", "<&", ">>", ">&", ">|", "&>>", "&>", "<", ">")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_REST = _NAME_START | frozenset("0123456789")
_SPECIAL = frozenset("0123456789@*#?$!-")


def _name_end(text: str, i: int) -> int:
    """Where the parameter name at text[i] ends (`[A-Za-z_][A-Za-z0-9_]*` or one special
    character); i when there is none."""
    n = len(text)
    if i < n and text[i] in _NAME_START:
        j = i + 1
        while j < n and text[j] in _NAME_REST:
            j += 1
        return j
    return i + 1 if i < n and text[i] in _SPECIAL else i
_CLASS = LazyRe(r"\[[^\]]+\]")
_BRACES = LazyRe(r"\{[^{}]*(,|\.\.)[^{}]*\}")


def _match(text: str, i: int, opening: str, closing: str, quotes: str, what: str) -> int:
    """Index of the `closing` that balances the `opening` at i, skipping single quotes,
    escapes and the `quotes` given (whose own substitutions nest)."""
    depth, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise Unparsable("unterminated quote")
            i = j + 1
            continue
        if c in quotes:
            i = _skip_quoted(text, i, c)
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise Unparsable(f"unbalanced {what}")


def _match_paren(text: str, i: int) -> int:
    """Index of the `)` closing the `(` at i."""
    return _match(text, i, "(", ")", "\"`", "parenthesis")


def _skip_quoted(text: str, i: int, q: str) -> int:
    """The index after the quote closing the one at i (double quote or backtick)."""
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == q:
            return j + 1
        if q == '"' and c == "$" and text[j + 1:j + 2] == "(":
            j = _match_paren(text, j + 1) + 1
            continue
        j += 1
    raise Unparsable("unterminated quote")


def _match_brace(text: str, i: int) -> int:
    """Index of the `}` closing the `{` at i."""
    return _match(text, i, "{", "}", '"', "brace")


def lex(text: str) -> Lexed:
    """Tokenize a shell line the way bash splits it, closely enough to find every command."""
    out = Lexed()
    buf: list[str] = []
    unquoted: list[str] = []  # the word's unquoted characters, for glob and brace detection
    word: Word | None = None
    pending: list[tuple[str, bool, bool]] = []  # heredocs: delimiter, quoted, strip tabs
    want_delim: bool | None = None  # the next word is a heredoc delimiter (<<- when True)
    i, n = 0, len(text)

    def start() -> Word:
        nonlocal word
        if word is None:
            word = Word("")
        return word

    def end() -> None:
        nonlocal word, buf, unquoted, want_delim
        if word is None:
            return
        word.text = "".join(buf)
        raw = "".join(unquoted)
        if any(c in raw for c in "*?") or ("[" in raw and _CLASS.search(raw)):
            word.glob = True
        if "{" in raw and _BRACES.search(raw):
            word.dynamic = True  # brace expansion
        if want_delim is not None:
            pending.append((word.text, word.quoted, want_delim))
            want_delim = None
        out.tokens.append(word)
        word, buf, unquoted = None, [], []

    def mark() -> Word:
        w = start()
        if w.plain < 0:
            w.plain = len(buf)
        return w

    def dollar(j: int) -> int:
        """Read an expansion at text[j] == '$' into the current word; return the next index."""
        w = mark()
        nxt = text[j + 1:j + 2]
        if nxt == "(":
            k = _match_paren(text, j + 1)
            inner = text[j + 2:k]
            out.subs.append(inner[1:-1] if inner.startswith("(") and inner.endswith(")")
                            else inner)
            w.dynamic = True
            buf.append(text[j:k + 1])
            return k + 1
        if nxt == "{":
            k = _match_brace(text, j + 1)
            out.subs.append(text[j + 2:k])
            w.dynamic = True
            buf.append(text[j:k + 1])
            return k + 1
        end = _name_end(text, j + 1)
        if end > j + 1:
            w.dynamic = True
            buf.append(text[j:end])
            return end
        buf.append("$")
        return j + 1

    while i < n:
        c = text[i]
        if c in " \t\r":
            end()
            i += 1
        elif c == "\n":
            end()
            out.tokens.append("\n")
            i += 1
            for delim, quoted, strip in pending:
                lines = []
                while i < n:
                    k = text.find("\n", i)
                    line = text[i:] if k < 0 else text[i:k]
                    i = n if k < 0 else k + 1
                    if (line.lstrip("\t") if strip else line) == delim:
                        break
                    lines.append(line)
                body = "\n".join(lines)
                out.heredocs.append(body)
                if not quoted:
                    out.subs.extend(lex_subs(body))
            pending = []
        elif c == "#" and word is None:
            k = text.find("\n", i)
            i = n if k < 0 else k
        elif c == "\\":
            if text[i + 1:i + 2] != "\n":
                mark()
            if text[i + 1:i + 2] == "\n":
                i += 2
                continue
            buf.append(text[i + 1:i + 2])
            i += 2
        elif c == "'":
            w = mark()
            k = text.find("'", i + 1)
            if k < 0:
                raise Unparsable("unterminated single quote")
            buf.append(text[i + 1:k])
            w.quoted = True
            i = k + 1
        elif c == '"':
            w = mark()
            w.quoted = True
            j = i + 1
            while True:
                if j >= n:
                    raise Unparsable("unterminated double quote")
                d = text[j]
                if d == '"':
                    break
                if d == "\\" and text[j + 1:j + 2] in ('"', "\\", "$", "`", "\n"):
                    if text[j + 1] != "\n":
                        buf.append(text[j + 1])
                    j += 2
                elif d == "$":
                    j = dollar(j)
                elif d == "`":
                    k = _skip_quoted(text, j, "`")
                    out.subs.append(text[j + 1:k - 1].replace("\\`", "`"))
                    w.dynamic = True
                    buf.append(text[j:k])
                    j = k
                else:
                    buf.append(d)
                    j += 1
            i = j + 1
        elif c == "$":
            if text[i + 1:i + 2] == "'":  # ANSI-C quoting: escapes could spell anything
                w = mark()
                j = i + 2
                while j < n and text[j] != "'":
                    j += 2 if text[j] == "\\" else 1
                if j >= n:
                    raise Unparsable("unterminated $'...'")
                buf.append(text[i:j + 1])
                w.dynamic = w.quoted = True
                i = j + 1
            else:
                i = dollar(i)
        elif c == "`":
            w = mark()
            k = _skip_quoted(text, i, "`")
            out.subs.append(text[i + 1:k - 1].replace("\\`", "`"))
            w.dynamic = True
            buf.append(text[i:k])
            i = k
        elif c in "<>" and text[i + 1:i + 2] == "(":  # process substitution
            w = start()
            k = _match_paren(text, i + 1)
            out.subs.append(text[i + 2:k])
            w.dynamic = True
            buf.append(text[i:k + 1])
            i = k + 1
        elif c in "<>" or text.startswith("&>", i):
            if word is not None and buf and "".join(buf).isdigit() and not word.quoted:
                word, buf, unquoted = None, [], []  # a file descriptor: part of the operator
            end()
            op = next(o for o in _REDIRS if text.startswith(o, i))
            out.tokens.append(op)
            if op in ("<<", "<<-"):
                want_delim = op == "<<-"
            i += len(op)
        elif c in ";&|()":
            end()
            op = next(o for o in _OPS if text.startswith(o, i))
            out.tokens.append(op)
            i += len(op)
        else:
            start()
            buf.append(c)
            unquoted.append(c)
            i += 1
    end()
    if want_delim is not None:
        raise Unparsable("here-document without a delimiter")
    return out


def lex_subs(text: str) -> list[str]:
    """The command substitutions of a here-document body (expanded like a double-quoted word)."""
    subs, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
        elif c == "$" and text[i + 1:i + 2] == "(":
            k = _match_paren(text, i + 1)
            subs.append(text[i + 2:k])
            i = k + 1
        elif c == "`":
            k = _skip_quoted(text, i, "`")
            subs.append(text[i + 1:k - 1])
            i = k
        else:
            i += 1
    return subs


class Simple(Record):
    """One simple command: its words (redirections taken out), its redirections, and what
    feeds its stdin: "pipe" (the previous command of a pipeline, `piped_from`), "heredoc" or
    "herestring" (the text, `stdin_text`, as written: expansions unexpanded), "file" (a `<`)."""

    __slots__ = ("words", "stdin_fed", "redirs", "stdin", "stdin_text", "piped_from")

    def __init__(self, words: list[Word], stdin_fed: bool = False,
                 redirs: list[tuple[str, Word]] | None = None, stdin: str | None = None,
                 stdin_text: str | None = None, piped_from: Simple | None = None) -> None:
        self.words = words
        self.stdin_fed = stdin_fed
        self.redirs: list[tuple[str, Word]] = [] if redirs is None else redirs
        self.stdin = stdin
        self.stdin_text = stdin_text
        self.piped_from = piped_from


def simple_commands(lexed: Lexed) -> list[Simple]:
    cmds: list[Simple] = [Simple([])]
    toks = lexed.tokens
    bodies = iter(lexed.heredocs)
    i = 0
    while i < len(toks):
        t = toks[i]
        if isinstance(t, Word):
            cmds[-1].words.append(t)
        elif t in _REDIRS:
            i += 1  # the target
            if i >= len(toks) or not isinstance(toks[i], Word):
                raise Unparsable(f"`{t}` without a target")
            target = toks[i]
            assert isinstance(target, Word)
            cur = cmds[-1]
            cur.redirs.append((t, target))
            if t in ("<<", "<<-"):
                cur.stdin_fed, cur.stdin = True, "heredoc"
                cur.stdin_text = next(bodies, None)
            elif t == "<<<":
                cur.stdin_fed, cur.stdin = True, "herestring"
                cur.stdin_text = target.text + "\n"
            elif t in ("<", "<>"):
                cur.stdin_fed, cur.stdin = True, "file"
        else:
            prev = cmds[-1]
            piped = t in ("|", "|&")
            cmds.append(Simple([], stdin_fed=piped, stdin="pipe" if piped else None,
                               piped_from=prev if piped else None))
        i += 1
    return [c for c in cmds if c.words or c.redirs]
