"""The files a shell command writes, where the command line names them: redirections,
`tee`, `sed -i`, `perl -pi`, `cp`, `mv`, `rm`, `ln`, `dd of=`, `chmod`, `touch`,
`truncate`, `install`, `patch`, and formatters run on files or whole trees (`black .`,
`ruff format`, `prettier --write`). The guard judges them like Edit/Write calls; a target
built from expansions is unknown here (the after-call check sees what it wrote)."""

from __future__ import annotations

import os

from hunkwise.coordinator.gitallow import DIRECT, Blocked
from hunkwise.coordinator.scope import Scope, Write, _block, is_git_binary, shown
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
           formatter: str = "", destroys: bool = False) -> None:
    """Note what a command writes. `destroys`: it removes what it names (rm, mv, a
    compressor), so a target the guard cannot see is refused: it could be `.git`, which
    nothing after the call can bring back."""
    what = shown(words) if words else ""
    from hunkwise.coordinator import codescan

    for t in targets:
        if t.dynamic and scope.refused is None and codescan.names_git(t.text):
            scope.refused = _block(words or [t], f"it writes to `{t.text[:60]}`, a path built "
                                   "from git's output (the repository, its .git directory)",
                                   "name the files you write literally")
        if t.dynamic and (destroys or tree) and scope.refused is None:
            scope.refused = _block(words or [t], f"it removes or rewrites `{t.text[:60]}`, a "
                                   "path built from expansions the guard cannot see (it could "
                                   "be .git or another task's files)",
                                   "name the paths literally")
        text = _at_home(t, scope)
        if text is None and (t.dynamic or not t.text or _not_a_file(t.text)):
            continue
        path = scope.where(text or t.text)
        scope.made.add(path)
        is_tree = tree and (os.path.isdir(path) or t.text.endswith(("/", "/...")) or
                            t.text in (".", "./..."))
        scope.writes.append(Write(path.removesuffix("/..."), what, is_tree, formatter))


def _at_home(t: Word, scope: Scope) -> str | None:
    """The path a target under the home folder names (`~/x`, `$HOME/x`, `${HOME}/x`, the
    rest literal), as the shell expands it; None for any other target."""
    home = scope.env.get("HOME") or os.path.expanduser("~")
    if t.text in ("$HOME", "${HOME}") and t.dynamic or t.text == "~" and t.plain < 0:
        return home
    for head in ("~/", "$HOME/", "${HOME}/"):
        if t.text.startswith(head) and (
                t.dynamic if head != "~/" else (t.plain < 0 or t.plain >= 2)):
            rest = t.text[len(head):].lstrip("/")
            if any(c in rest for c in "$`*?[{~\\'\""):
                return None
            return os.path.join(home, rest) if rest else home
    return None


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
    home = _at_home(dest, scope)
    if home is not None:  # (`cp .bashrc ~`: into the home folder; `cp x ~/.gitconfig`: onto it)
        folder = dest.text in ("~", "$HOME", "${HOME}") or dest.text.endswith("/")
        dest = Word(home + os.sep if folder else home)
    path = scope.where(dest.text) if not dest.dynamic else ""
    if dest.dynamic:
        return [dest]
    if many or dest.text.endswith("/") or (path and os.path.isdir(path)):
        return [Word(os.path.join(dest.text, os.path.basename(s.text.rstrip("/"))),
                     dynamic=s.dynamic) for s in sources]
    return [dest]


def _copies_git(sources: list[Word], scope: Scope, words: list[Word]) -> Blocked | None:
    from hunkwise.coordinator import codescan
    from hunkwise.coordinator.scope import git_named

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
    if name == "ruff" and (sub in ("format", "check") or (sub.startswith("-") and any(
            a.text in ("--fix", "--fix-only") for a in args))):
        if sub not in ("format", "check"):
            sub, args = "check", [Word("check")] + args  # `ruff --fix .`: the old spelling
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
    if name in _MORE_WRITERS:
        return _more_writer(name, words, scope, cmd, appended)
    if name not in _VALUES:
        return None
    if appended and name in _DESTROYS:
        return _block(words, f"`{name}` is handed paths the guard cannot see (xargs, find "
                      "-exec ... +), and removes them", "name the paths literally")
    if name == "dd":
        record([Word(a.text[3:], dynamic=a.dynamic) for a in args if a.text.startswith("of=")],
               scope, words)
        return None
    pos, opts = _positional(args, set(_VALUES[name].split()))
    recursive = any(o in opts for o in ("-r", "-R", "--recursive", "-a", "--archive"))
    target_dir = opts.get("-t") or opts.get("--target-directory")
    if name in ("cp", "mv", "install", "ln"):
        return _copy_or_move(name, words, scope, pos, opts, recursive, target_dir)
    return _other_writer(name, words, scope, cmd, args, pos, opts, recursive)


