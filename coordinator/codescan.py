"""What the guard can tell about code it cannot run: a code string or a script file.

A shell command line is followed exactly (guard.py, programs.py). Code in another language
(`python -c`, `perl -e`, `node -e`, a script file an interpreter runs, a PowerShell line) is
*opaque*: the guard reads it as text. Such code is refused when it can start a program and
either names git or hides what it runs (character codes, base64, reversed strings, eval),
and when it writes into `.git/` or the agent's hook settings. Code that cannot start a
program (`python3 -c "print('git')"`) cannot reach git, whatever words it holds.

Before looking, the text is normalised the way the languages would join it: escapes
(`\\x67`, `\\147`, `\\u0067`) decoded, adjacent or concatenated string literals (`'g'+'it'`,
`"g" "it"`, `'g'.'it'`, `'g','i','t'`) joined.
"""

from __future__ import annotations

from hunkwise.coordinator.shell import LazyRe

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

_ESCAPES = LazyRe(r"\\(x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[0-7]{1,3}|[A-Za-z])")
_JOIN_OPS = LazyRe(r"""['"]\s*(?:\+|\.|\.\.|\|\|)?\s*['"]""")
_JOIN = LazyRe(r"""['"]\s*,?\s*['"]""")
_REACH = LazyRe(r"\bGIT_|\bcoord\b")
# hunkwise's own commands and marks: `coord`, `worker` named as a program (a word of their
# own in a string), the package, the coordinator's mark and the session variables.
_OURS = LazyRe(r"""(?i)hunkwise|\bCOORD_SESSION\b|\bCOORD_DIR\b|CLAUDE_CODE_SESSION_ID|"""
               r"""CODEX_THREAD_ID|(^|['"`/\s(\[,])(coord|worker)(['"`\s,)\]]|$)""")
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_CAN_RUN = LazyRe(
    r"\b(system|popen\w*|subprocess|spawn\w*|exec\w*|fork\w*|pty|eval|compile|__import__|"
    r"importlib|ctypes|getattr|qx|readpipe|Open3|child_process|shell_exec|passthru|"
    r"proc_open|pcntl_\w+|Runtime|ProcessBuilder|plumbum|pexpect|sh\.\w+|Invoke-Expression|"
    r"iex|Start-Process|Invoke-Item|call_command|run_command|os\.system|do shell script)\b|`|"
    r"%x[({\[]")
_HIDES = LazyRe(
    r"\bchr\s*\(|fromCharCode|b64decode|base64|\ba2b_|unhexlify|fromhex|\.decode\s*\(|"
    r"codecs|rot_?13|\[\s*::\s*-1\s*\]|\breverse|\bpack\s*\(|%c|\bord\s*\(|\\x|"
    r"FromBase64String|-join|\[char\]")
_WRITES_PROTECTED = LazyRe(
    r"""(?i)(^|[\s'"/=(,])(\.git([/\\'"\s)]|$)|\.claude[/\\]settings|\.codex([/\\'"\s)]|$))""")
_WRITE_WORDS = LazyRe(
    r"""(?i)\b(write\w*|unlink\w*|remove\w*|rmtree|rm(dir)?(Sync)?|delete\w*|rename\w*|"""
    r"""replace|truncate\w*|chmod\w*|symlink\w*|link\w*|copy\w*|move\w*|mkdir\w*|makedirs|"""
    r"""dump|Set-Content|Out-File|Remove-Item|New-Item)\b|['"][wax]b?\+?['"]|>""")
_WRITE_CALLS = LazyRe(
    r"""(?i)\b(write\w*|unlink\w*|remove\w*|rmtree|rm(dir)?(Sync)?|delete\w*|rename\w*|"""
    r"""truncate\w*|chmod\w*|symlink\w*|copy\w*|move\w*|mkdir\w*|makedirs|Set-Content|"""
    r"""Out-File|Remove-Item|New-Item)\b|['"][wax]b?\+?['"]|open\s*\(?\s*\w+\s*,\s*['"]\+?[>|]""")
# In code given on the command line, a write whose path is built (joined, formatted,
# globbed, spelled with character codes) or names where the agents' and git's settings
# live: nothing tells which file it writes.
_BUILT_PATH = LazyRe(
    r"""(?i)\bchr\s*\(|%[sdr]|\.format\s*\(|\bjoin\s*\(|\bglob\w*|\bwalk\b|\bscandir|"""
    r"""readdir|\bopendir|\bgit\b|claude|codex|\bhooks?\b|settings|\bcoord\b|fromCharCode|"""
    r"""\\x|['"]\s*\+|\+\s*['"]|\$\{|`""")


