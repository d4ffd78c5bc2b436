"""awk and sed: filters whose program text has its own ways to run commands (`system()`,
pipes, sed's `e`) and to write files (`print > "f"`, `w f`, in-place editing)."""

from __future__ import annotations

from hunkwise.coordinator.gitallow import DIRECT, Blocked
from hunkwise.coordinator.runners import _script_arg
from hunkwise.coordinator.scope import Scope, _block
from hunkwise.coordinator.shell import LazyRe, Simple, Word

_AWK_RUNS = LazyRe(r"\bsystem\s*\(|\|\s*&?\s*getline|\|&|\b(print|printf)\b[^;{}\n]*"
                       r"(?<!\|)\|(?!\|)")
_AWK_WRITES = LazyRe(r'>>?\s*"([^"]+)"')


def awk(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    from hunkwise.coordinator import shellwrites

    i, progs, inplace = 1, [], False
    while i < len(words):
        t = words[i].text
        if t == "--":
            i += 1
            break
        if not t.startswith("-") or t == "-":
            break
        if t in ("-f", "--file", "-e", "--source", "-i", "--include", "-v", "--assign", "-F",
                 "--field-separator", "-l", "--load") and i + 1 < len(words):
            v = words[i + 1]
            if t in ("-e", "--source"):
                progs.append(v)
            elif t in ("-f", "--file"):
                found = _script_arg(v, words, scope, cmd, "awk", "other")
                if found is not None:
                    return found
                progs.append(Word("", dynamic=False))
            elif t in ("-i", "--include") and v.text == "inplace":
                inplace = True
            elif t in ("-l", "--load"):
                return _block(words, "`awk -l` loads a library the guard cannot read", DIRECT)
            i += 2
            continue
        i += 1
    if not progs and i < len(words):
        progs.append(words[i])
        i += 1
    for p in progs:
        m = _AWK_RUNS.search(p.text)
        if p.dynamic or m:
            return _block(words, "this awk program can run commands (`system()`, a pipe to or "
                          "from a command)" if m else "an awk program built from expansions "
                          "cannot be read", "filter with awk, and run any command directly")
        for target in _AWK_WRITES.findall(p.text):
            shellwrites.record([Word(target)], scope, words)
    if inplace:
        shellwrites.record(words[i:], scope, words)
    return None


def sed_script(script: str) -> tuple[bool, list[str]] | None:
    """(runs a command, files it writes) for a sed script; None when it cannot be read."""
    runs, writes, i, n = False, [], 0, len(script)

    def to_eol(k: int) -> tuple[str, int]:
        e = script.find("\n", k)
        e = n if e < 0 else e
        return script[k:e].strip(), e

    while i < n:
        c = script[i]
        if c in " \t\n;{}!":
            i += 1
            continue
        if c.isdigit() or c in "$,~+":
            i += 1
            continue
        if c in "/\\":
            delim = c if c == "/" else script[i + 1:i + 2]
            i += 1 if c == "/" else 2
            while i < n and script[i] != delim:
                i += 2 if script[i] == "\\" else 1
            i += 1
            while i < n and script[i] in "IM":
                i += 1
            continue
        if c in "sy":
            if i + 1 >= n:
                return None
            delim = script[i + 1]
            i += 2
            for _part in (0, 1):
                while i < n and script[i] != delim:
                    i += 2 if script[i] == "\\" else 1
                i += 1
            if i > n:
                return None
            if c == "s":
                j = i
                while j < n and script[j] not in ";\n}":
                    j += 1
                flags = script[i:j]
                k = flags.find("w")
                if "e" in (flags if k < 0 else flags[:k]):
                    runs = True
                if k >= 0:
                    name, j = to_eol(i + k + 1)
                    writes.append(name)
                i = j
            continue
        if c == "e":
            runs = True
            _, i = to_eol(i + 1)
            continue
        if c in "wW":
            name, i = to_eol(i + 1)
            writes.append(name)
            continue
        if c in "aicrRbtT:":
            _, i = to_eol(i + 1) if c in "aicrR" else (None, _label_end(script, i + 1))
            continue
        if c in "dDgGhHnNpPxzlLqQ=F#":
            if c == "#":
                _, i = to_eol(i)
                continue
            i += 1
            continue
        return None
    return runs, writes


def _label_end(script: str, i: int) -> int:
    while i < len(script) and script[i] not in ";\n}":
        i += 1
    return i


def sed(words: list[Word], scope: Scope, cmd: Simple, appended: bool) -> Blocked | None:
    from hunkwise.coordinator import shellwrites

    i, scripts, files, inplace = 1, [], [], False
    while i < len(words):
        w = words[i]
        t = w.text
        if t == "--" and not w.quoted:
            files += words[i + 1:]
            break
        if t.startswith("-") and len(t) > 1 and not w.quoted:
            if t in ("-e", "--expression", "-f", "--file", "-l", "--line-length"):
                if i + 1 < len(words) and t in ("-e", "--expression"):
                    scripts.append(words[i + 1])
                elif i + 1 < len(words) and t in ("-f", "--file"):
                    found = _script_arg(words[i + 1], words, scope, cmd, "sed", "other")
                    if found is not None:
                        return found
                    scripts.append(Word("p"))
                i += 2
                continue
            if t.startswith(("--expression=", "--file=")):
                scripts.append(Word(t.split("=", 1)[1], dynamic=w.dynamic))
            elif t.startswith("--in-place") or (not t.startswith("--") and "i" in t[1:]):
                inplace = True
                if not t.startswith("--") and "e" in t[1:t.index("i")]:
                    if i + 1 < len(words):
                        scripts.append(words[i + 1])
                        i += 1
            elif not t.startswith("--") and t.endswith("e"):
                if i + 1 < len(words):
                    scripts.append(words[i + 1])
                    i += 1
            elif not t.startswith("--") and "f" in t[1:]:
                i += 1
            i += 1
            continue
        if not scripts:
            scripts.append(w)
        else:
            files.append(w)
        i += 1
    for s in scripts:
        read = None if s.dynamic else sed_script(s.text)
        if read is None:
            return _block(words, "the guard cannot read this sed script", "write it plainly "
                          "(s/old/new/, d, p); sed may run commands with `e`")
        runs, writes = read
        if runs:
            return _block(words, "this sed script runs a command (`e`, or `s///e`)",
                          "run the command directly")
        shellwrites.record([Word(x) for x in writes if x not in ("/dev/stdout", "/dev/stderr")],
                           scope, words)
    if inplace:
        shellwrites.record(files, scope, words)
    return None