def _copy_or_move(name: str, words: list[Word], scope: Scope, pos: list[Word],
                  opts: dict[str, Word], recursive: bool, target_dir: Word | None
                  ) -> Blocked | None:
    """cp, mv, install, ln: the files they write (a hard link's source too)."""
    if True:
        if name != "mv":
            found = _copies_git(pos if name != "ln" or len(pos) != 1 else pos, scope, words)
            if found is not None:
                return found
        if name == "install" and "-d" in opts:
            return None
        if name in ("ln", "cp") and not any(o in opts for o in ("-s", "--symbolic")) and (
                name == "ln" or any(o in opts for o in ("-l", "--link"))):
            # a hard link: whatever writes through it writes the source
            record(pos[:-1] if len(pos) > 1 or target_dir is not None else pos, scope, words)
        if target_dir is not None:
            sources, written = pos, _into(target_dir, pos, scope, True)
        elif name == "ln" and len(pos) == 1:
            sources, written = pos, [Word(os.path.basename(pos[0].text), pos[0].dynamic)]
        elif len(pos) >= 2:
            sources, written = pos[:-1], _into(pos[-1], pos[:-1], scope, len(pos) > 2)
        else:
            return None
        record(written, scope, words, tree=recursive or name == "mv", destroys=name == "mv")
        if name in ("ln", "cp") and any(o in opts for o in ("-s", "--symbolic",
                                                             "--symbolic-link")):
            # A symbolic link: whatever writes through it (later on the same line, where
            # the link does not exist yet for the guard to follow) writes where it points,
            # which a relative link names from its own folder (`ln -r`: from here).
            here = name == "ln" and any(o in opts for o in ("-r", "--relative"))
            found = _links(sources, written, here, scope, words)
            if found is not None:
                return found
        if name == "mv":
            record(sources, scope, words, tree=True, destroys=True)
        return None


def _links(sources: list[Word], links: list[Word], here: bool, scope: Scope,
           words: list[Word]) -> Blocked | None:
    """Symbolic links made: each is judged as a write where it points (a folder: a write
    of every file under it). A link to a folder that holds the working tree is refused: a
    write through it lands anywhere in the tree, under a path the guard reads as the
    link's, inside the grants."""
    targets: list[Word] = []
    folders: list[Word] = []
    for src, link in zip(sources, links, strict=False):
        home = _at_home(src, scope)
        text = home or src.text
        if not (home or os.path.isabs(text) or here):
            text = os.path.join(os.path.dirname(link.text), text)
        t = Word(text, src.dynamic and not home)
        if not t.dynamic:
            real = os.path.realpath(scope.where(text))
            cwd = os.path.realpath(scope.cwd or os.getcwd())
            if cwd == real or cwd.startswith(real.rstrip(os.sep) + os.sep):
                return _block(words, f"it links to `{src.text[:60]}`, a folder that holds the "
                              "working tree: a write through the link lands anywhere in it",
                              "link to the files you mean, inside your grants")
            if os.path.isdir(real):
                folders.append(t)
                continue
        targets.append(t)
    record(targets, scope, words)
    record(folders, scope, words, tree=True)
    return None


def _other_writer(name: str, words: list[Word], scope: Scope, cmd: Simple, args: list[Word],
                  pos: list[Word], opts: dict[str, Word], recursive: bool) -> Blocked | None:
    """The writers of _VALUES but copies and moves."""
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
            files = _patched_files(cmd, opts, scope)
            if not files:
                return _block(words, "the guard cannot read which files this patch writes "
                              "(it comes from a pipe or the terminal)", "write the patch to a "
                              "file, or name the file it patches")
            record(files, scope, words)
        return None
    record(pos, scope, words, tree=name in ("rm", "shred", "rmdir") and (recursive or
                                                                        name == "rmdir"),
           destroys=name in _DESTROYS)
    return None


_DESTROYS = {"rm", "rmdir", "unlink", "shred", "mv"}
# Programs that replace or remove the files they name: compressors (the original goes),
# archivers extracting into a folder, copiers, downloads into a file, editors run as
# scripts, fixers that rewrite files in place.
_COMPRESSORS = {"gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma", "zstd",
                "unzstd", "lz4", "lzip", "compress", "uncompress", "pigz", "pbzip2"}
_MORE_WRITERS = _COMPRESSORS | {"zip", "tar", "unzip", "rsync", "split", "csplit", "uniq",
                                "curl", "wget", "2to3", "docformatter", "pyupgrade", "ed",
                                "ex", "vi", "vim", "nvim", "script"}


def _more_writer(name: str, words: list[Word], scope: Scope, cmd: Simple,
                 appended: bool) -> Blocked | None:
    """The files these programs write or remove, where the line names them."""
    if appended and name in _COMPRESSORS | {"zip", "tar", "rsync"}:
        return _block(words, f"`{name}` is handed paths the guard cannot see (xargs, find "
                      "-exec ... +), and may remove or replace them", "name the paths literally")
    kind = "compress" if name in _COMPRESSORS else name
    return _BY_KIND.get(kind, _editor)(name, words, scope)


