"""Wrappers: programs that run a command given as their arguments (`timeout`, `env`,
`xargs`, `setpriv`, `npx`, `uv run`...), each with the options it takes, so that the
command it runs can be told apart from its own options and judged in turn."""

from __future__ import annotations

from hunkwise.coordinator.shell import Record, Word

_NONE: frozenset[str] = frozenset()


class Spec(Record):
    """A wrapper's options: which take a value, which run code, where its command starts."""

    __slots__ = ("values", "flags", "before", "appends", "code", "joined", "shell_flags")

    def __init__(self, values: frozenset[str] = _NONE, flags: frozenset[str] | None = None,
                 before: int = 0, appends: bool = False, code: frozenset[str] = _NONE,
                 joined: bool = False, shell_flags: frozenset[str] = _NONE) -> None:
        self.values = values  # options taking a value (next word or attached)
        self.flags = flags  # options without one; None: any other option
        self.before = before  # positional words before the command (timeout's duration)
        self.appends = appends  # the command gets more arguments the guard cannot see
        self.code = code  # options whose value is a shell command line
        self.joined = joined  # the command words are joined and run by a shell (watch, ssh)
        self.shell_flags = shell_flags  # with these, the command runs through a shell


def S(values: str = "", flags: str | None = None, before: int = 0, appends: bool = False,
      code: str = "", joined: bool = False, shell_flags: str = "") -> Spec:
    return Spec(frozenset(values.split()), None if flags is None else frozenset(flags.split()),
                before, appends, frozenset(code.split()), joined, frozenset(shell_flags.split()))


WRAPPERS: dict[str, Spec] = {
    "timeout": S("-s --signal -k --kill-after", "--preserve-status --foreground -v --verbose", 1),
    "nice": S("-n --adjustment", ""),
    "ionice": S("-c --class -n --classdata -p --pid -P --pgid -u --uid", "-t --ignore"),
    "nohup": S("", ""), "catchsegv": S("", ""), "torsocks": S("", None),
    "stdbuf": S("-i -o -e --input --output --error", ""),
    "exec": S("-a", "-c -l"),
    "command": S("", "-p"),
    "builtin": S("", ""),
    "sudo": S("-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role "
              "-t --type -T --command-timeout -U --other-user",
              "-A --askpass -b --background -E --preserve-env -H --set-home -k --reset-timestamp "
              "-K -n --non-interactive -P --preserve-groups -S --stdin -B --bell -i --login "
              "-s --shell", shell_flags="-i --login -s --shell"),
    "doas": S("-u -C", "-n -s -L", shell_flags="-s"),
    "chroot": S("--userspec --groups", "--skip-chdir", 1),
    "setsid": S("", "-c --ctty -f --fork -w --wait"),
    "unbuffer": S("", "-p"),
    "flock": S("-w --timeout -E --conflict-exit-code", "-s --shared -x -e --exclusive -u "
               "--unlock -n --nb --nonblock -o --close -F --no-fork --verbose", 1,
               code="-c --command"),
    "taskset": S("", "-a --all-tasks -c --cpu-list", 1),
    "chrt": S("-T --sched-runtime -P --sched-period -D --sched-deadline",
              "-a --all-tasks -m --max -R --reset-on-fork -v --verbose -b --batch -d "
              "--deadline -f --fifo -i --idle -o --other -r --rr", 1),
    "strace": S("-e -o -p -s -u -E -a -b -I -O -S -X -P --trace --output --attach "
                "--string-limit --user --env", None),
    "ltrace": S("-e -o -p -s -u -a -l -n -A -D -F -x", None),
    "valgrind": S("", None),
    "nsenter": S("-t --target -S --setuid -G --setgid -w --wd -r --root -W", None),
    "unshare": S("--map-user --map-group --map-users --map-groups --setgroups -S --setuid "
                 "-G --setgid -R --root -w --wd --propagation", None),
    "runuser": S("-u --user -g --group -G --supp-group -s --shell -w --whitelist-environment",
                 "-l --login -m -p --preserve-environment -P --pty -", code="-c --command"),
    "su": S("-g --group -G --supp-group -s --shell -w --whitelist-environment",
            "-l --login -m -p --preserve-environment -P --pty -", code="-c --command"),
    "systemd-run": S("-p --property -u --unit -E --setenv -M --machine -H --host --description "
                     "--slice --uid --gid --nice --working-directory -D", None),
    "setpriv": S("--reuid --regid --ruid --euid --rgid --egid --groups --inh-caps "
                 "--ambient-caps --bounding-set --securebits --selinux-label "
                 "--apparmor-profile --landlock-access --landlock-rule --pdeathsig",
                 "--clear-groups --keep-groups --init-groups --no-new-privs --reset-env -d "
                 "--dump --nnp"),
    "prlimit": S("-p --pid -o --output", None),
    "setarch": S("", None, 1),
    "linux32": S("", None), "linux64": S("", None), "i386": S("", None),
    "x86_64": S("", None),
    "fakeroot": S("-l --lib --faked -s -i -b", "-u --unknown-is-real -h --help -v --version"),
    "chpst": S("-u -U -b -e -/ -C -n -l -L -m -d -o -p -f -c -r -t", "-P -0 -1 -2 -v"),
    "softlimit": S("-a -c -d -f -l -m -o -p -r -s -t", ""),
    "pkexec": S("--user", "--disable-internal-agent --keep-cwd"),
    "faketime": S("-m -f", "", 1),
    "firejail": S("", None), "proot": S("-r -b -w -q -k", None),
    "caffeinate": S("-t -w", "-d -i -m -s -u"),
    "dbus-run-session": S("--config-file --dbus-daemon", ""),
    "xvfb-run": S("-n --server-num -s --server-args -f --auth-file -e --error-file -p "
                  "--xauth-protocol -l", "-a --auto-servernum"),
    "cgexec": S("-g", "--sticky"),
    "numactl": S("-C --physcpubind -N --cpunodebind -m --membind -p --preferred -i "
                 "--interleave", None),
    "time": S("-f --format -o --output", "-a --append -p --portability -v --verbose -q"),
    "xargs": S("-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs -s "
               "--max-chars --process-slot-var --max-lines --replace --eof",
               "-0 --null -o --open-tty -p --interactive -r --no-run-if-empty -t --verbose "
               "-x --exit --show-limits -i -l -e", appends=True),
    "npx": S("-p --package", "-y --yes --no -q --quiet --ignore-existing", code="-c --call"),
    "pnpx": S("-p --package", None, code="-c"),
    "bunx": S("-p --package", None), "uvx": S("--from --with -p --python --index", None),
    "dotenv": S("-f -e -v", None),
    "watch": S("-n --interval -d --differences -q --equexit", None, joined=True),
    "ssh": S("-b -B -c -D -E -e -F -I -i -J -L -l -m -O -o -p -P -Q -R -S -W -w", None, 1,
             joined=True),
    "script": S("-E --echo -I --log-in -O --log-out -B --log-io -T --log-timing -m "
                "--logging-format -t --timing", None, code="-c --command"),
    "entr": S("", "-a -c -cc -d -n -p -r -s -z", shell_flags="-s"),
    "sg": S("", None, 1, code="-c", joined=True),
    "busybox": S("", ""),
}
# Tools that run a command of a project's environment: `uv run CMD`, `poetry run CMD`...
SUB_WRAPPERS: dict[tuple[str, str], Spec] = {
    ("uv", "run"): S("--with --with-editable --with-requirements -p --python --package "
                     "--extra --group --env-file --directory --project --index --index-url "
                     "--module -m --script", None),
    ("uv", "tool"): S("--from --with -p --python", None),
    ("poetry", "run"): S("-C --directory -P --project", None),
    ("pdm", "run"): S("-p --project", None), ("hatch", "run"): S("-e --env", None),
    ("pipenv", "run"): S("", None), ("rye", "run"): S("", None),
    ("conda", "run"): S("-n --name -p --prefix --cwd", None),
    ("mamba", "run"): S("-n --name -p --prefix", None),
    ("micromamba", "run"): S("-n --name -p --prefix", None),
    ("pixi", "run"): S("-e --environment --manifest-path", None),
    ("bundle", "exec"): S("", None), ("direnv", "exec"): S("", None, 1),
    ("npm", "exec"): S("-p --package -w --workspace", None, code="-c --call"),
    ("npm", "x"): S("-p --package -w --workspace", None, code="-c --call"),
    ("pnpm", "exec"): S("-C --dir --filter", None), ("pnpm", "dlx"): S("--package", None),
    ("yarn", "exec"): S("", None), ("yarn", "dlx"): S("-p --package", None),
    ("bun", "x"): S("-p --package", None), ("ip", "netns"): S("", None, 2),
    ("nix", "shell"): S("", None, code="-c --command"),
}


