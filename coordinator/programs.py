"""Which program each simple command of a worker's shell line runs, and what it may reach.

The guard's allow-list is closed by construction: every simple command is resolved to a
program (through the shell's own constructs: wrappers, `sh -c`, `eval`, traps, functions,
here-documents, pipes into a shell, scripts) and judged by what that program does:

- git, under any name that reaches the git binary (a path, PATH, a symlink, a copy),
  goes to the git allow-list (gitallow.py);
- wrappers (`timeout`, `env`, `xargs`, `setpriv`, `npx`...) are parsed option by option and
  the command they run is judged in turn; code-string runners (`eval`, `trap`, `sh -c`,
  `watch`, `ssh`, `su -c`...) have their string judged as a command line;
- interpreters with code strings or scripts (`python -c`, `perl -e`, `node -e`, a script
  file) are opaque: judged as text by codescan.py;
- programs whose arguments are data (`grep`, `ls`, `pytest`, ...) pass: the word git as an
  argument is no reason to block;
- any other program is unknown: it may be a wrapper, so git, a shell or a wrapper among its
  arguments is judged as the command it could run.

Writes whose targets are visible (redirections, `sed -i`, `cp`, `rm`, formatters...) are
collected in `Scope.writes` for the guard to judge against the session's grants
(shellwrites.py).
"""

from __future__ import annotations

import os

from hunkwise.coordinator import codescan, shellwrites
from hunkwise.coordinator import scope as table
from hunkwise.coordinator.gitallow import DIRECT, PAGERS, Blocked, check_git
from hunkwise.coordinator.scope import (
    READ_TREE,
    SHOWN,
    Scope,
    _block,
    git_named,
    is_git_binary,
    our_scripts,
    read_script,
    resolve,
)
from hunkwise.coordinator.shell import LazyRe, Simple, Unparsable, Word, lex, simple_commands

# ---- the line -----------------------------------------------------------------------------

_KEYWORDS = {"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "[[", "]]",
             "coproc"}
