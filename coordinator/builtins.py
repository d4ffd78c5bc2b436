"""The shell's builtins that run code or change what names mean (`eval`, `trap`, `alias`,
`hash -p`, `source`, `mapfile -C`, `export`), the programs that run commands in their own
ways (`find -exec`, `parallel`, `make`, `gh`, `tmux`, `awk`, `sed`), `coord` itself, and
the programs whose arguments are only data."""

from __future__ import annotations

import os

from hunkwise.coordinator import codescan
from hunkwise.coordinator.filters import awk, sed
from hunkwise.coordinator.gitallow import DIRECT, Blocked
from hunkwise.coordinator.programs import env_danger, is_assignment, judge_argv
from hunkwise.coordinator.runners import _script_arg, follow_code, wrapper
from hunkwise.coordinator.scope import READ_TREE, Scope, _block, shown
from hunkwise.coordinator.shell import LazyRe, Simple, Word
from hunkwise.coordinator.wrappers import SUB_WRAPPERS, S

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hunkwise.coordinator.scope import Judge

# Arguments are data: the word git among them is no reason to block. (Programs that
# write files are judged in shellwrites.py; `sort -o`, `rg --pre` below.)
DATA = set("""
ls cat head tail wc grep egrep fgrep zgrep ag ack diff cmp comm echo pwd stat file du df
tree basename dirname realpath readlink true false test [ which type date sleep jq yq
column nl fold fmt paste join expand unexpand rev tac od hexdump xxd md5sum sha1sum
sha256sum sha512sum b2sum cksum seq wait id whoami hostname uname printenv locale nproc
free uptime ps pgrep kill lsof mkdir tr cut uniq strings env-info shift set exit
return break continue : let umask ulimit getopts jobs fg bg disown dirs popd history
times caller compgen shopt pytest py.test tox nox mypy pyright pylint flake8 pyflakes bandit
coverage pip pip3 pipx cmake ctest ninja meson mvn gradle gradlew ant sbt dotnet swift
rustc gcc g++ cc clang javac java tsc jest vitest mocha ava karma playwright cypress
shellcheck hadolint yamllint markdownlint codespell curl wget cargo go node-gyp deno-lint
just rake bats pydoc tput clear reset stty tty sum base32 numfmt factor expr bc dc
awk-version xmllint jsonlint sqlfluff tokei cloc scc hyperfine npm yarn pnpm man info
whatis apropos tldr
""".split())


# ---- builtins ----------------------------------------------------------------------------

