"""Which git invocations a worker may run: the read-only ones, checked option by option.

git accepts any unambiguous prefix of a long option (`reset --har` is `--hard`), so options
are matched exactly against what is allowed, and the few options refused on otherwise
read-only commands (`diff --output`) are refused in every abbreviation too.
"""

from __future__ import annotations

from hunkwise.coordinator.shell import LazyRe, Record, Word

TYPE_CHECKING = False
if TYPE_CHECKING:  # (no `typing` or `re` at run time: a hook call pays for each)
    from collections.abc import Callable, Sequence
    from typing import Any

_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")


def _letters(a: str) -> bool:
    """`-[a-z]+`: a cluster of short options."""
    return len(a) > 1 and a[0] == "-" and all(c in _LOWER for c in a[1:])


class Blocked(Record):
    """Why a command or a write is refused, and what to do instead."""

    __slots__ = ("what", "why", "instead")

    def __init__(self, what: str, why: str, instead: str) -> None:
        self.what = what  # the command or write, as shown to the agent
        self.why = why
        self.instead = instead

    def message(self) -> str:
        return (f"hunkwise blocked `{self.what}`: {self.why}. Instead: {self.instead}. "
                "(This working tree is shared with other workers: edit only within your "
                "grants and finish with `worker done TASK_ID`; the coordinator stages, "
                "commits and restores.)")


# ---- what to do instead -----------------------------------------------------------------

STAGE = ("only the coordinator stages and commits: finish with `worker done TASK_ID`, and "
         "`coord accept` commits exactly your hunks")
UNDO = ("to undo your own edit, edit those lines back; if work was destroyed, ask the "
        "coordinator to run `coord restore TASK_ID`")
HISTORY = ("branches, refs and history belong to the coordinator: if your task needs this, "
           "report `worker blocked TASK_ID --reason \"...\"`")
READ = ("run a read-only git command (status, diff, log, show, blame, grep, ls-files...) "
        "directly, or ask the coordinator with `worker blocked TASK_ID --reason \"...\"`")
PAGERS = {"", "cat", "less", "more"}  # pagers that run nothing else
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
_SAFE_CONFIG = LazyRe(
    r"^(color\..*|advice\..*|column\..*|i18n\..*|core\.quotepath|core\.abbrev|"
    r"diff\.(algorithm|renames|noprefix|mnemonicprefix|context|indentheuristic|relative|"
    r"statgraphwidth|interhunkcontext|colormoved)|log\.(date|decorate|abbrevcommit|follow|"
    r"graphcolors|showroot|mailmap))$")


def _config_ok(setting: str) -> bool:
    key, _, value = setting.partition("=")
    section, _, rest = key.partition(".")
    key = section.lower() + "." + rest.rsplit(".", 1)[-1].lower() if "." in rest else key.lower()
    if key == "core.pager" or section.lower() == "pager":
        return value in PAGERS or value in ("true", "false")
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
        if opt in ("--git-dir", "--work-tree") or (len(opt) >= 5 and (
                "--git-dir".startswith(opt) or "--work-tree".startswith(opt))):
            return Blocked(" ".join(texts)[:120], f"`{opt}` points git at another repository "
                           "or working tree, whose settings can run programs", DIRECT)
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
            known = _known_expansion(w)
            if known is None:
                return Blocked(what, f"the argument `{w.text}` holds an expansion that cannot "
                               "be checked (only paths after `--` may)",
                               "write the arguments out")
            args.append(known)
            continue
        args.append(w.text)
    why = _sub_verdict(sub, args)
    if why is None:
        return None
    reason, instead = _WHY.get(sub, (f"`git {sub}` is not a read-only git command a worker "
                                     "may run", READ))
    return Blocked(what, reason if why == "blocked" else why, instead)


_REV_COMMANDS = ("rev-parse", "merge-base", "rev-list")