def _args(words: list[Word]) -> tuple[list[Word], list[str], list[Word]]:
    args = words[1:]
    return args, [w.text for w in args], [w for w in args if not w.text.startswith("-")]


def _value_of(args: list[Word], texts: list[str], *flags: str) -> Word | None:
    return next((args[k + 1] for k, t in enumerate(texts[:-1]) if t in flags), None)


def _compress(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    _a, texts, pos = _args(words)
    if not any(t in ("-c", "--stdout", "--to-stdout", "-t", "--test", "-l", "--list", "-h",
                     "--help", "-V", "--version") or (t.startswith("-") and not
                     t.startswith("--") and any(c in t[1:] for c in "ctl")) for t in texts):
        record(pos, scope, words, destroys=True)  # the file is replaced by its (de)compression
    return None


def _zip(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    _a, texts, pos = _args(words)
    if pos:
        record(pos[:1], scope, words)
    if any(t in ("-m", "--move") or (t.startswith("-") and not t.startswith("--")
                                      and "m" in t[1:]) for t in texts):
        record(pos[1:], scope, words, destroys=True)
    return None


def _tar(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    args, texts, pos = _args(words)
    first = texts[0] if texts else ""
    cluster = first.lstrip("-") if first and not first.startswith("--") else ""
    extract = any(t in ("--extract", "--get") or (
        t.startswith("-") and not t.startswith("--") and "x" in t[1:]) for t in texts) \
        or "x" in cluster
    where = _value_of(args, texts, "-C", "--directory")
    archive = _value_of(args, texts, "-f", "--file")
    if archive is None and "f" in cluster and len(args) > 1:
        archive = args[1]
    if extract:
        record([where or Word(".")], scope, words, tree=True)
    elif archive is not None:
        record([archive], scope, words)
    if "--remove-files" in texts:
        record([w for w in pos if w is not archive and w is not where], scope, words,
               destroys=True)
    return None


def _unzip(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    args, texts, _p = _args(words)
    if not any(t in ("-l", "-t", "-p", "-Z", "-v") for t in texts):
        record([_value_of(args, texts, "-d") or Word(".")], scope, words, tree=True)
    return None


def _rsync(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    _a, texts, pos = _args(words)
    if len(pos) >= 2:
        record(pos[-1:], scope, words, tree=True, destroys=any(
            t.startswith(("--delete", "--remove")) for t in texts))
    return None


def _split(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    args, texts, pos = _args(words)
    prefix = _value_of(args, texts, "-f", "--prefix")
    if prefix is None and name == "split" and len(pos) >= 2:
        prefix = pos[1]
    record([Word((prefix.text if prefix else "x") + ("00" if name == "csplit" else "aa"),
                 dynamic=prefix.dynamic if prefix else False)], scope, words)
    return None


def _uniq(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    pos = _args(words)[2]
    if len(pos) >= 2:
        record(pos[1:2], scope, words)  # uniq INPUT OUTPUT
    return None


def _download(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    args, texts, _p = _args(words)
    flag = ("-o", "--output") if name == "curl" else ("-O", "--output-document")
    for k, t in enumerate(texts):
        if t in flag and k + 1 < len(args):
            record([args[k + 1]], scope, words)
        elif t.startswith(flag[1] + "="):
            record([Word(t.split("=", 1)[1], dynamic=args[k].dynamic)], scope, words)
    return None


def _fixer(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    _a, texts, pos = _args(words)
    if name == "pyupgrade" or any(t in ("-w", "--write", "-i", "--in-place") for t in texts):
        record(pos or [Word(".")], scope, words, tree=True, formatter=name)
    return None


def _editor(name: str, words: list[Word], scope: Scope) -> Blocked | None:
    """ed, ex, vi, vim, nvim, script: run as scripts (ed and ex always read commands; vim
    with -e, -s, -c, -S, +cmd; script runs a shell) they run the commands they read, an
    editor's `!` among them, which the guard cannot see. Open on files, they write them."""
    _a, texts, pos = _args(words)
    scripted = name in ("ed", "ex", "script") or any(
        t in ("-e", "-E", "-s", "-es", "-Es", "-c", "-S", "--cmd") or t.startswith("+")
        for t in texts)
    if scripted:
        return _block(words, f"`{name}` runs commands it reads (an editor script, a shell), "
                      "which the guard cannot see", "edit files with the agent's own edit "
                      "tool, or with sed/patch on your granted files")
    record(pos, scope, words)
    return None


_BY_KIND = {"compress": _compress, "zip": _zip, "tar": _tar, "unzip": _unzip,
            "rsync": _rsync, "split": _split, "csplit": _split, "uniq": _uniq,
            "curl": _download, "wget": _download, "2to3": _fixer, "docformatter": _fixer,
            "pyupgrade": _fixer}


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


WRITERS = set(_VALUES) | set(_FORMATTERS) | {"ruff", "cargo", "go"} | _MORE_WRITERS
