"""The agent guard: an allow-list of what a worker's agent may run or write in the shared tree.

`coord guard` is an agent's PreToolUse hook (Claude Code, Codex): the tool call arrives as
JSON on stdin; exit 2 with a reason on stderr blocks it. For a worker:

- shell commands: read-only git passes; every other git invocation, git behind a wrapper
  (`timeout`, `xargs`, `eval`, `sh -c`, `$(...)`...), `-c` settings that could run a
  program or define an alias, and whatever the parser cannot follow, is blocked;
- file writes (Edit, Write, MultiEdit, NotebookEdit, Codex's apply_patch): a file outside
  the grants of the tasks the session holds is blocked. The session is `$COORD_SESSION`
  in the agent's environment (a hook inherits it); without one, writes are not judged.

The coordinator's own session (`HUNKWISE_COORDINATOR=1`, or a session of role `coord` or
`coordinator`) is not restricted. This guards against accidents, not against a hostile
agent: a program the agent writes and runs is not read.

`check_command`, `check_writes` and `patch_paths` are pure and table-tested; `guard` does
the reading (stdin, environment, state).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hunkwise.shared.models import Grant


@dataclass(frozen=True)
class Blocked:
    what: str  # the command or write, as shown to the agent
    why: str
    instead: str

    def message(self) -> str:
        return (f"hunkwise blocked `{self.what}`: {self.why}. Instead: {self.instead}. "
                "(This working tree is shared with other workers: edit only within your "
                "grants and finish with `worker done TASK_ID`; the coordinator stages, "
                "commits and restores.)")


class Unparsable(ValueError):
    pass


# ---- what to do instead -----------------------------------------------------------------

STAGE = ("only the coordinator stages and commits: finish with `worker done TASK_ID`, and "
         "`coord accept` commits exactly your hunks")
UNDO = ("to undo your own edit, edit those lines back; if work was destroyed, ask the "
        "coordinator to run `coord restore TASK_ID`")
HISTORY = ("branches, refs and history belong to the coordinator: if your task needs this, "
           "report `worker blocked TASK_ID --reason \"...\"`")
READ = ("run a read-only git command (status, diff, log, show, blame, grep, ls-files...) "
        "directly, or ask the coordinator with `worker blocked TASK_ID --reason \"...\"`")
DIRECT = "run the read-only git command directly, on its own, not wrapped or substituted"

_OVERWRITES = "overwrites files other workers are editing"
_WHY = {
    "stash": ("takes every uncommitted change in the shared tree, other workers' too, into "
              "a stash (only `stash list` and `stash show` pass)", UNDO),
    "checkout": (_OVERWRITES, UNDO), "switch": (_OVERWRITES, UNDO),
    "restore": (_OVERWRITES + " (or unstages the coordinator's index)", UNDO),
    "checkout-index": (_OVERWRITES, UNDO), "read-tree": (_OVERWRITES + " and the index", UNDO),
    "reset": ("moves HEAD or rewrites the index and files other workers are editing", UNDO),
    "clean": ("deletes untracked files, other workers' new files among them (only `-n` or "
              "`--dry-run` passes)", UNDO),
    "apply": ("rewrites files in the shared tree (only `--check`, `--stat`, `--numstat` and "
              "`--summary` pass)", UNDO),
    "add": ("stages changes; only the coordinator stages", STAGE),
    "rm": ("stages deletions; only the coordinator stages", STAGE),
    "mv": ("stages a move; move the file with plain `mv` inside your grants", STAGE),
    "commit": ("commits; only the coordinator commits", STAGE),
    "update-index": ("rewrites the shared index", STAGE),
    "write-tree": ("writes from the shared index", STAGE),
    "commit-tree": ("creates commits", STAGE), "update-ref": ("moves refs", HISTORY),
    "rebase": ("rewrites history and files under every worker", HISTORY),
    "pull": ("moves HEAD and merges into files other workers are editing", HISTORY),
    "merge": ("moves HEAD and merges into files other workers are editing", HISTORY),
    "cherry-pick": ("commits into the shared branch", HISTORY),
    "revert": ("commits into the shared branch (the coordinator has `coord revert`)", HISTORY),
    "am": ("commits into the shared branch", HISTORY),
    "branch": ("creates, moves or deletes branches (listing passes)", HISTORY),
    "tag": ("creates or deletes tags (listing passes)", HISTORY),
    "worktree": ("changes worktrees (only `worktree list` passes)", HISTORY),
    "config": ("changes git's settings for every worker (reads pass)", HISTORY),
    "diff": ("writes a file or runs an external program (`--output`, `--ext-diff`)", READ),
}


# ---- the shell lexer --------------------------------------------------------------------

@dataclass
class Word:
    text: str
    dynamic: bool = False  # holds an expansion: $x, ${x}, $(...), `...`, $'...', {a,b}
    glob: bool = False
    quoted: bool = False
    plain: int = -1  # how many leading characters were unquoted literals (-1: all)


@dataclass
class Lexed:
    tokens: list[Word | str] = field(default_factory=list)  # str: an operator
    subs: list[str] = field(default_factory=list)  # command and process substitutions
    heredocs: list[str] = field(default_factory=list)


_OPS = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "|", "&", "(", ")", "\n")
_REDIRS = ("<<<", "<<-", "<<", "<>", "<&", ">>", ">&", ">|", "&>>", "&>", "<", ">")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")


def _match_paren(text: str, i: int) -> int:
    """Index of the `)` closing the `(` at i, skipping quotes and escapes."""
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
        if c in "\"`":
            i = _skip_quoted(text, i, c)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise Unparsable("unbalanced parenthesis")


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
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "'":
            k = text.find("'", j + 1)
            if k < 0:
                raise Unparsable("unterminated quote")
            j = k + 1
            continue
        if c == '"':
            j = _skip_quoted(text, j, c)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise Unparsable("unbalanced brace")


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
        if any(c in raw for c in "*?["):
            word.glob = True
        if re.search(r"\{[^{}]*(,|\.\.)[^{}]*\}", raw):
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
        m = _NAME.match(text, j + 1)
        if m:
            w.dynamic = True
            buf.append(text[j:m.end()])
            return m.end()
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


@dataclass
class Simple:
    """One simple command: its words (redirections taken out) and how its stdin is fed."""
    words: list[Word]
    stdin_fed: bool = False


def simple_commands(lexed: Lexed) -> list[Simple]:
    cmds: list[Simple] = [Simple([])]
    toks = lexed.tokens
    i = 0
    while i < len(toks):
        t = toks[i]
        if isinstance(t, Word):
            cmds[-1].words.append(t)
        elif t in _REDIRS:
            if t in ("<", "<<", "<<-", "<<<", "<>"):
                cmds[-1].stdin_fed = True
            i += 1  # the target
            if i >= len(toks) or not isinstance(toks[i], Word):
                raise Unparsable(f"`{t}` without a target")
        else:
            cmds.append(Simple([], stdin_fed=t in ("|", "|&")))
        i += 1
    return [c for c in cmds if c.words]


# ---- judging a command line -------------------------------------------------------------

_KEYWORDS = {"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "[[", "]]"}
_NO_COMMAND = {"for", "case", "select", "in", "esac", "fi", "done", "function"}
# Programs that run their arguments as a command.
WRAPPERS = {
    "timeout", "nice", "ionice", "env", "nohup", "stdbuf", "time", "command", "exec",
    "builtin", "sudo", "doas", "chroot", "setsid", "unbuffer", "flock", "taskset", "chrt",
    "strace", "ltrace", "xargs", "parallel", "watch", "nsenter", "unshare", "runuser",
    "systemd-run", "script", "busybox", "find", "fd", "entr", "caffeinate", "coproc",
    "catchsegv", "valgrind", "faketime", "proot", "firejail", "torsocks", "npx", "uvx",
    "pipx", "make", "ssh", "su", "gdb",
}
# Programs that run a string or their stdin as code.
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "eval",
          "source", ".", "python", "python3", "perl", "ruby", "node", "php", "lua", "tclsh",
          "awk", "gawk", "osascript", "pwsh", "deno", "bun"}
_GIT_WORD = re.compile(r"(?<![\w.+-])git(?![\w.+])")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_SAFE_ENV = {"LC_ALL", "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR", "COLUMNS", "LINES",
             "GIT_PAGER", "PAGER"}
_PAGERS = {"", "cat", "less", "more"}


def _assignment(w: Word) -> bool:
    """NAME=value, with NAME and `=` unquoted (`'A=1' cmd` runs a program named A=1)."""
    m = _ASSIGN.match(w.text)
    return m is not None and (w.plain < 0 or m.end() <= w.plain)


def mentions_git(text: str) -> bool:
    return _GIT_WORD.search(text) is not None


def _is_git(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base == "git" or base.startswith("git-")


def check_command(command: str, depth: int = 0) -> Blocked | None:
    """Why a worker may not run this shell command line, or None when it may."""
    shown = command.strip().replace("\n", "; ")[:120]
    if depth > 6:
        return Blocked(shown, "commands nested this deep cannot be checked", DIRECT)
    try:
        lexed = lex(command)
        cmds = simple_commands(lexed)
    except Unparsable as e:
        return Blocked(shown, f"the guard cannot parse this command line ({e})",
                       "write it as plain commands the guard can read")
    for sub in lexed.subs:
        if mentions_git(sub):
            return Blocked(shown, f"git inside a substitution (`{sub.strip()[:60]}`) cannot "
                           "be checked", DIRECT)
        inner = check_command(sub, depth + 1)
        if inner is not None:
            return inner
    for cmd in cmds:
        found = _check_simple(cmd, command)
        if found is not None:
            return found
    return None


def _check_simple(cmd: Simple, line: str) -> Blocked | None:
    words = list(cmd.words)
    while words and not words[0].quoted and words[0].text in _KEYWORDS:
        words.pop(0)
    if not words or (not words[0].quoted and words[0].text in _NO_COMMAND):
        return None
    assigns = []
    while words and _assignment(words[0]):
        assigns.append(words.pop(0))
    if not words:
        return None
    head = words[0]
    shown = " ".join(w.text for w in words)[:120]
    if head.dynamic or head.glob:
        return Blocked(shown, f"the guard cannot tell which program `{head.text}` runs",
                       "name the program literally")
    name = head.text.rsplit("/", 1)[-1]
    args = " ".join(w.text for w in words[1:])
    if _is_git(head.text):
        for a in assigns:
            key, _, value = a.text.partition("=")
            key = key.rstrip("+")
            if key not in _SAFE_ENV or (key in ("GIT_PAGER", "PAGER") and value not in _PAGERS):
                return Blocked(shown, f"`{key}=` before git can change what git runs or "
                               "where it writes", DIRECT)
        return check_git(words)
    if name == "command" and len(words) > 1 and words[1].text in ("-v", "-V"):
        return None
    if name in WRAPPERS and (any(_is_git(w.text) for w in words[1:]) or mentions_git(args)):
        return Blocked(shown, f"git behind `{name}` cannot be checked", DIRECT)
    if name in SHELLS:
        if mentions_git(args):
            return Blocked(shown, f"git run through `{name}` cannot be checked", DIRECT)
        reads_stdin = not any(not w.text.startswith("-") for w in words[1:])
        if reads_stdin and mentions_git(line):
            return Blocked(shown, f"`{name}` would run git from its input, which cannot be "
                           "checked", DIRECT)
    return None


# ---- judging one git invocation ---------------------------------------------------------

_READ_ANY = {
    "status", "log", "show", "blame", "annotate", "grep", "ls-files", "ls-tree", "cat-file",
    "rev-parse", "describe", "merge-base", "for-each-ref", "show-ref", "rev-list", "shortlog",
    "whatchanged", "diff", "diff-tree", "diff-files", "diff-index", "range-diff", "name-rev",
    "count-objects", "check-ignore", "check-attr", "var", "version", "help", "cherry",
    "show-branch", "ls-remote", "verify-commit", "verify-tag",
}
_DIFF_LIKE = {"log", "show", "diff", "diff-tree", "diff-files", "diff-index", "range-diff",
              "whatchanged", "shortlog"}
_GLOBAL_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace"}
_GLOBAL_FLAGS = {"--no-pager", "-P", "-p", "--paginate", "--no-replace-objects", "--bare",
                 "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs",
                 "--icase-pathspecs", "--no-optional-locks", "--no-advice", "--version",
                 "--help", "-h", "--html-path", "--man-path", "--info-path", "--exec-path"}
_SAFE_CONFIG = re.compile(
    r"^(color\..*|advice\..*|column\..*|i18n\..*|core\.quotepath|core\.abbrev|"
    r"diff\.(algorithm|renames|noprefix|mnemonicprefix|context|indentheuristic|relative|"
    r"statgraphwidth|interhunkcontext|colormoved)|log\.(date|decorate|abbrevcommit|follow|"
    r"graphcolors|showroot|mailmap))$")


def _config_ok(setting: str) -> bool:
    key, _, value = setting.partition("=")
    section, _, rest = key.partition(".")
    key = section.lower() + "." + rest.rsplit(".", 1)[-1].lower() if "." in rest else key.lower()
    if key == "core.pager" or section.lower() == "pager":
        return value in _PAGERS or value in ("true", "false")
    return _SAFE_CONFIG.match(key) is not None


def _abbrev_of(arg: str, option: str) -> bool:
    """git accepts any unambiguous prefix of a long option: `--out` is `--output`."""
    name = arg.split("=", 1)[0]
    return len(name) >= 3 and name.startswith("--") and option.startswith(name)


def check_git(words: Sequence[Word]) -> Blocked | None:
    """Why this git invocation (words[0] is git) is not allowed for a worker, or None."""
    texts = [w.text for w in words]
    base = texts[0].rsplit("/", 1)[-1]
    if base != "git":
        return Blocked(" ".join(texts)[:120], f"`{base}` runs a git command directly", READ)
    i = 1
    while i < len(words) and texts[i].startswith("-"):
        a = texts[i]
        if words[i].dynamic:
            return Blocked(" ".join(texts)[:120], "git options with expansions cannot be "
                           "checked", DIRECT)
        opt, eq, value = a.partition("=")
        if a in ("-c",) or opt == "--config-env":
            if a == "-c" and i + 1 < len(words) and not words[i + 1].dynamic and _config_ok(
                    texts[i + 1]):
                i += 2
                continue
            setting = texts[i + 1] if a == "-c" and i + 1 < len(words) else a
            return Blocked(" ".join(texts)[:120], f"`git -c {setting}` could define an alias, "
                           "point hooks elsewhere or run a program; workers may not set git "
                           "configuration", DIRECT)
        if a in _GLOBAL_VALUE:
            i += 2
            continue
        if eq and opt in _GLOBAL_VALUE and opt != "-C":
            i += 1
            continue
        if opt == "--exec-path" and eq:
            return Blocked(" ".join(texts)[:120], "`--exec-path=` changes which programs git "
                           "runs", DIRECT)
        if a in _GLOBAL_FLAGS or a.startswith("--list-cmds="):
            i += 1
            continue
        return Blocked(" ".join(texts)[:120], f"unknown git option `{a}`", READ)
    if i >= len(words):
        return None
    sub, rest = texts[i], words[i + 1:]
    what = ("git " + " ".join([sub] + [w.text for w in rest])).strip()[:120]
    if words[i].dynamic:
        return Blocked(what, "a git subcommand with expansions cannot be checked", DIRECT)
    args: list[str] = []
    for w in rest:
        if w.text == "--" and not w.quoted:
            break
        if w.dynamic:
            return Blocked(what, f"the argument `{w.text}` holds an expansion that cannot be "
                           "checked (only paths after `--` may)", "write the arguments out")
        args.append(w.text)
    why = _sub_verdict(sub, args)
    if why is None:
        return None
    reason, instead = _WHY.get(sub, (f"`git {sub}` is not a read-only git command a worker "
                                     "may run", READ))
    return Blocked(what, reason if why == "blocked" else why, instead)


def _sub_verdict(sub: str, args: list[str]) -> str | None:
    """None when `git SUB ARGS` is read-only; else why not ("blocked" for the default)."""
    if sub in _READ_ANY:
        if sub in _DIFF_LIKE:
            for a in args:
                if _abbrev_of(a, "--output"):
                    return f"`{a}` writes a file"
                if _abbrev_of(a, "--ext-diff"):
                    return f"`{a}` runs an external diff program"
        if sub == "grep":
            for a in args:
                if _abbrev_of(a, "--open-files-in-pager") or (
                        a.startswith("-") and not a.startswith("--") and "O" in a):
                    return f"`{a}` runs a program on the matches"
        return None
    check = _SPECIAL.get(sub)
    if check is None:
        return "blocked"
    return check(args)


def _stash(args: list[str]) -> str | None:
    if args and args[0] in ("list", "show"):
        for a in args[1:]:
            if _abbrev_of(a, "--output") or _abbrev_of(a, "--ext-diff"):
                return f"`{a}` writes a file or runs a program"
        return None
    return "blocked"


def _listing(flags: set[str], value_flags: set[str], eq_flags: set[str]) -> Any:
    """A checker for `branch` and `tag`: listing passes; a name without --list creates one."""
    letters = {f[1] for f in flags if re.fullmatch(r"-[a-z]", f)}

    def check(args: list[str]) -> str | None:
        listing = "-l" in args or "--list" in args or any(
            a.startswith("-l") and not a.startswith("--") and set(a[1:]) <= letters
            for a in args)
        i = 0
        while i < len(args):
            a = args[i]
            if a in value_flags:
                i += 2
                continue
            if (a in flags or ("=" in a and a.split("=", 1)[0] in value_flags | eq_flags)
                    or ("n" in letters and re.fullmatch(r"-n\d+", a))
                    or (re.fullmatch(r"-[a-z]+", a) and set(a[1:]) <= letters)):
                i += 1
                continue
            if a.startswith("-") or not listing:
                return "blocked"
            i += 1
        return None
    return check


_branch = _listing(
    {"-a", "--all", "-r", "--remotes", "-l", "--list", "-v", "-vv", "--verbose", "--color",
     "--no-color", "--column", "--no-column", "-i", "--ignore-case", "--abbrev",
     "--no-abbrev", "--show-current", "-q", "--quiet", "--omit-empty", "--contains",
     "--merged", "--no-merged"},
    {"--no-contains", "--points-at", "--sort", "--format"},
    {"--contains", "--merged", "--no-merged", "--color", "--column", "--abbrev"})
_tag = _listing(
    {"-l", "--list", "-n", "--column", "--no-column", "-i", "--ignore-case", "--color",
     "--omit-empty", "--contains", "--merged", "--no-merged"},
    {"--no-contains", "--points-at", "--sort", "--format"},
    {"--contains", "--merged", "--no-merged", "--color", "--column"})


def _worktree(args: list[str]) -> str | None:
    if args and args[0] == "list" and all(a in ("--porcelain", "-v", "--verbose", "-z")
                                         or a.startswith("--expire") for a in args[1:]):
        return None
    return "blocked"


_CONFIG_READ_FLAGS = {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l",
                      "--get-color", "--get-colorbool"}
_CONFIG_FLAGS = {"--show-origin", "--show-scope", "--name-only", "--null", "-z", "--bool",
                 "--int", "--bool-or-int", "--path", "--expiry-date", "--local", "--global",
                 "--system", "--worktree", "--includes", "--no-includes", "--all"}
_CONFIG_VALUE = {"--file", "-f", "--blob", "--type", "--default", "--regexp", "--value",
                 "--url"}


def _config(args: list[str]) -> str | None:
    pos: list[str] = []
    reading = False
    i = 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0]
        if a in _CONFIG_READ_FLAGS:
            reading = True
        elif a in _CONFIG_VALUE:
            i += 1
        elif not (a in _CONFIG_FLAGS or ("=" in a and name in _CONFIG_VALUE)):
            if a.startswith("-"):
                return "blocked"
            pos.append(a)
        i += 1
    if pos and pos[0] in ("get", "list"):
        return None
    if reading or len(pos) == 1:
        return None
    return "blocked"


_APPLY_NO_WRITE = {"--check", "--stat", "--numstat", "--summary"}
_APPLY_FLAGS = _APPLY_NO_WRITE | {"-R", "--reverse", "-v", "--verbose", "-z", "--cached",
                                  "--index", "--unidiff-zero", "--recount", "--allow-empty",
                                  "--ignore-space-change", "--ignore-whitespace",
                                  "--no-add", "--inaccurate-eof", "-q", "--quiet"}


def _apply(args: list[str]) -> str | None:
    if not any(a in _APPLY_NO_WRITE for a in args):
        return "blocked"
    for a in args:
        if a.startswith("-") and not (a in _APPLY_FLAGS or re.fullmatch(r"-[pC]\d+", a) or
                                      a.split("=", 1)[0] in ("--whitespace", "--exclude",
                                                             "--include", "--directory")):
            return "blocked"
    return None


def _clean(args: list[str]) -> str | None:
    dry = "--dry-run" in args
    for a in args:
        if a.startswith("--"):
            if a not in ("--dry-run", "--quiet", "--force") and not a.startswith("--exclude="):
                return "blocked"
        elif a.startswith("-"):
            flags = a[1:].split("e", 1)[0]  # -e takes a value: `-en` excludes "n"
            if not re.fullmatch(r"[ndfxXq]*", flags):
                return "blocked"  # -i (interactive) among them
            dry = dry or "n" in flags
    return None if dry else "blocked"


def _remote(args: list[str]) -> str | None:
    if not args or args in (["-v"], ["--verbose"]) or (args[0] in ("get-url", "show")):
        return None
    return "blocked"


def _reflog(args: list[str]) -> str | None:
    # `git reflog [show] [options] [ref]` reads; expire and delete rewrite the reflogs.
    return "blocked" if args and args[0] in ("expire", "delete", "drop") else None


_SPECIAL = {"stash": _stash, "branch": _branch, "tag": _tag, "worktree": _worktree,
            "config": _config, "apply": _apply, "clean": _clean, "remote": _remote,
            "reflog": _reflog}


# ---- writes against grants --------------------------------------------------------------

def patch_paths(patch: str) -> list[str]:
    """The files a Codex apply_patch touches: Update, Add, Delete and Move-to lines."""
    paths = []
    for line in patch.split("\n"):
        line = line.rstrip("\r")
        for head in ("*** Update File:", "*** Add File:", "*** Delete File:", "*** Move to:"):
            if line.startswith(head):
                p = line[len(head):].strip()
                if p:
                    paths.append(p)
    return paths


def covers(grant: Grant, path: str) -> bool:
    from hunkwise.shared.ownership import glob_matches

    if grant.kind == "range":
        return grant.path == path
    return glob_matches(grant.path, path)


def check_writes(paths: Sequence[str], held: Sequence[tuple[str, Sequence[Grant]]],
                 session: str) -> Blocked | None:
    """Why a session holding these (task id, grants) may not write these repo paths."""
    if not paths:
        return None
    what = "write " + ", ".join(paths[:3])
    if not held:
        return Blocked(what, f"session {session} holds no active task, so it has no grants",
                       "claim your task with `worker start TASK_ID` (in a session started with "
                       "that COORD_SESSION), or report `worker blocked TASK_ID --reason ...`")
    grants = [g for _t, gs in held for g in gs]
    outside = [p for p in paths if not any(covers(g, p) for g in grants)]
    if not outside:
        return None
    tasks = ", ".join(t for t, _g in held)
    why = (f"{', '.join(outside[:5])} is outside the grants of {tasks} "
           f"({', '.join(str(g) for g in grants) or 'none'})")
    if "coord.toml" in outside:
        why += "; coord.toml holds the coordinator's settings"
    return Blocked(what, why, "edit only files your grants name; if the task needs this file, "
                   "stop and report `worker blocked TASK_ID --reason \"needs <path>\"`")


# ---- the hook ---------------------------------------------------------------------------

SHELL_TOOLS = {"Bash", "shell", "local_shell", "exec_command", "shell_command", "container.exec"}
EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
PATCH_TOOLS = {"apply_patch"}


def is_coordinator(env: Mapping[str, str]) -> bool:
    from hunkwise.shared.context import session_role

    if env.get("HUNKWISE_COORDINATOR") == "1":
        return True
    return session_role(env.get("COORD_SESSION", "").strip()) in ("coord", "coordinator")


def guard(stdin_text: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """A PreToolUse hook: (exit code, message). Exit 2 blocks the tool call."""
    env = os.environ if env is None else env
    if is_coordinator(env):
        return 0, ""
    try:
        data = json.loads(stdin_text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return 2, ("hunkwise guard: the tool call on stdin is not a JSON object, so it cannot "
                   "be checked; `coord guard` is meant to run as an agent's PreToolUse hook")
    tool = data.get("tool_name")
    ti = data.get("tool_input")
    ti = ti if isinstance(ti, dict) else {}
    if tool in SHELL_TOOLS:
        cmd = ti.get("command")
        if isinstance(cmd, list) and all(isinstance(a, str) for a in cmd):
            cmd = shlex.join(cmd)
        if not isinstance(cmd, str):
            return 2, f"hunkwise guard: a {tool} call without a command string cannot be checked"
        found = check_command(cmd)
        if found is None and "*** Begin Patch" in cmd:
            found = _writes(patch_paths(cmd), data, env)
    elif tool in EDIT_TOOLS:
        path = ti.get("file_path") or ti.get("notebook_path")
        found = _writes([path], data, env) if isinstance(path, str) and path else None
    elif tool in PATCH_TOOLS:
        patch = next((ti[k] for k in ("command", "input", "patch") if isinstance(ti.get(k), str)),
                     None)
        if patch is None:
            return 2, "hunkwise guard: an apply_patch call without a patch cannot be checked"
        found = _writes(patch_paths(patch), data, env)
    else:
        return 0, ""
    return (0, "") if found is None else (2, found.message())


def _writes(paths: list[str], data: dict[str, Any], env: Mapping[str, str]) -> Blocked | None:
    """Check writes against the grants of the session's tasks, read from the state."""
    from hunkwise.shared import git, store
    from hunkwise.shared.errors import CoordError

    session = env.get("COORD_SESSION", "").strip()
    if not session or not paths:
        return None  # no worker session known: writes are not judged (see the worker skill)
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    cwd = cwd or os.getcwd()
    try:
        top = git.toplevel(cwd)
    except Exception:  # not in a repository: not our tree
        return None
    lay = store.layout(top)
    if not lay.state_file.exists():
        return None
    try:
        state = store.load(lay)
    except CoordError as e:
        return Blocked("write " + ", ".join(paths[:3]), f"the hunkwise state is unreadable ({e})",
                       "ask the coordinator")
    root = os.path.realpath(top)
    rels = []
    for p in paths:
        real = os.path.realpath(os.path.join(cwd, p))
        if os.path.commonpath([real, root]) != root:
            continue  # outside the shared tree
        rels.append(os.path.relpath(real, root).replace(os.sep, "/"))
    held = [(t.id, t.grants) for t in sorted(state.tasks.values(), key=lambda t: t.id)
            if t.active and (t.session == session or (t.claim is not None and
                                                       t.claim.session == session))]
    return check_writes(rels, held, session)