def _known_expansion(w: Word) -> str | None:
    """What an argument holding an expansion stands for where that is known: an option
    whose value alone is expanded (`--author="$(git config user.name)"`: the option is
    literal, the value cannot become another option), or the object names a read-only git
    command prints (`$(git rev-parse HEAD)`, `$(git merge-base HEAD main)`; the inner
    command is judged on its own). None: it could be anything, an option included."""
    literal = w.text[:w.plain] if w.plain >= 0 else ""
    if literal.startswith("-") and "=" in literal:
        return literal + "VALUE"
    text = w.text.strip('"')
    if text.startswith("$(") and text.endswith(")") and text.count("$(") == 1:
        inner = text[2:-1].split()
        if len(inner) >= 2 and inner[0] == "git" and inner[1] in _REV_COMMANDS and not any(
                c in text[2:-1] for c in "`;&|<>$\\"):
            return "REV"
    return None


# Options that run a program or write a file, refused on every subcommand in every
# abbreviation git accepts.
_RUNS = {"--upload-pack": "runs a program as the remote's upload-pack",
         "--receive-pack": "runs a program as the remote's receive-pack",
         "--exec": "runs a program on the remote side", "--ext-diff": "runs an external diff "
         "program", "--textconv": "runs the configured text conversion programs",
         "--output": "writes a file", "--open-files-in-pager": "runs a program on the matches"}


def _sub_verdict(sub: str, args: list[str]) -> str | None:
    """None when `git SUB ARGS` is read-only; else why not ("blocked" for the default)."""
    for a in args:
        for opt, why in _RUNS.items():
            if _abbrev_of(a, opt) and not (opt == "--output" and a.startswith("--output-")):
                return f"`{a}` {why}"
            if opt == "--exec" and a.startswith("--exec="):
                return f"`{a}` {why}"
    if sub == "cat-file" and any(_abbrev_of(a, "--filters") for a in args):
        return "`--filters` runs the configured filter programs"
    if sub == "help" and any(a in ("-w", "--web", "-i", "--info") or (
            len(a) > 2 and a.startswith("--") and ("--web".startswith(a) or
                                                   "--info".startswith(a))) for a in args):
        return f"`git help {' '.join(args)[:40]}` opens a browser or a program to show it"
    if sub == "ls-remote":
        for a in args:
            if a == "-u" or (a.startswith("-u") and not a.startswith("--")) or "::" in a:
                return f"`{a}` runs a program (an upload-pack or a remote helper)"
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


_IMPLY_LIST = {"--contains", "--no-contains", "--merged", "--no-merged", "--points-at",
               "--format"}


def _listing(flags: set[str], value_flags: set[str], eq_flags: set[str]) -> Any:
    """A checker for `branch` and `tag`: listing passes; a name without --list creates one."""
    letters = {f[1] for f in flags if len(f) == 2 and _letters(f)}

    def check(args: list[str]) -> str | None:
        # --list, and the filters that imply it (git branch/tag: "--contains, --merged,
        # --points-at, --format ... imply --list")
        listing = "-l" in args or "--list" in args or any(
            a.startswith("-l") and not a.startswith("--") and set(a[1:]) <= letters
            for a in args) or any(a.split("=", 1)[0] in _IMPLY_LIST for a in args)
        i = 0
        while i < len(args):
            a = args[i]
            if a in value_flags:
                i += 2
                continue
            if (a in flags or ("=" in a and a.split("=", 1)[0] in value_flags | eq_flags)
                    or ("n" in letters and a.startswith("-n") and a[2:].isdecimal())
                    or (_letters(a) and set(a[1:]) <= letters)):
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
        if a.startswith("-") and not (a in _APPLY_FLAGS or
                                      (a[1:2] in ("p", "C") and a[2:].isdecimal()) or
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
            if not set(flags) <= set("ndfxXq"):
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


_SPECIAL: dict[str, Callable[[list[str]], str | None]] = {
    "stash": _stash, "branch": _branch, "tag": _tag, "worktree": _worktree,
    "config": _config, "apply": _apply, "clean": _clean, "remote": _remote,
    "reflog": _reflog}
