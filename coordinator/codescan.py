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
    r"""(?i)\b(write\w*|open|unlink|remove|rmtree|rename|replace|truncate|chmod|symlink|"""
    r"""copy\w*|move|mkdir|dump|Set-Content|Out-File|Remove-Item|New-Item)\b|['"][wax]b?\+?['"]|>""")


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


def opaque_verdict(code: str) -> str | None:
    """Why this opaque code may not run for a worker, or None when it cannot reach git or
    the protected files."""
    norm = readings(code)[1]
    runs = _CAN_RUN.search(norm)
    if runs is not None:
        if names_git(code):
            return f"it can start programs (`{runs.group(0)}`) and names git"
        hides = _HIDES.search(norm)
        if hides is not None:
            return (f"it can start programs (`{runs.group(0)}`) and spells what it runs in a "
                    f"way the guard cannot read (`{hides.group(0)}`)")
    if _WRITES_PROTECTED.search(norm) and _WRITE_WORDS.search(norm):
        return "it writes into .git/ or the agent's hook settings"
    return None