def _parse(words: list[Word], spec: Spec, start: int = 1
           ) -> tuple[int, list[Word], set[str]] | None:
    """(index where the command starts, code-string values, options seen); None when an
    option is not one the spec knows (the command cannot be told apart)."""
    i, before, codes, seen = start, spec.before, [], set()
    while i < len(words):
        w = words[i]
        t = w.text
        if t == "--":
            i += 1
            break
        if t.startswith("-") and len(t) > 1:  # quoted or not: the program sees the same
            if w.dynamic:
                return None
            name, eq, _v = t.partition("=")
            if t.startswith("--"):
                if name in spec.code:
                    codes.append(Word(_v) if eq else (words[i + 1] if i + 1 < len(words)
                                                      else Word("", dynamic=True)))
                    i += 1 if eq else 2
                elif name in spec.values:
                    i += 1 if eq else 2
                elif spec.flags is None or name in spec.flags:
                    i += 1
                else:
                    return None
                seen.add(name)
                continue
            if t in (spec.flags or ()):
                seen.add(t)
                i += 1
                continue
            step = 1
            for j, c in enumerate(t[1:], 1):  # a cluster: -qc CMD, -n10, -xvf FILE
                opt = f"-{c}"
                seen.add(opt)
                if opt in spec.code or opt in spec.values:
                    rest = t[j + 1:]
                    if opt in spec.code:
                        codes.append(Word(rest) if rest else (
                            words[i + 1] if i + 1 < len(words) else Word("", dynamic=True)))
                    step = 1 if rest else 2
                    break
                if spec.flags is not None and opt not in spec.flags:
                    return None
            i += step
            continue
        if before:
            before -= 1
            i += 1
            continue
        break
    return i, codes, seen