_NO_COMMAND = {"for", "case", "select", "in", "esac", "fi", "done"}
_ASSIGN = LazyRe(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_SUBSCRIPT = LazyRe(r"\[.*$")
_SEPARATORS = LazyRe(r"[\s;&|]")


def check_line(command: str, scope: Scope, opaque_fallback: bool = False) -> Blocked | None:
    """Why a worker may not run this shell command line, or None when it may."""
    show = command.strip().replace("\n", "; ")[:SHOWN]
    if scope.depth > 8:
        return Blocked(show, "commands nested this deep cannot be checked", DIRECT)
    if scope.depth == 0:
        scope.names_git = codescan.names_git(command)
    try:
        lexed = lex(command)
        cmds = simple_commands(lexed)
    except Unparsable as e:
        if opaque_fallback:
            why = codescan.opaque_verdict(command)
            return None if why is None else Blocked(show, f"this script: {why}", READ_TREE)
        return Blocked(show, f"the guard cannot parse this command line ({e})",
                       "write it as plain commands the guard can read")
    for sub in lexed.subs:
        found = check_line(sub, scope.child())
        if found is not None:
            return found
    for cmd in cmds:
        found = judge_simple(cmd, scope)
        if found is not None:
            return found
    if "&" in lexed.tokens or any(c.words and not c.words[0].quoted and c.words[0].text in
                                  _DETACH for c in cmds):
        return Blocked(show, "it leaves a command running after the call ends, past the check "
                       "that follows every call (a write it makes then is never put back)",
                       "run it in the foreground")
    return None


# Programs whose whole point is to outlive the call that starts them.
_DETACH = {"nohup", "setsid", "disown", "daemonize", "at", "batch", "start-stop-daemon"}


def is_assignment(w: Word) -> bool:
    """NAME=value, with NAME and `=` unquoted (`'A=1' cmd` runs a program named A=1)."""
    if "=" not in w.text:
        return False
    m = _ASSIGN.match(w.text)
    return m is not None and (w.plain < 0 or m.end() <= w.plain)


def judge_simple(cmd: Simple, scope: Scope) -> Blocked | None:
    words = list(cmd.words)
    shellwrites.redirections(cmd, scope)
    while words and not words[0].quoted and words[0].text in _KEYWORDS:
        words.pop(0)
    if words and not words[0].quoted and words[0].text == "time":
        words.pop(0)
        while words and words[0].text in ("-p", "--"):
            words.pop(0)
    if words and not words[0].quoted and words[0].text == "function":
        words = words[2:]  # `function NAME`: its body is judged as it would run
        while words and not words[0].quoted and words[0].text in _KEYWORDS:
            words.pop(0)
    if not words or (not words[0].quoted and words[0].text in _NO_COMMAND):
        return scope.refused
    assigns = []
    while words and is_assignment(words[0]):
        assigns.append(words.pop(0))
    for a in assigns:
        found = env_danger(a, scope, words or [a])
        if found is not None:
            return found
    if not words:
        return scope.refused
    return judge_argv(words, scope, cmd, False) or scope.refused


# ---- the environment ----------------------------------------------------------------------

_SAFE_GIT_ENV = {"GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS", "GIT_LITERAL_PATHSPECS",
                 "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS",
                 "GIT_FLUSH", "GIT_ADVICE"}
_PAGER_ENV = {"GIT_PAGER", "PAGER", "MANPAGER"}
# Run a program or change what a shell, git or an interpreter loads, whatever follows.
_ALWAYS_ENV = {"BASH_ENV", "ENV", "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS3", "PS4",
               "SHELLOPTS", "BASHOPTS", "LD_PRELOAD", "LD_AUDIT", "LESS", "LESSOPEN",
               "LESSCLOSE", "BROWSER", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT", "SSH_ASKPASS",
               "SUDO_ASKPASS", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONPATH", "PYTHONHOME",
               "PYTHONUSERBASE", "PYTHONEXECUTABLE", "PERL5LIB", "PERLLIB", "PERL5DB",
               "RUBYLIB", "NODE_PATH", "MAKEFLAGS", "GNUMAKEFLAGS", "MFLAGS", "MAKEFILES",
               "MAKESHELL", "MORE", "HISTFILE", "PROMPT_DIRTRIM", "INPUTRC", "EMACSLOADPATH",
               "VIMINIT", "EXINIT", "MYVIMRC", "ZDOTDIR", "TMUX_TMPDIR"}
# Say who is running: the coordinator's mark, a session id, the agents' own session ids
# (the guard and `coord` know a worker by them), the state's place, the machine's name.
_IDENTITY_ENV = {"HUNKWISE_COORDINATOR", "COORD_SESSION", "COORD_DIR", "COORD_TASK",
                 "CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID", "HUNKWISE_MACHINE"}
# Change which git runs or which configuration it reads: refused in a line that runs git.
_GIT_LINE_ENV = {"PATH", "HOME", "XDG_CONFIG_HOME", "EDITOR", "VISUAL", "LD_LIBRARY_PATH"}


def env_danger(word: Word, scope: Scope, words: list[Word]) -> Blocked | None:
    """Why setting (or exporting) this variable is refused: NAME=value or a bare NAME."""
    name, eq, value = word.text.partition("=")
    name = name.rstrip("+")
    if "[" in name:
        name = _SUBSCRIPT.sub("", name)
    bad = ""
    if any(c in name for c in "$`") or (word.dynamic and not name):
        return _block(words, f"`{word.text[:60]}` sets a variable whose name the guard cannot "
                      "see (it could be one that changes what git or a shell runs)",
                      "name the variable literally")
    if name in _IDENTITY_ENV:
        bad = "says who is running: the coordinator's mark, or another session's identity"
    elif name.startswith("npm_config_") or name.startswith("NPM_CONFIG_"):
        bad = "changes which programs npm runs (script-shell, node-options)"
    elif name in _PAGER_ENV:
        if not eq or word.dynamic or value not in PAGERS:
            bad = "names a program git or man runs as the pager"
    elif name.startswith("GIT_") and name not in _SAFE_GIT_ENV:
        bad = "changes which repository git works on or which programs it runs"
    elif name in _ALWAYS_ENV or name.startswith(("BASH_FUNC_", "LESSKEY")):
        bad = "runs code when a shell, a pager or an interpreter starts"
    elif name in _GIT_LINE_ENV and scope.names_git:
        bad = "changes which git runs or which configuration it reads, in a line that runs git"
    if not bad:
        return None
    return _block(words, f"`{name}` {bad}; workers may not set it in any form (prefix, "
                  "`env`, `export`, `declare`)", DIRECT)


# ---- resolving the program ----------------------------------------------------------------

def follow_script(real: str, words: list[Word], scope: Scope) -> Blocked | None:
    found = read_script(real)
    if found is None:
        return None
    lang, text = found
    if lang == "shell":
        # A script that never names git cannot run it by itself; one that does is followed
        # command by command.
        if not codescan.may_reach_git(text):
            return None
        inner = check_line(text, scope.child(), opaque_fallback=True)
        if inner is None:
            return None
        return _block(words, f"the script {real} runs `{inner.what}`: {inner.why}", DIRECT)
    why = codescan.opaque_verdict(text)
    return None if why is None else _block(words, f"the script {real}: {why}", READ_TREE)


# ---- one command --------------------------------------------------------------------------

def judge_argv(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    """Judge `words` as a command (words[0] the program); `appended`: it gets more
    arguments the guard cannot see (`xargs`, `find -exec ... +`)."""
    head = words[0]
    if head.dynamic or head.glob:
        return _block(words, f"the guard cannot tell which program `{head.text}` runs",
                      "name the program literally")
    if is_assignment(head):
        found = env_danger(head, scope, words)
        if found is not None:
            return found
        rest = words[1:]
        return judge_argv(rest, scope, cmd, appended) if rest else None
    name = head.text
    base = name.rsplit("/", 1)[-1]
    real = resolve(name, scope)
    if git_named(name) or (real is not None and is_git_binary(real)):
        if appended:
            words = words + [Word("ARGS", dynamic=True)]
        if git_named(name) or real is None:
            return check_git(words)
        as_git = Word(real if os.path.basename(real).startswith("git-") else "git")
        found = check_git([as_git] + words[1:])
        return None if found is None else _block(
            words, f"`{name}` is git under another name, and `{found.what}`: {found.why}",
            found.instead)
    if real is not None and real not in our_scripts():
        found = follow_script(real, words, scope)
        if found is not None:
            return found
    elif "/" in name and scope.where(name) in scope.made:
        return _block(words, f"`{name}` is a program this command line writes, which the guard "
                      "cannot read before it runs", "write it in one call and run it in "
                      "another, so the guard can read it")
    handler = table.handler_for(base)
    if handler is not None:
        return handler(words, scope, cmd, appended)
    if base in table.DATA:
        return None
    return unknown(words, scope, cmd)


def unknown(words: list[Word], scope: Scope, cmd: Simple,
            who: str = "") -> Blocked | None:
    """A program the guard does not know (or a wrapper given an option it does not know):
    it may run its arguments as a command."""
    who = who or f"`{words[0].text}` is not a program the guard knows"

    for i in range(1, len(words)):
        w = words[i]
        base = w.text.rsplit("/", 1)[-1]
        if git_named(w.text) or base in table.RUNNERS:
            inner = judge_argv(words[i:], scope, cmd, False)
            if inner is not None:
                return _block(words, f"{who}, and it could run `{inner.what}` ({inner.why})",
                              DIRECT)
        elif (w.dynamic or _SEPARATORS.search(w.text)) and codescan.names_git(w.text):
            return _block(words, f"{who}, and its argument `{w.text[:60]}` looks like a command "
                          "that runs git", DIRECT)
    return None
