"""The files a shell command writes, where the command line names them: redirections,
`tee`, `sed -i`, `perl -pi`, `cp`, `mv`, `rm`, `ln`, `dd of=`, `chmod`, `touch`,
`truncate`, `install`, `patch`, and formatters run on files or whole trees (`black .`,
`ruff format`, `prettier --write`). The guard judges them like Edit/Write calls; a target
built from expansions is unknown here (the after-call check sees what it wrote)."""

from __future__ import annotations

import os

from hunkwise.coordinator.gitallow import DIRECT, Blocked
from hunkwise.coordinator.programs import Scope, Write, _block, is_git_binary, shown
from hunkwise.coordinator.shell import Simple, Word

_NOT_FILES = {"-", "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
_FD_FOLDERS = ("/dev/fd/", "/proc/self/fd/")


def _not_a_file(text: str) -> bool:
    """A redirection target that names no file: `-`, /dev/null, a descriptor."""
    if text in _NOT_FILES:
        return True
    for folder in _FD_FOLDERS:
        if text.startswith(folder) and text[len(folder):].isdecimal():
            return True
    return False


def _descriptor(text: str) -> bool:
    """`N`, `N-` or `-`: what `>&` duplicates or closes (no file)."""
    return text == "-" or text.removesuffix("-").isdecimal()
_OUT = {">", ">>", ">|", "&>", "&>>", "<>"}
_MODE_LETTERS = set("rwxXstugoa")


def record(targets: list[Word], scope: Scope, words: list[Word], tree: bool = False,
           formatter: str = "") -> None:
    what = shown(words) if words else ""
    from hunkwise.coordinator import codescan

    for t in targets:
        if t.dynamic and scope.refused is None and codescan.names_git(t.text):
            scope.refused = _block(words or [t], f"it writes to `{t.text[:60]}`, a path built "
                                   "from git's output (the repository, its .git directory)",
                                   "name the files you write literally")
        if t.dynamic or not t.text or _not_a_file(t.text):
            continue
        path = scope.where(t.text)
        scope.made.add(path)
        is_tree = tree and (os.path.isdir(path) or t.text.endswith(("/", "/...")) or
                            t.text in (".", "./..."))
        scope.writes.append(Write(path.removesuffix("/..."), what, is_tree, formatter))


def redirections(cmd: Simple, scope: Scope) -> None:
    for op, target in cmd.redirs:
        if op in _OUT or (op == ">&" and not _descriptor(target.text)):
            record([target], scope, cmd.words or [Word(op), target])


def _positional(args: list[Word], values: set[str]) -> tuple[list[Word], dict[str, Word]]:
    """The operands of a command, and the options given with values."""
    out, opts, i = [], {}, 0
    while i < len(args):
        w = args[i]
        t = w.text
        if t == "--" and not w.quoted:
            out += args[i + 1:]
            break
        if t.startswith("-") and len(t) > 1 and not w.quoted:
            name, eq, v = t.partition("=")
            if name in values and not eq and i + 1 < len(args):
                opts[name] = args[i + 1]
                i += 2
                continue
            if eq:
                opts[name] = Word(v, dynamic=w.dynamic)
            elif not t.startswith("--") and t[:2] in values and len(t) > 2:
                opts[t[:2]] = Word(t[2:], dynamic=w.dynamic)
            else:
                for c in t[1:] if not t.startswith("--") else ():
                    opts.setdefault(f"-{c}", Word(""))
                opts.setdefault(t, Word(""))
            i += 1
            continue
        out.append(w)
        i += 1
    return out, opts


def _into(dest: Word, sources: list[Word], scope: Scope, many: bool) -> list[Word]:
    """cp/mv/ln/install: the files written under DEST (a directory) or DEST itself."""
    path = scope.where(dest.text) if not dest.dynamic else ""
    if dest.dynamic:
        return [dest]
    if many or dest.text.endswith("/") or (path and os.path.isdir(path)):
        return [Word(os.path.join(dest.text, os.path.basename(s.text.rstrip("/"))),
                     dynamic=s.dynamic) for s in sources]
    return [dest]


def _copies_git(sources: list[Word], scope: Scope, words: list[Word]) -> Blocked | None:
    from hunkwise.coordinator import codescan
    from hunkwise.coordinator.programs import git_named

    for s in sources:
        real = os.path.realpath(scope.where(s.text)) if not s.dynamic else ""
        if (git_named(s.text) and not s.text.endswith("/")) or (real and os.path.isfile(real)
                                                               and is_git_binary(real)) or (
                s.dynamic and codescan.names_git(s.text)):
            return _block(words, "this makes a copy or link of git under another name, which "
                          "would run git past the guard", DIRECT)
    return None


_VALUES = {
    "cp": "-t --target-directory -S --suffix --backup", "mv": "-t --target-directory -S --suffix",
    "install": "-t --target-directory -m --mode -o --owner -g --group -S --suffix",
    "ln": "-t --target-directory -S --suffix", "truncate": "-s --size -r --reference",
    "touch": "-d --date -t -r --reference", "chmod": "--reference", "chown": "--reference",
    "chgrp": "--reference", "tee": "", "rm": "", "unlink": "", "shred": "-n --iterations -s "
    "--size", "rmdir": "", "sponge": "", "sort": "-o --output -k --key -t --field-separator -S "
    "--buffer-size -T --temporary-directory --parallel --batch-size",
    "patch": "-o --output -i --input -p --strip -d --directory -r --reject-file -B --prefix "
    "-F --fuzz -D --ifdef -V --version-control -z --suffix -Y --basename-prefix",
    "dd": "",
}
# Formatters: (options with values, options that make it write, options that keep it from
# writing, default target when no path is given).
_FORMATTERS: dict[str, tuple[str, str, str, str]] = {
    "black": ("-l --line-length -t --target-version --config --include --exclude "
              "--extend-exclude --force-exclude --stdin-filename -W --workers "
              "--required-version --python-cell-magics", "", "--check --diff -h --help "
              "--version", ""),
    "isort": ("--settings-path --sp -l --line-length -p --project --src --virtual-env "
              "--profile -m --multi-line -j --jobs --filter-files-glob", "",
              "--check --check-only -c --diff --df --show-config -h --help --version", ""),
    "prettier": ("--config --ignore-path --plugin --parser --stdin-filepath --tab-width "
                 "--print-width --log-level --cache-location --end-of-line --trailing-comma",
                 "--write -w", "", ""),
    "gofmt": ("-r", "-w", "", ""), "autopep8": ("--max-line-length --select --ignore -j",
                                                "-i --in-place", "", ""),
    "yapf": ("--style -p --parallel -e --exclude", "-i --in-place", "", ""),
    "clang-format": ("--style -style --assume-filename", "-i", "", ""),
    "rustfmt": ("--edition --config-path --config --emit", "", "--check -h --help", ""),
    "shfmt": ("-i -ln", "-w --write", "", ""),
    "eslint": ("-c --config --ext --rule --plugin --parser -f --format -o --output-file "
               "--ignore-path --resolve-plugins-relative-to --max-warnings",
               "--fix", "--fix-dry-run", ""),
    "stylua": ("--config-path -f --search-parent-directories", "", "--check -c", ""),
}


def _formatter(name: str, words: list[Word], scope: Scope, args: list[Word]) -> None:
    values, writes, nowrite, default = _FORMATTERS[name]
    pos, opts = _positional(args, set(values.split()))
    if any(o in opts for o in nowrite.split()):
        return
    if writes and not any(o in opts for o in writes.split()):
        return
    targets = pos or ([Word(default)] if default else [])
    record([t for t in targets if t.text != "-"], scope, words, tree=True, formatter=name)


def writer(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    """Record what this command writes; refuse copies and links of git."""
    name = words[0].text.rsplit("/", 1)[-1]
    args = words[1:]
    sub = args[0].text if args else ""
    if name in _FORMATTERS:
        _formatter(name, words, scope, args)
        return None
    if name == "ruff" and sub in ("format", "check"):
        pos, opts = _positional(args[1:], {"--config", "--select", "--ignore", "--extend-select",
                                           "--line-length", "--target-version", "--exclude",
                                           "--extend-exclude", "--output-format",
                                           "--stdin-filename", "--cache-dir", "-o",
                                           "--output-file", "--per-file-ignores"})
        if "-o" in opts or "--output-file" in opts:
            record([opts.get("-o") or opts["--output-file"]], scope, words)
        fix = sub == "format" or "--fix" in opts or "--fix-only" in opts
        if fix and not any(o in opts for o in ("--check", "--diff", "--no-fix")):
            record(pos or [Word(".")], scope, words, tree=True, formatter="ruff " + sub)
        return None
    if name in ("cargo", "go") and sub == "fmt":
        if not any(a.text in ("--check", "-n", "-l") for a in args):
            record([Word("./...")] if name == "go" else [Word(".")], scope, words, tree=True,
                   formatter=f"{name} fmt")
        return None
    if name not in _VALUES:
        return None
    if name == "dd":
        record([Word(a.text[3:], dynamic=a.dynamic) for a in args if a.text.startswith("of=")],
               scope, words)
        return None
    pos, opts = _positional(args, set(_VALUES[name].split()))
    recursive = any(o in opts for o in ("-r", "-R", "--recursive", "-a", "--archive"))
    target_dir = opts.get("-t") or opts.get("--target-directory")
    if name in ("cp", "mv", "install", "ln"):
        if name != "mv":
            found = _copies_git(pos if name != "ln" or len(pos) != 1 else pos, scope, words)
            if found is not None:
                return found
        if name == "install" and "-d" in opts:
            return None
        if target_dir is not None:
            sources, written = pos, _into(target_dir, pos, scope, True)
        elif name == "ln" and len(pos) == 1:
            sources, written = pos, [Word(os.path.basename(pos[0].text), pos[0].dynamic)]
        elif len(pos) >= 2:
            sources, written = pos[:-1], _into(pos[-1], pos[:-1], scope, len(pos) > 2)
        else:
            return None
        record(written, scope, words, tree=recursive or name == "mv")
        if name == "mv":
            record(sources, scope, words, tree=True)
        return None
    if name in ("chmod", "chown", "chgrp"):
        mode_opt = any(len(w.text) > 1 and w.text[0] == "-" and set(w.text[1:]) <= _MODE_LETTERS
                       for w in args)
        targets = pos if "--reference" in opts or (name == "chmod" and mode_opt) else pos[1:]
        record(targets, scope, words, tree=recursive)
        return None
    if name == "sort":
        if any(k.startswith("--compress") for k in opts):
            return _block(words, "`sort --compress-program` runs a program", "sort without it")
        out = opts.get("-o") or opts.get("--output")
        if out is not None:
            record([out], scope, words)
        return None
    if name == "patch":
        out = opts.get("-o") or opts.get("--output")
        if out is not None:
            record([out], scope, words)
        elif pos:
            record(pos[:1], scope, words)
        else:
            record(_patched_files(cmd, opts, scope), scope, words)
        return None
    record(pos, scope, words, tree=name in ("rm", "shred", "rmdir") and (recursive or
                                                                        name == "rmdir"))
    return None


def _patched_files(cmd: Simple, opts: dict[str, Word], scope: Scope) -> list[Word]:
    """The files a unified diff on patch's stdin (a here-document) or `-i FILE` names."""
    text = cmd.stdin_text if cmd.stdin in ("heredoc", "herestring") else None
    src = opts.get("-i") or opts.get("--input")
    if src is None and cmd.stdin == "file":
        src = next((t for op, t in cmd.redirs if op == "<"), None)
    if src is not None and not src.dynamic:
        try:
            with open(scope.where(src.text), encoding="utf-8", errors="replace") as f:
                text = f.read(4 * 1024 * 1024)
        except OSError:
            text = None
    if text is None:
        return []
    strip = opts.get("-p") or opts.get("--strip")
    n = int(strip.text) if strip is not None and strip.text.isdigit() else None
    out = []
    for line in text.split("\n"):
        if line.startswith(("+++ ", "--- ")):
            name = line[4:].split("\t", 1)[0].strip()
            if name == "/dev/null":
                continue
            parts = name.split("/")
            name = parts[-1] if n is None else "/".join(parts[n:])
            if name:
                out.append(Word(name))
    return out


WRITERS = set(_VALUES) | set(_FORMATTERS) | {"ruff", "cargo", "go"}