def _eval(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    args = words[1:]
    if any(w.dynamic for w in args):
        return _block(words, "`eval` of expansions runs a command line the guard cannot see",
                      DIRECT)
    return follow_code(Word(" ".join(w.text for w in args)), words, scope, "eval")


def _trap(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    args = [w for w in words[1:] if w.text not in ("--",)]
    if not args or args[0].text.startswith("-") and not args[0].quoted:
        return None  # trap -l, trap -p, trap - SIG: no code
    if len(args) == 1 and not any(c.isspace() or c == ";" for c in args[0].text) and \
            not codescan.names_git(
            args[0].text):
        return None  # `trap SIG` resets it
    return follow_code(args[0], words, scope, "trap")


def _source(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    if len(words) < 2:
        return None
    return _script_arg(words[1], words, scope, cmd, words[0].text, "shell")


def _alias(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    if any("=" in w.text or w.dynamic for w in words[1:]):
        return _block(words, "an alias makes a later name run something else, which the guard "
                      "does not follow", "write the command out in full")
    return None


def _hash(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    if any(w.text.startswith("-") and "p" in w.text for w in words[1:]):
        return _block(words, "`hash -p` makes a name run another program, which the guard "
                      "does not follow", "write the program's path out in full")
    return None


def _enable(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    if any(w.text.startswith("-") and "f" in w.text for w in words[1:]):
        return _block(words, "`enable -f` loads a builtin from a library", DIRECT)
    return None


def _mapfile(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    for i, w in enumerate(words):
        if w.text.startswith("-C"):
            cb = Word(w.text[2:]) if len(w.text) > 2 else (
                words[i + 1] if i + 1 < len(words) else Word(""))
            return follow_code(Word(cb.text + ' "$INDEX" "$LINE"', dynamic=cb.dynamic), words, scope,
                               f"{words[0].text} -C")
    return None


def _declare(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    nameref = any(w.text.startswith("-") and "n" in w.text[1:] for w in words[1:])
    for w in words[1:]:
        if w.text.startswith(("-", "+")) and not w.quoted:
            continue
        found = env_danger(w, scope, words)
        if found is None and nameref and "=" in w.text:  # declare -n ref=GIT_DIR
            found = env_danger(Word(w.text.split("=", 1)[1] + "=?"), scope, words)
        if found is not None:
            return found
    return None


def _read(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    for w in words[1:]:
        if not w.text.startswith("-"):
            found = env_danger(Word(w.text + "="), scope, words)
            if found is not None:
                return found
    return None


def _printf(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    for i, w in enumerate(words[:-1]):
        if w.text == "-v":
            return _read([words[0], words[i + 1]], scope, cmd, appended)
    return None


def _cd(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    args = [w for w in words[1:] if not (w.text.startswith("-") and not w.quoted)]
    if not args:
        scope.cwd = scope.env.get("HOME") or None
    elif args[0].dynamic or args[0].text == "-":
        scope.cwd = None  # somewhere the guard cannot tell: relative paths are unknown
    else:
        scope.cwd = scope.where(args[0].text) if scope.cwd or os.path.isabs(args[0].text) \
            else None
    return None


def _command(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    if len(words) > 1 and words[1].text in ("-v", "-V"):
        return None
    return wrapper(S("", "-p"))(words, scope, cmd, appended)


# ---- programs that run commands their own way ---------------------------------------------

_FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}


def _find(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    from hunkwise.coordinator import shellwrites

    starts = []
    for w in words[1:]:
        if w.text.startswith(("-", "(", "!")):
            break
        starts.append(w)
    names_only = _removes_by_safe_names(words)
    if any(w.text == "-delete" for w in words) and not names_only:
        from hunkwise.coordinator.scope import Write

        if any(w.dynamic for w in starts):
            return _block(words, "`find -delete` from a folder built from expansions: it "
                          "could be .git", "name the folder literally")
        # It may remove any file below where it starts: judged as a rewrite of that tree
        # (protected paths under it, and the grants).
        scope.writes += [Write(scope.where(w.text), shown(words), True)
                         for w in starts or [Word(".")]]
    i = 1
    while i < len(words):
        t = words[i].text
        if t in _FIND_EXEC:
            j = i + 1
            while j < len(words) and words[j].text not in (";", "+"):
                j += 1
            inner = [Word(w.text, dynamic=True) if "{}" in w.text else w for w in words[i + 1:j]]
            if not inner:
                return _block(words, f"`find {t}` without a command", DIRECT)
            if names_only and inner[0].text in ("rm", "rmdir") and not any(
                    w.dynamic and "{}" not in w.text for w in inner):
                i = j + 1
                continue  # it removes only what its names match, which no protected file is
            found = judge_argv(inner, scope, cmd, j < len(words) and words[j].text == "+")
            if found is not None:
                return _block(words, f"`find {t}` runs `{found.what}`: {found.why}",
                              found.instead)
            i = j + 1
            continue
        if t in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(words):
            shellwrites.record([words[i + 1]], scope, words)
        i += 1
    return None


# Files no worker may remove, by name: git's own, the agents' hook settings, the state's.
# A `find` that removes only what its -name patterns match, where no pattern matches any of
# these, cannot reach them; what it removes of other tasks' files the check after the call
# puts back (a cache clean-up: `find . -name '*.pyc' -delete`).
_PROTECTED_NAMES = (".git", ".claude", ".codex", "config", "HEAD", "index", "ORIG_HEAD",
                    "FETCH_HEAD", "packed-refs", "description", "exclude", "pre-commit",
                    "reference-transaction", "post-checkout", "commit-msg", "pre-push",
                    "settings.json", "settings.local.json", "hooks.json", "state.json",
                    "provenance.jsonl", "lock", "index.lock", "before-toolu_1.json",
                    "open-toolu_1.json", "last-sess.json", "done-1.5-toolu_1.json", "coord",
                    "identities", "calls", "inbox", "new", "cur", "tmp", "objects", "refs",
                    "hooks", "info", "logs", "heads", "main", "master", "hunkwise",
                    "0123456789abcdef0123456789abcdef01234567", "ab")
_FIND_SELECTS = {"-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
                 "-lname", "-ilname", "-o", "-or", ",", "-not", "!", "-samefile", "-inum"}


def _removes_by_safe_names(words: list[Word]) -> bool:
    import fnmatch

    pats = []
    for k, w in enumerate(words[:-1]):
        if w.text in ("-name", "-iname"):
            v = words[k + 1]
            if v.dynamic:
                return False
            pats.append((v.text, w.text == "-iname"))
    if not pats or any(w.text in _FIND_SELECTS for w in words):
        return False
    return not any(fnmatch.fnmatchcase(n.lower() if ci else n, p.lower() if ci else p)
                   for p, ci in pats for n in _PROTECTED_NAMES)


def _fd(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    for i, w in enumerate(words):
        if w.text in ("-x", "--exec", "-X", "--exec-batch"):
            inner = [x for x in words[i + 1:] if x.text != ";"]
            if inner:
                found = judge_argv(inner, scope, cmd, True)
                if found is not None:
                    return _block(words, f"`fd {w.text}` runs `{found.what}`: {found.why}",
                                  found.instead)
    return None


def _parallel(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    i = 1
    values = {"-j", "--jobs", "-N", "--max-args", "-n", "-S", "--sshlogin", "--joblog",
              "--results", "-a", "--arg-file", "-I", "--colsep", "-C", "--delimiter", "-d",
              "--timeout", "--tmpdir", "--workdir", "--wd", "--tagstring", "--env", "-E"}
    while i < len(words) and words[i].text.startswith("-"):
        i += 2 if words[i].text in values else 1
    template = []
    while i < len(words) and not words[i].text.startswith(":::"):
        template.append(words[i])
        i += 1
    if not template:
        return _block(words, "`parallel` runs commands from its input, which the guard cannot "
                      "see", READ_TREE)
    if any(w.dynamic for w in template):
        return _block(words, "`parallel` runs a command built from expansions", DIRECT)
    return follow_code(Word(" ".join(w.text for w in template) + ' "$ARG"'), words, scope,
                       "parallel")


def _make(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    for i, w in enumerate(words[1:], 1):
        t = w.text
        if t.startswith(("--eval", "-E")):
            return _block(words, "`make --eval` runs make code the guard cannot read",
                          "put the rule in the Makefile")
        value = None
        if t in ("-f", "--file", "--makefile"):
            value = words[i + 1] if i + 1 < len(words) else Word("-")
        elif t.startswith("-f") and len(t) > 2 and not t.startswith("--"):
            value = Word(t[2:], dynamic=w.dynamic)
        elif t.startswith(("--file=", "--makefile=")):
            value = Word(t.split("=", 1)[1], dynamic=w.dynamic)
        if value is not None and not value.dynamic and scope.where(value.text) in scope.made:
            return _block(words, "a makefile this command line writes cannot be read before "
                          "it runs, and its recipes run commands", "write it in one call and "
                          "run make in another")
        if value is not None and (value.dynamic or value.text in ("-", "/dev/stdin") or
                                  value.text.startswith(("/dev/fd/", "/proc/"))):
            return _block(words, "a makefile on stdin or from an expansion cannot be read, "
                          "and its recipes run commands", "write the makefile to a file and "
                          "name it, or run the commands directly")
        if is_assignment(w) and codescan.names_git(t):
            return _block(words, f"the make variable `{t[:60]}` runs git in recipes",
                          DIRECT)
        if is_assignment(w) and t.split("=", 1)[0].rstrip(":+?") in _MAKE_RUNS:
            return _block(words, f"the make variable `{t[:60]}` changes the shell or the "
                          "flags its recipes run with", "run make without it")
    return None


# make variables that choose the program recipes run in, or add options (--eval) to make
_MAKE_RUNS = {"SHELL", ".SHELLFLAGS", "MAKESHELL", "MAKEFLAGS", "GNUMAKEFLAGS", "MFLAGS",
              "MAKEFILES", "MAKE"}


_GH_READ = {"pr": {"view", "list", "diff", "status", "checks"},
            "issue": {"view", "list", "status"}, "run": {"view", "list", "watch"},
            "repo": {"view", "list"}, "release": {"view", "list"},
            "workflow": {"view", "list"}, "auth": {"status"}, "search": None, "api": None,
            "status": None, "help": None, "--version": None, "--help": None, "label": {"list"},
            "gist": {"view", "list"}, "cache": {"list"}}


def _gh(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    args = [w.text for w in words[1:]]
    if not args:
        return None
    allowed = _GH_READ.get(args[0], set())
    if allowed is None or (len(args) > 1 and args[1] in allowed):
        return None
    return _block(words, "`gh` can run git in the shared tree (pr checkout, repo sync, aliases "
                  "and extensions); only reading commands (pr view/list/diff, issue view, api, "
                  "run view...) pass", "read with `gh pr view`/`gh pr diff`, or report "
                  "`worker blocked TASK_ID --reason \"...\"`")


_TMUX_READ = {"ls", "list-sessions", "list-windows", "lsw", "list-panes", "lsp",
              "list-clients", "lsc", "list-buffers", "lsb", "list-keys", "lsk",
              "list-commands", "lscm", "has-session", "has", "capture-pane", "capturep",
              "show-options", "show", "show-environment", "showenv", "show-buffer", "showb",
              "info", "server-info", "-V"}
_TMUX_KILL = {"kill-session", "kill-server", "kill-pane", "killp", "kill-window", "killw"}


def _tmux(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    i = 1
    while i < len(words) and words[i].text.startswith("-") and words[i].text != "-V":
        if words[i].text in ("-c", "-f"):
            break
        i += 2 if words[i].text in ("-L", "-S", "-T") else 1
    sub = words[i].text if i < len(words) else ""
    if sub in _TMUX_READ or (words[0].text.endswith("screen") and sub in ("-ls", "-list")):
        return None
    if sub in _TMUX_KILL:
        return _block(words, f"`{words[0].text} {sub}` ends terminals the guard does not "
                      "see: the coordinator's launched agents run in tmux", "leave the "
                      "terminals to the coordinator (coord stop ends a launched agent)")
    if not sub and not words[0].text.endswith("screen"):
        sub = "new-session"
    return _block(words, f"`{words[0].text} {sub}` runs or types commands in a terminal the "
                  "guard does not see", "run the commands directly in your own shell calls")


def _pre_commit(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    args = [w.text for w in words[1:]]
    sub = args[0] if args else "run"
    if sub in ("--version", "-V", "help", "--help", "validate-config", "validate-manifest",
               "sample-config"):
        return None
    if sub == "run" and any(a in ("-a", "--all-files") for a in args):
        from hunkwise.coordinator import shellwrites

        shellwrites.record([Word(".")], scope, words, tree=True, formatter="pre-commit run --files")
        return None
    if sub == "run" and "--files" in args:
        from hunkwise.coordinator import shellwrites

        k = args.index("--files")
        shellwrites.record([w for w in words[k + 2:] if not w.text.startswith("-")], scope, words)
        return None
    return _block(words, f"`pre-commit {sub}` stashes unstaged changes of the shared tree (or "
                  "writes .git/hooks)", "run `pre-commit run --files <your files>` or "
                  "`--all-files`, which do not stash")


def _sub_wrapper(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    base = words[0].text.rsplit("/", 1)[-1]
    sub = words[1].text if len(words) > 1 else ""
    if base in ("npm", "pnpm", "yarn", "bun"):
        texts = [w.text for w in words[1:]]
        if any(t.startswith(("--script-shell", "--shell", "--node-options")) for t in texts):
            return _block(words, f"`{base} --script-shell` (or --node-options) runs a program "
                          "of its own choosing for every script", f"run {base} without it")
        if sub == "pkg" and "set" in texts or sub == "set-script" or (
                sub == "config" and "set" in texts):
            return _block(words, f"`{base} {sub} set` changes the scripts or settings npm runs "
                          "(package.json is a file: edit it with your edit tool, within your "
                          "grants)", "edit package.json directly if your grants hold it")
        if sub in ("run", "run-script") and len(words) > 2 and base in ("yarn", "pnpm", "bun"):
            # a name that is no script of package.json runs the program of that name
            found = judge_argv(words[2:], scope, cmd, appended)
            if found is not None:
                return _block(words, f"`{base} run` runs `{found.what}`: {found.why}",
                              found.instead)
    spec = SUB_WRAPPERS.get((base, sub))
    if spec is None and base == "uv" and sub == "tool" and len(words) > 2 and \
            words[2].text == "run":
        return wrapper(SUB_WRAPPERS[("uv", "tool")], 3)(words, scope, cmd, appended)
    if spec is None:
        from hunkwise.coordinator import shellwrites

        return shellwrites.writer(words, scope, cmd, appended)
    return wrapper(spec, 2)(words, scope, cmd, appended)


def _coord(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    from hunkwise.coordinator.coordallow import coord_refusal

    if any(w.dynamic for w in words[1:3]):
        return _block(words, "a `coord` command built from expansions cannot be checked",
                      "write the command out")
    why = coord_refusal([w.text for w in words[1:]])
    return None if why is None else _block(words, why, "read with `coord status`, `coord "
                                           "diff`, `coord inbox`; ask the coordinator with "
                                           "`worker blocked TASK_ID --reason \"...\"`")


# worker commands that act on the task they name (start claims a new one: it refuses a
# task another live session holds by itself)
_WORKER_ON_TASK = {"done", "blocked", "failed", "handoff", "checkpoint", "heartbeat", "ask",
                   "check", "diff", "review"}


def _worker(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    args = [w for w in words[1:] if not w.text.startswith("-")]
    if len(args) < 2 or args[0].text not in _WORKER_ON_TASK or scope.held is None:
        return None
    if args[1].dynamic:
        return _block(words, "a `worker` command whose task is built from expansions cannot be "
                      "checked", "name your task literally")
    held = scope.held()
    if held is None or args[1].text in held or args[0].text == "review":
        return None
    return _block(words, f"`worker {args[0].text} {args[1].text}` acts on a task this session "
                  f"does not hold ({', '.join(held) or 'none'})", "act only on your own task")


def _rg(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    if any(w.text == "--pre" or w.text.startswith("--pre=") for w in words[1:]):
        return _block(words, "`rg --pre` runs a program on every file", "search without --pre")
    return None


def _apply_patch(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    """Codex's apply_patch run from a shell: the patch is its argument or its stdin."""
    from hunkwise.coordinator import applypatch, shellwrites
    from hunkwise.coordinator.runners import _produced

    if len(words) > 1:
        text = None if words[1].dynamic else words[1].text
    elif cmd.stdin in ("heredoc", "herestring"):
        text = cmd.stdin_text
    else:
        text = _produced(cmd.piped_from) if cmd.stdin == "pipe" else None
    if text is None:
        return _block(words, "the guard cannot read the patch this apply_patch applies",
                      "pass the patch literally (a quoted here-document)")
    try:
        targets = applypatch.paths(text)
    except applypatch.PatchError as e:
        return _block(words, f"the patch cannot be read as Codex reads it ({e})",
                      "write a well-formed patch: *** Begin Patch ... *** End Patch")
    shellwrites.record([Word(t) for t in targets], scope, words)
    return None


_SSH_RUNS = LazyRe(r"(?i)^(proxycommand|localcommand|permitlocalcommand|knownhostscommand|"
                       r"match)\b")


def _ssh(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    for i, w in enumerate(words[1:], 1):
        t = w.text
        opt = t[2:] if t.startswith("-o") and len(t) > 2 else (
            words[i + 1].text if t == "-o" and i + 1 < len(words) else None)
        if t.startswith("-F") or (opt is not None and _SSH_RUNS.match(opt.lstrip())):
            return _block(words, "this ssh option runs a local command (ProxyCommand, "
                          "LocalCommand, a config file)", DIRECT)
    from hunkwise.coordinator.wrappers import WRAPPERS

    return wrapper(WRAPPERS["ssh"])(words, scope, cmd, appended)


HANDLERS_MORE: dict[str, Judge] = {
    "eval": _eval, "trap": _trap, "source": _source, ".": _source, "alias": _alias,
    "hash": _hash, "enable": _enable, "mapfile": _mapfile, "readarray": _mapfile,
    "export": _declare, "declare": _declare, "typeset": _declare, "local": _declare,
    "unset": _declare,
    "readonly": _declare, "read": _read, "printf": _printf, "cd": _cd, "pushd": _cd,
    "command": _command, "find": _find, "fd": _fd, "fdfind": _fd, "parallel": _parallel,
    "make": _make, "gmake": _make, "gh": _gh, "tmux": _tmux, "screen": _tmux,
    "pre-commit": _pre_commit, "coord": _coord, "worker": _worker,
    "awk": awk, "gawk": awk, "mawk": awk, "nawk": awk, "busybox-awk": awk,
    "sed": sed, "gsed": sed, "rg": _rg, "ssh": _ssh, "apply_patch": _apply_patch,
    "applypatch": _apply_patch,
    "env": wrapper(S("-u --unset -C --chdir", "-i --ignore-environment -0 --null -v --debug "
                     "- --block-signal --default-signal --ignore-signal --list-signal-handling",
                     code="-S --split-string")),
}
for _name in ("uv", "poetry", "pdm", "hatch", "pipenv", "rye", "conda", "mamba", "micromamba",
              "pixi", "bundle", "direnv", "npm", "pnpm", "yarn", "ip", "nix"):
    HANDLERS_MORE[_name] = _sub_wrapper
RUNNERS_MORE: set[str] = {"eval", "trap", "source", ".", "find", "fd", "parallel", "make", "gh", "tmux",
                "screen", "env", "npx", "uv", "poetry", "npm", "yarn", "pnpm", "bun"}


def _register_writers() -> None:
    from hunkwise.coordinator.shellwrites import WRITERS, writer

    for name in WRITERS:
        HANDLERS_MORE.setdefault(name, writer)


_register_writers()