def _decode(m: re.Match[str]) -> str:
    e = m.group(1)
    try:
        if e[0] in "xuU":
            return chr(int(e[1:], 16))
        if e[0].isdigit():
            return chr(int(e, 8))
    except ValueError:
        return m.group(0)
    # `\n` and friends are white space; `\g` in a shell word is just the letter
    return {"n": "\n", "t": "\t", "r": "\r"}.get(e, e)


def normalise(text: str) -> str:
    """The text with escapes decoded (what `echo -e` or `printf` would print)."""
    return _ESCAPES.sub(_decode, text)


def readings(text: str) -> list[str]:
    """The text as the guard reads it: escapes decoded; then literals joined across `+`, `.`
    and juxtaposition (`'g'+'it'`); then across commas too (`'g','i','t'`)."""
    decoded = _ESCAPES.sub(_decode, text)
    out = [decoded]
    for pattern in (_JOIN_OPS, _JOIN):
        cur = out[-1]
        for _ in range(8):
            joined = pattern.sub("", cur)
            if joined == cur:
                break
            cur = joined
        out.append(cur)
    return out


def _git_token(text: str) -> bool:
    """git as a program name: not inside a longer identifier (digit, github, .gitignore,
    git_x); `(?<![A-Za-z0-9_.])git(?![A-Za-z0-9_])` without the regular expression engine."""
    i = text.find("git")
    while i >= 0:
        before = text[i - 1] if i else ""
        after = text[i + 3:i + 4]
        if (not before or (before not in _WORD and before != ".")) and \
                (not after or after not in _WORD):
            return True
        i = text.find("git", i + 1)
    return False


_JOINERS = frozenset("'\"+.|,")


def names_git(text: str) -> bool:
    if "\\" not in text:
        if _git_token(text):
            return True  # no escape to decode: the text itself is the first reading
        if "'" not in text and '"' not in text:
            return False  # nothing to decode or join: the text is its only reading
        # A reading only drops quotes, white space and `+ . .. || ,` between literals: where
        # the letters g, i, t never follow each other across those, no reading names git.
        if "git" not in "".join(c for c in text if not (c.isspace() or c in _JOINERS)):
            return False
    return any(_git_token(t) for t in readings(text))


def may_reach_git(text: str) -> bool:
    """A script that names git, a GIT_ variable or coord may reach them; one that names none
    cannot by itself."""
    return names_git(text) or _REACH.search(text) is not None


# hunkwise's modules below the package (its CLIs, hooks, state) and its environment marks
_INTERNALS = LazyRe(r"(?i)hunkwise\s*[.'\"+,]\s*['\"]?\s*(coordinator|worker|shared|inbox)|"
                    r"HUNKWISE_")


def names_ours(text: str) -> bool:
    """Does the text (as the guard reads it) name hunkwise's own commands, package or
    identity variables?"""
    if "\\" not in text and not any(w in text.lower() for w in (
            "coord", "worker", "hunkwise", "session_id", "thread_id")):
        return False
    return any(_OURS.search(t) for t in readings(text))


def inline_verdict(code: str) -> str | None:
    """Why code given on the command line (`python3 -c`, `perl -e`, `node -e`) may not run
    for a worker: what opaque_verdict says of any code; and besides, such code may not
    start programs at all (the shell runs them where the guard reads them), nor write a
    file whose path it builds or that sits where settings live."""
    why = opaque_verdict(code)
    if why is not None:
        return why
    norm = readings(code)[1]
    runs = _CAN_RUN.search(norm)
    if runs is not None:
        return (f"it can start programs (`{runs.group(0)}`): what it runs comes from where "
                "the guard cannot read it (its arguments, the environment, stdin, a file)")
    if _WRITE_CALLS.search(norm):
        built = _BUILT_PATH.search(norm)
        if built is not None:
            return (f"it writes a file whose path it builds or hides (`{built.group(0)}`)")
    return None


def opaque_verdict(code: str) -> str | None:
    """Why this opaque code may not run for a worker, or None when it cannot reach git or
    the protected files."""
    if _INTERNALS.search(readings(code)[-1]):
        return "it names hunkwise's internals (its commands' modules, its hooks, its marks)"
    norm = readings(code)[1]
    runs = _CAN_RUN.search(norm)
    if runs is not None:
        if names_git(code):
            return f"it can start programs (`{runs.group(0)}`) and names git"
        if names_ours(code):
            return (f"it can start programs (`{runs.group(0)}`) and names hunkwise's own "
                    "commands (coord, worker) or a session variable")
        hides = _HIDES.search(norm)
        if hides is not None:
            return (f"it can start programs (`{runs.group(0)}`) and spells what it runs in a "
                    f"way the guard cannot read (`{hides.group(0)}`)")
    if _WRITES_PROTECTED.search(norm) and _WRITE_WORDS.search(norm):
        return "it writes into .git/ or the agent's hook settings"
    return None
