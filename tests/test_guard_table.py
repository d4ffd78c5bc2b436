"""The guard's table: hostile command lines and tool calls are blocked, everyday ones pass.

Commands are judged by the pure `check_command` in a scratch directory that holds what the
hostile lines reach for: a symlink and a byte copy of git under other names (one on PATH),
scripts that run git and scripts that do not, a virtualenv. Tool calls and shell writes are
judged through the hook's JSON in a real shared tree whose state holds the grants: t1
(started by the worker session) holds src/api/**, f.txt:1-5 and notes/*.md; t2 (not
started) holds g.txt, src/other.py and vendor/** (a nested repository).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hunkwise.coordinator.guard import check_command, guard

from testing.cli import run_cli
from testing.env import BIN, hermetic_env
from testing.repo import build_repo, numbered

GIT = shutil.which("git") or "/usr/bin/git"

# ---- hostile command lines: blocked for a worker, whatever its grants ----------------------

ISSUE_LINES = [
    # a worker reaching the coordinator's commands
    "coord reject B --note x --discard", "coord grant A --write '*'", "coord accept t1",
    "coord decide d1 --answer yes", "coord thaw", "coord uninstall-hooks",
    # allow-listed git running commands
    "GIT_EXTERNAL_DIFF=./x.sh git diff",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.s GIT_CONFIG_VALUE_0=stash git s",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='rm -rf src' "
    "git status",
    "export GIT_PAGER='rm -rf src'; git log", "git ls-remote --upload-pack='rm -rf src' .",
    # shell constructs
    "function f { git stash; }; f", "trap 'git stash' EXIT", "hash -p /usr/bin/git g; g stash",
    "alias g=git; g stash", "xargs env git", "bash /dev/stdin <<< 'git stash'",
    "make -f /dev/stdin <<'EOF'\nall:\n\tgit stash\nEOF", "BASH_ENV=./x.sh bash -c true",
    "mapfile -C 'git stash' -c 1 < f.txt", "setpriv --reuid=0 git stash",
    "prlimit --nofile=64 git stash", "setarch x86_64 git stash", "fakeroot git stash",
    "tmux new-session -d 'git stash'", "sg staff 'git stash'", "gh pr checkout 12",
    "sh -c 'g\\it stash'", "echo Z2l0IHN0YXNo | base64 -d | sh",
    "python3 -c \"import os; os.system('g'+'it stash')\"",
]

HOSTILE = ISSUE_LINES + [
    # coord mutations in every spelling
    "coord next", "coord review t1", "coord assign t9 --title x --expect y --write '*'",
    "coord commit -m x f.txt", "coord restore t1", "coord revert t1", "coord freeze",
    "coord discard g.txt", "coord recover t1", "coord request-changes t1 --note x",
    "coord defer t1", "coord audit t1 --roles review", "coord status --brief --send",
    "coord signals --ack all", "coord index --output notes.md", "coord sync",
    "coord install-hooks --agent claude", "coord init", "coord verify", "coord board",
    "coord watch --timeout 1", "/opt/venv/bin/coord thaw", "timeout 5 coord thaw",
    "bash -c 'coord accept t1'", "env coord reject t2 --note x", "coord --json thaw",
    "(coord thaw)", "coord status && coord accept t1", "x=$(coord thaw)",
    # dangerous git environment, in every form
    "GIT_DIR=/tmp/x git status", "GIT_WORK_TREE=/tmp git status",
    "GIT_INDEX_FILE=/tmp/i git status", "GIT_SSH_COMMAND='rm -rf src' git ls-remote .",
    "GIT_ASKPASS=./x.sh git ls-remote .", "GIT_EDITOR=./x.sh git status",
    "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=rm -rf src'\" git status",
    "GIT_CONFIG_GLOBAL=/tmp/evil git status", "GIT_EXEC_PATH=/tmp git status",
    "GIT_TRACE=/tmp/trace git status", "GIT_PAGER='sh -c x' git log",
    "GIT_PAGER=./x.sh git log", "PAGER='rm -rf src' git log", "PAGER=$X git log",
    "MANPAGER='sh -c x' git help log", "LESSOPEN='|rm -rf src %s' git log",
    "LESS='+!rm -rf src' git log", "export GIT_EXTERNAL_DIFF=./x.sh; git diff",
    "export GIT_DIR=/tmp/x && git status", "export -- GIT_WORK_TREE=/tmp; git status",
    "declare -x GIT_DIR=/tmp/x; git status", "typeset -x GIT_PAGER=./x.sh; git log",
    "readonly GIT_CONFIG_COUNT=1", "local GIT_INDEX_FILE=/tmp/i",
    "env GIT_PAGER=./x.sh git log", "env GIT_DIR=/tmp/x git status",
    "env -i GIT_EXTERNAL_DIFF=./x.sh git diff", "env FOO=1 GIT_WORK_TREE=/tmp git status",
    "GIT_DIR=/tmp/x; export GIT_DIR; git status",
    "read GIT_DIR <<< /tmp/x; export GIT_DIR; git status", "printf -v GIT_DIR /tmp/x",
    "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.st GIT_CONFIG_VALUE_0=stash",
    "HOME=/tmp/evil git status", "XDG_CONFIG_HOME=/tmp/evil git status",
    "PATH=/tmp/evil:$PATH git status", "export PATH=/tmp/evil:$PATH; git status",
    "env PATH=/tmp/evil git log", "BROWSER=./x.sh git help -w log",
    "BASH_ENV=./x.sh bash ./runner.sh", "ENV=./x.sh sh -c true",
    "env BASH_ENV=./x.sh bash -c true", "export BASH_ENV=./x.sh; bash -c true",
    "PS4='$(git stash)' bash -xc true", "env 'BASH_FUNC_ls%%=() { git stash; }' bash -c ls",
    "LD_PRELOAD=/tmp/x.so ls", "PROMPT_COMMAND='git stash' bash -i",
    "NODE_OPTIONS='--require ./x.js' node -e 1", "PERL5OPT=-Mx perl -e 1",
    # dangerous git options
    "git -c core.fsmonitor='rm -rf src' status", "git -c core.pager=./x.sh log",
    "git -c alias.x=stash x", "git -c 'alias.s=!sh -c x' s", "git -c diff.external=x diff",
    "git -c pager.log=./x.sh log", "git -c pager.status='rm x' status",
    "git -c core.sshCommand=x ls-remote .", "git ls-remote --upload-pack ./x.sh .",
    "git ls-remote -u ./x.sh .", "git ls-remote --upl=./x.sh .",
    "git ls-remote 'ext::sh -c rm% x' HEAD", "git diff --ext-diff", "git log -p --ext-diff",
    "git show --ext-diff HEAD", "git diff --textconv", "git show --textconv HEAD:f.txt",
    "git log -p --textc", "git cat-file --textconv HEAD:f.txt",
    "git cat-file --filters HEAD:f.txt", "git grep --open-files-in-pager=./x.sh y",
    "git grep -O./x.sh y", "git diff --output=/tmp/x", "git log --outp=/tmp/x",
    "git --git-dir=/tmp/x status", "git --work-tree=/tmp status", "git --git-dir /tmp/x log",
    "git --exec-path=/tmp status", "git --config-env=core.pager=X log",
    "git -p -c core.pager=./x.sh log", "git fetch --upload-pack=./x.sh",
    "git archive --remote=. --exec=./x.sh HEAD", "git blame --textconv f.txt",
    # git itself, by other names and spellings
    "/usr/lib/git-core/git stash", "/usr/lib/git-core/git-stash", "git-upload-pack .",
    "gi\\t stash", "\"git\" stash", "g''it stash", "\\git stash", "$'git' stash",
    "$'\\x67it' stash", "{git,x} stash", "/usr/bin/gi? stash", "/usr/bin/g[i]t stash",
    "git${IFS}stash", "$GIT stash", "${GIT:-git} stash", "\"$(which git)\" stash",
    "$(which git) stash", "`which git` stash", "./g stash", "gpath stash", "./gcopy stash",
    "./gs.sh", "sh gs.sh", "bash ./gs.sh", "source gs.sh", ". ./gs.sh", "./wrap stash",
    "ln -s /usr/bin/git /tmp/g; /tmp/g stash", f"ln -s {GIT} ./newg && ./newg stash",
    "ln -s \"$(command -v git)\" ./g2 && ./g2 stash", f"cp {GIT} /tmp/gg && /tmp/gg stash",
    f"install -m755 {GIT} ./g3", "cp \"$(which git)\" ./g4", "scalar run all",
    # shell constructs hiding git
    "f() { git stash; }; f", "f() ( git reset --hard ); f",
    "function g { command git \"$@\"; }; g stash", "ls() { git checkout -- .; }; ls",
    "trap \"git checkout -- .\" INT EXIT", "trap -- 'git stash' EXIT", "trap 'eval $X' EXIT",
    "hash -p /usr/bin/git ls; ls stash", "hash -p ./gcopy x; x stash",
    "alias ls='git stash'; ls", "shopt -s expand_aliases; alias g=git; g stash",
    "echo stash | xargs git", "echo stash | xargs env git", "xargs -I{} git {} < cmds",
    "bash /dev/stdin <<'EOF'\ngit stash\nEOF", "sh - <<< 'git stash'", "bash -s <<< 'git stash'",
    "bash < /dev/stdin <<< 'git stash'", "sh /proc/self/fd/0 <<< 'git stash'",
    "bash /dev/fd/3 3<<< 'git stash'", "make -f - <<< 'all:;git stash'",
    "make --eval='x:;git stash' x", "make -E 'x:;git stash' x", "make -f $MK",
    "make CC='git stash' all", "readarray -C 'git stash' -c 1 < f.txt",
    "mapfile -C eval -c 1 < cmds", "mapfile -C \"$F\" -c 1 < f.txt",
    "eval 'git stash'", "eval \"git\" \"stash\"", "eval \"$CMD\"", "eval $(echo git stash)",
    "builtin eval 'git stash'", "exec git stash", "exec -a foo git stash", "command git stash",
    "nohup git stash &", "coproc git stash", "{ git stash; } &", "time -p git stash",
    "! git stash", "if git stash; then :; fi", "while git stash; do :; done",
    "until git stash; do :; done", "case x in x) git stash;; esac",
    "[[ -n $(git stash) ]]", "echo $(git stash)", "echo \"$(git checkout -- .)\"",
    "cat <(git stash)", "diff <(git stash) f.txt", "x=$(git reset --hard)", ": $(git stash)",
    "echo `git stash`", "cat <<EOF\n$(git stash)\nEOF", "true && git stash",
    "false || git stash", "git status; git stash", "git status & git stash",
    "git diff | git apply -R", "bash -c \"bash -c 'git stash'\"", "sh -c 'eval \"git stash\"'",
    "bash -c 'gi\"\"t stash'", "bash -c \"$(echo Z2l0IHN0YXNo | base64 -d)\"",
    "bash -lc 'cd src && git stash'", "bash -ec 'git reset --hard'", "sh -xc 'git clean -fdx'",
    "zsh -c 'git stash'", "dash -c 'git stash'", "bash -c \"$CMD\"", "bash -c 'coord thaw'",
    "bash --rcfile gs.sh -i", "bash $SCRIPT",
    # wrappers of every kind
    "env -S 'git stash'", "env -i git stash", "env -u X git stash", "env -C /tmp git stash",
    "env -- git stash", "xargs -0 git add < files", "xargs -n1 git checkout -- < files",
    "find . -exec git checkout {} +", "find . -execdir git stash \\;", "find . -ok git stash \\;",
    "find . -name x -exec sh -c 'git stash' \\;", "fd -x git checkout", "fd . -X git add",
    "parallel git checkout ::: a b", "parallel 'git stash' ::: 1", "watch -n1 git stash",
    "watch 'git stash'", "ssh localhost git stash", "ssh -p 22 localhost 'git stash'",
    "su -c 'git stash'", "su root -c 'git stash'", "runuser -u root -- git stash",
    "sudo -u root git stash", "sudo -s git stash", "sudo sh -c 'git stash'", "doas git stash",
    "chroot / git stash", "setsid git stash", "unbuffer git stash", "flock /tmp/l git stash",
    "flock /tmp/l -c 'git stash'", "taskset -c 0 git stash", "taskset 1 git stash",
    "chrt -o 0 git stash", "ionice -c3 git stash", "nice -n5 git stash", "stdbuf -o0 git stash",
    "strace -f git stash", "ltrace git stash", "valgrind git stash", "nsenter -t 1 git stash",
    "unshare -r git stash", "systemd-run --user git stash", "script -c 'git stash' /dev/null",
    "script -qc 'git stash' /dev/null", "npx -y git stash", "npm exec -- git stash",
    "npm x -c 'git stash'", "pnpm exec git stash", "yarn exec git stash", "uv run git stash",
    "uv run -- git stash", "uv tool run git stash", "poetry run git stash",
    "pipenv run git stash", "conda run -n base git stash", "bundle exec git stash",
    "direnv exec . git stash", "busybox sh -c 'git stash'", "dbus-run-session git stash",
    "xvfb-run git stash", "cgexec -g cpu:x git stash", "chpst -u root git stash",
    "pkexec git stash", "faketime -1d git stash", "firejail git stash", "torsocks git stash",
    "catchsegv git stash", "ls | entr git stash", "ls | entr -s 'git stash'",
    "caffeinate git stash", "numactl -C 0 git stash", "prlimit git stash",
    "setarch x86_64 -R git stash", "linux64 git stash", "fakeroot -- git stash",
    "fakeroot -s /tmp/s git stash", "setpriv --no-new-privs git stash",
    "timeout -s KILL 5 git stash", "timeout --weird 5 git stash", "sg staff -c 'git stash'",
    "tmux send-keys 'git stash' Enter", "tmux run-shell 'git stash'", "tmux new -d git stash",
    "tmux kill-server", "tmux -L hunkwise kill-session -t A",
    "tmux", "screen -dm git stash", "gh repo sync", "gh alias set co 'pr checkout'",
    "gh co 12", "gh extension exec x", "mytool --run 'git stash'", "vim -c '!git stash' f.txt",
    "less '+!git stash' f.txt", "gdb -ex 'shell git stash'", "sqlite3 :memory: '.shell git stash'",
    "docker run img git stash", "pre-commit run", "pre-commit install",
    "rg --pre ./x.sh pattern", "sort --compress-program=./x.sh f.txt",
    # code strings and scripts of other languages
    "python -c \"import subprocess; subprocess.run(['g'+'it','stash'])\"",
    "python3 -c \"__import__('os').system('git stash')\"",
    "python3 -c \"import os,base64; os.system(base64.b64decode('Z2l0IHN0YXNo').decode())\"",
    "python3 -c \"import os; os.system(chr(103)+chr(105)+chr(116)+' stash')\"",
    "python3 -c \"import os; os.system('tig'[::-1]+' stash')\"",
    "python3 -c \"exec('import os; os.system(\\\"git stash\\\")')\"",
    "python3 -c \"import os; os.system('\\x67it stash')\"",
    "python3 -c \"import os; os.system(''.join(['g','i','t',' stash']))\"",
    "python3 -c \"import subprocess as s; s.call('git checkout -- .', shell=True)\"",
    "python3 -c \"open('.git/config','a').write('[alias]')\"",
    "python3 -Ic \"import os; os.system('git stash')\"",
    "python3 - <<'EOF'\nimport os\nos.system('git stash')\nEOF",
    "python3 <<< \"import os; os.system('git stash')\"",
    "echo \"import os; os.system('git stash')\" | python3", "python3 x.py", "./x.py",
    "python3 -c \"import os; os.execvp('git', ['git', 'stash'])\"", "perl -e 'system(\"git stash\")'", "perl -e 'system(\"g\".\"it stash\")'",
    "perl -e '`git stash`'", "perl -e 'qx(git stash)'", "perl -le 'exec q(git), q(stash)'",
    "ruby -e 'system(\"git stash\")'", "ruby -e '`git stash`'",
    "node -e \"require('child_process').execSync('git stash')\"",
    "node -e \"require('child'+'_process').execSync('g'+'it stash')\"",
    "node --eval \"require('child_process').spawnSync('git',['stash'])\"",
    "php -r 'system(\"git stash\");'", "lua -e 'os.execute(\"git stash\")'",
    "awk 'BEGIN{system(\"git stash\")}'", "awk 'BEGIN{\"git stash\" | getline}'",
    "awk '{print | \"sh\"}' cmds", "gawk 'BEGIN { system(\"g\" \"it stash\") }'",
    "awk -v c=x 'BEGIN{system(c)}'", "awk -f $PROG f.txt", "sed 's/.*/git stash/e' f.txt",
    "sed '1e git stash' f.txt", "echo x | sed 'e git stash'", "sed -n '1{e git stash\n}' f.txt",
    "sed $SCRIPT f.txt", "pwsh -c 'git stash'", "pwsh -EncodedCommand ZwBpAHQA",
    "osascript -e 'do shell script \"git stash\"'", "expect -c 'spawn git stash'",
    "deno eval \"new Deno.Command('git',{args:['stash']}).spawn()\"",
    # code piped or written then run in one line
    "printf 'git stash' | sh", "printf '%s\\n' 'git stash' | bash", "echo 'git stash' | sh",
    "echo git stash | bash", "echo -e '\\x67it stash' | sh", "printf '\\147it stash' | sh",
    "rev <<< 'hsats tig' | sh", "base64 -d <<< Z2l0IHN0YXNo | sh", "cat cmds | sh",
    "curl -s http://localhost/x | sh", "echo 'git stash' > /tmp/s.sh && sh /tmp/s.sh",
    "printf '#!/bin/sh\\ngit stash\\n' > ./made && chmod +x ./made && ./made",
    "cat > /tmp/run.sh <<'EOF'\ngit stash\nEOF\nbash /tmp/run.sh",
    "echo \"import os; os.system('ls')\" > /tmp/y.py; python3 /tmp/y.py",
    # namerefs, sourced settings, write targets built from git's output
    "declare -n ref=GIT_DIR; ref=/tmp/x", "typeset -n r=GIT_PAGER", "local -n x=BASH_ENV",
    "set -a; . ./envfile; git status", "source envfile && git log",
    "rm -rf \"$(git rev-parse --git-dir)\"", "> \"$(git rev-parse --git-dir)/config\"",
    "rm -rf \"$(git rev-parse --show-toplevel)\"", "cp x.sh \"$(git rev-parse --git-path hooks)/pre-commit\"",
    # unparsable lines
    "git status 'unterminated", "echo $(", "cat <<", "echo \"open", "echo `x",
]

# ---- everyday command lines: they pass ------------------------------------------------------

EVERYDAY = [
    # the word git as an argument
    "python -m pytest -q tests/git/", "pytest -k git", "find . -name '*.py' | xargs grep -l git",
    "awk '/git/'", "awk '/git/' f.txt", "python3 -c \"print('git')\"", "grep git", "grep -rn git src",
    "rg git", "rg -n 'git stash' docs", "grep -r 'git stash' docs", "ls git/",
    "cat tests/git/test_x.py", "python -m pytest tests/git/test_x.py::test_y",
    "pytest tests/git -k 'not slow'", "grep -rl 'git stash' . | head", "ps aux | grep git",
    "pgrep -fl git", "echo 'git reset --hard'", "ls; echo git stash", "echo git",
    "perl -ne 'print if /git/' f.txt", "sed 's/git/GIT/g' f.txt", "find . -name '*.git*'",
    "find . -name '*.py' -exec grep -l git {} +", "python3 -c \"import sys; print('git', sys.argv)\"",
    "python3 -c 'print(\"use git stash list\")'", "node -e \"console.log('git')\"",
    "jq '.scripts.git' package.json", "cat .gitignore", "git ls-files | grep git",
    "sort f.txt | grep -c git", "wc -l git.py",
    # read-only git
    "git status", "git status --porcelain=v2 -z", "git diff", "git diff --cached",
    "git diff --stat", "git diff HEAD~1 -- f.txt", "git diff --output-indicator-new=+",
    "git log --oneline -5", "git log -p", "git log --format='%H %s'", "git show HEAD",
    "git show HEAD:f.txt | head", "git blame -L 1,5 f.txt", "git grep -n TODO",
    "git branch", "git branch -a", "git stash list", "git stash show -p",
    "git rev-parse --show-toplevel", "git rev-parse HEAD", "git describe --tags",
    "git remote -v", "git --version", "git", "git help stash", "git worktree list",
    "git config user.name", "git config --get user.email", "git ls-remote .",
    "git cat-file -p HEAD", "git rev-list --filter=blob:none HEAD", "git -C src status",
    "git --no-pager log", "git -c color.ui=always diff", "GIT_PAGER=cat git log",
    "LC_ALL=C git status", "GIT_TERMINAL_PROMPT=0 git ls-remote .", "git clean -n",
    "git apply --check p.diff", "git diff -- \"$file\"",
    "cd \"$(git rev-parse --show-toplevel)\" && ls", "echo \"$(git rev-parse HEAD)\"",
    "x=$(git rev-parse HEAD); echo $x", "git log | head", "watch git status",
    "timeout 10 git log", "command -v git", "which git", "type git",
    # reading and building
    "ls", "ls -la", "cat README.md", "head -n 20 f.txt", "tail -n 5 f.txt", "wc -l src/*.py",
    "sed -n 1,10p f.txt", "sed -e 's/a/b/' -e 's/c/d/' f.txt", "awk '{print $1}' f.txt",
    "awk -F: '{print $2}' /etc/passwd", "cut -d: -f1 f.txt", "sort f.txt | uniq -c",
    "diff a b", "find . -name '*.py'", "find . -name '*.pyc' -delete",
    "find src -exec wc -l {} \\;", "xargs -n1 echo < f.txt", "ls | xargs wc -l", "tree -L 2",
    "jq . package.json", "echo hello", "printf '%s\\n' x", "echo $HOME", "pwd",
    "pytest -q", "pytest -x tests/test_guard.py", "python -m pytest -x",
    "python3 -m pytest -q -k \"git and not slow\"", ".venv/bin/python -m pytest -q",
    "timeout 60 pytest -q", "nice pytest", "env FOO=1 pytest", "FOO=1 pytest -q",
    "npm test", "npm run build", "npm ci", "yarn test", "pnpm test", "npx prettier --check .",
    "npx eslint src", "make", "make test", "make -j4", "make -C build", "make -f Makefile test",
    "cargo test", "cargo build", "go test ./...", "go build ./...", "go vet ./...",
    "mypy src", "ruff check src", "ruff check .", "ruff format --check .", "black --check .",
    "black --diff src", "isort --check-only .", "prettier --check .", "gofmt -l .",
    "cargo fmt --check", "tsc --noEmit", "jest", "eslint src", "cmake --build build",
    "ctest --output-on-failure", "tox -e py311", "nox -s tests", "coverage run -m pytest",
    "coverage report", "pip install -e .", "python -m pip install -q pytest", "uv pip install x",
    "uv run pytest -q", "poetry run pytest", "bash -c 'pytest -q'", "sh -c 'echo hi'",
    "bash -lc 'cd src && ls'", "echo hi | bash", "bash ./runner.sh", "./runner.sh",
    ". ./runner.sh", "source .venv/bin/activate && pytest -q", "python3 tool.py",
    "python3 -c \"import json,sys; print(json.load(sys.stdin)['x'])\" < f.json",
    "python -c \"import sys; print(sys.version)\"",
    "python3 -c \"import numpy; print(numpy.__version__)\"",
    "node -e \"console.log(1+1)\"", "node -e \"console.log(require('./package.json').version)\"",
    # shell everyday
    "export FOO=bar", "export PATH=\"$HOME/.local/bin:$PATH\"", "LC_ALL=C sort f.txt",
    "for f in *.py; do wc -l \"$f\"; done", "while read l; do echo \"$l\"; done < f.txt",
    "if [ -f x ]; then cat x; fi", "cd src && ls", "pushd src && ls && popd", "mkdir -p build",
    "trap 'rm -f /tmp/x' EXIT", "trap - EXIT", "alias", "hash -r", "set -euo pipefail",
    "shopt -s globstar", "declare -A m", "read -r line < f.txt", "mapfile -t lines < f.txt",
    "printf -v x '%s' y", "eval \"echo hi\"", "sudo apt-get install -y jq", "docker ps",
    "tar czf /tmp/x.tgz src", "curl -s http://localhost:8000", "cat > /tmp/notes.txt <<'EOF'\n"
    "some git notes\nEOF", "sleep 1", "date", "env", "history | tail",
    # hunkwise's own commands for a worker
    "worker done t1 --summary x", "worker start t1", "worker status", "coord status",
    "coord status --json", "coord diff t1", "coord inbox", "coord index", "coord signals",
    "coord signals --pending", "coord decisions", "coord --help", "coord accept --help",
    "gh pr view 12", "gh pr diff 12", "gh issue list", "tmux ls", "tmux capture-pane -p",
    "pre-commit run --all-files", "pre-commit run --files src/api/a.py",
]


# More spellings: the variants a reviewer tries after the table above.
HOSTILE_MORE = [
    'git stash push -- src',
    'git -C . stash',
    'git --no-pager stash',
    'command -p git stash',
    "nohup bash -c 'git stash' &",
    'env -S"git stash"',
    'timeout 5s git stash',
    'sh <<< "$(printf \'git stash\')"',
    'echo "git stash" > x; . x',
    'git status --porcelain | while read f; do git checkout -- "$f"; done',
    'ln -s /usr/bin/git ~/bin/ls',
    'exec bash -c "git stash"',
    'npx --yes --package=foo -- git stash',
    "/bin/sh -c 'git stash'",
    "bash -c 'git stash' &>/dev/null",
    "$SHELL -c 'git stash'",
    'sudo -E git stash',
    'xargs -r git rm < f',
    "find . -name '*.orig' -exec git add {} +",
    "bash -o pipefail -c 'git stash'",
    "bash --norc -c 'git stash'",
    'python -c \'import os; os.system("git stash")\'',
    'python3 -c \'import subprocess; subprocess.call(["git", "checkout", "."])\'',
    'perl -MPOSIX -e \'system("git stash")\'',
    'node -p "require(\'child_process\').execSync(\'git stash\').toString()"',
    'ruby -rjson -e \'system("git stash")\'',
    'awk \'BEGIN { cmd = "git stash"; cmd | getline; }\'',
    'python3 -c "import os; os.popen(\'git stash\')"',
    "echo 'git stash' | bash -s",
    'bash -c \'eval "$(echo git stash)"\'',
    "printf 'git %s' stash | sh",
    'git config --global alias.st stash',
    'git config core.hooksPath /dev/null',
    'git update-ref -d refs/heads/main',
    'git symbolic-ref HEAD refs/heads/x',
    'git notes add -m x',
    'git replace HEAD HEAD~1',
    'git gc',
    'git prune',
    'git maintenance run',
    'git lfs pull',
    'git submodule foreach git stash',
    'git bisect start',
    'git difftool',
    'git mergetool',
    'git instaweb',
    'git archive HEAD -o x.tar',
    'git bundle create x HEAD',
    'git fast-import < x',
    'git filter-branch',
    'git init',
    'git clone . /tmp/x',
    'git -c color.ui=always -c core.pager=x log',
    "GIT_PAGER='less -R' git log",
    'cd /tmp/evil && GIT_DIR=. git status',
    'export GIT_DIR',
    'declare -gx GIT_DIR=x',
    'env GIT_CONFIG_COUNT=1 git status',
    'git -c protocol.ext.allow=always ls-remote ext::x',
    "bash -c 'f() { git stash; }; f'",
    'eval "$(printf \'git stash\')"',
    'function git_safe { git stash; }',
    "trap 'git stash' ERR; false",
    '(exec git stash)',
    '{ exec git stash; }',
    'coproc NAME { git stash; }',
    'watch -n 1 -x git stash',
    "ssh -o ProxyCommand='git stash' localhost",
    "ssh -oProxyCommand='git stash' localhost true",
    'uv run python -c "import os; os.system(\'git stash\')"',
    'poetry run python -c "import os; os.system(\'git stash\')"',
    "npm exec --package=x -c 'git stash'",
    "sed -i -e 's/a/b/e' f.txt",
    "sed 's/x/y/;e git stash' f.txt",
    'perl -pe \'system("git stash")\' f.txt',
    "find . -exec bash -c 'git stash' \\;",
    'find . -newer x -execdir sh -c \'git checkout "$1"\' _ {} \\;',
    "xargs -P4 -I{} sh -c 'git add {}'",
    'git worktree add ../x',
    'git worktree remove x',
    'git stash drop',
    'git stash clear',
    'git reflog delete HEAD@{0}',
    'git checkout .',
    'git restore -SW .',
    'git reset --soft HEAD~1',
    'git commit --allow-empty -m x',
    'git rm -r --cached .',
    'git clean -xdf -e x',
    'git merge --abort',
    'git rebase --continue',
    'git cherry-pick --abort',
    'git am --abort',
    'git pull --rebase',
    'git push --force',
    'git fetch origin',
    'git remote add x y',
    'git remote set-url origin x',
    'git branch -m x',
    'git branch --set-upstream-to=x',
    'git tag -f v1',
    'git config --unset-all x',
    'git config --add x y',
    'git config --replace-all x y',
    'git config -e',
    'git config --edit',
    'git apply --index p',
    'git apply --3way p',
    'git apply -R p',
    'git sparse-checkout set x',
    'git update-index --skip-worktree f',
    'git read-tree HEAD',
    'git checkout-index -a -f',
    'git write-tree',
    'git commit-tree HEAD^{tree}',
    'git hash-object -w f',
    'git mktree < x',
    'git pack-refs --all',
    'git repack -ad',
]
EVERYDAY_MORE = [
    'git log --oneline --graph --all | head -20',
    'git diff HEAD --stat',
    'git show --stat HEAD~2',
    'git status -sb',
    'git log -S foo --oneline',
    'git diff main...HEAD',
    'git blame -w f.py',
    'git shortlog -sn',
    'git branch --merged',
    'git tag --list',
    'git log --since=yesterday',
    'ls -la | grep git',
    'git log --oneline | grep -i fix',
    'pip install -r requirements.txt',
    'npm install',
    'npm run test -- --watch=false',
    'yarn lint',
    'cd src && pytest -q && cd ..',
    'python -m pytest --lf -x -q',
    'pytest -q --no-header -p no:cacheprovider tests/test_guard.py',
    'python -m mypy src',
    'cat pyproject.toml | grep -A3 tool.ruff',
    'grep -n "def " src/a.py | head',
    "find src -name '*.py' | wc -l",
    'rg --files | grep git',
    "rg -l 'subprocess' src",
    "sed -n '1,40p' src/a.py",
    'head -c 200 f.bin | xxd',
    "echo $PATH | tr : '\\n'",
    'which python3 && python3 --version',
    'python3 -V',
    'node --version',
    'ls ~/.config',
    'du -sh .',
    'env | sort',
    'printenv HOME',
    'date -u +%FT%TZ',
    'for i in 1 2 3; do echo $i; done',
    'test -f setup.py && echo yes',
    '[ -d .git ] && echo repo',
    '[[ -f x ]] || echo no',
    'git rev-parse --abbrev-ref HEAD',
    'git config --get remote.origin.url',
    'git ls-files --others --exclude-standard',
    'git diff --name-only',
    'git diff --cached --name-only',
    'git status --porcelain | wc -l',
    'GIT_PAGER=cat git diff',
    'git --no-pager diff --stat',
    'worker heartbeat t1',
    'worker signal t1 --to coord --type note --payload x',
    "coord status --json | jq '.tasks[]'",
    'make lint',
    'make -n',
    'ruff check --select E,F src',
    'black --check --diff src',
    'mypy --strict src',
    'pytest -k "git or guard"',
    'python -c "import hunkwise; print(hunkwise.__file__)"',
    "python3 -c 'import os; print(os.getcwd())'",
    'python3 -c "import pathlib; print(pathlib.Path(\'.git\').exists())"',
    "jq -r '.name' package.json",
    'curl -fsS localhost:8000/health',
    'time pytest -q',
    'wait',
    'kill %1',
    'ps -ef | head',
    'tail -n 50 /tmp/log',
    'less README.md',
    'man git-log',
    'vim README.md',
    'tar tf x.tar',
    'unzip -l x.zip',
    'gzip -dc x.gz | head',
    'sort -u f.txt',
    'diff -u a.py b.py',
    'md5sum f.txt',
    'realpath .',
    'basename "$PWD"',
    'git log -1 --format=%cd',
    'git describe --always --dirty',
    'cd "$(git rev-parse --show-toplevel)"',
    "git log --format='%an <%ae>' | sort -u",
    'git diff --word-diff',
    'git show HEAD --name-only',
    'git log -p -- src/a.py',
    'pytest --cov=src --cov-report=term-missing',
    'python -m pytest -n 2',
    'npm run lint -- --fix',
    'npx tsc -p .',
    'go test -run TestGit ./...',
    'cargo test git',
    'echo "done" >&2',
    'printf \'%s\\n\' "$(git rev-parse --short HEAD)"',
    'ls -1 tests | grep -c test_',
    'wc -c < f.txt',
]
# Round two of the adversarial pass: every line here got through the guard before, and
# 61 of them destroyed or swept up another task's work when run (the coordinator's mark,
# code that runs its own argv or what it reads, hunkwise's own modules, detached commands,
# impersonated sessions, unseen targets of rm and find, editors run as scripts).
HOSTILE_ROUND2 = [
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git stash",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git checkout -- b.py",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git reset --hard",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git clean -fdx",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git add -A",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git update-index --assume-unchanged b.py",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git config alias.s stash",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git config core.hooksPath /dev/null",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" coord uninstall-hooks",
    "python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" coord thaw",
    "HUNKWISE_COORDINATOR=1 python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" coord uninstall-hooks",
    "HUNKWISE_COORDINATOR=1 python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" coord reject B --note x --discard",
    "HUNKWISE_COORDINATOR=1 python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" coord grant A --write '*'",
    "HUNKWISE_COORDINATOR=1 python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git stash",
    "HUNKWISE_COORDINATOR=1 python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git commit -qam x",
    "HUNKWISE_COORDINATOR=1 python3 -c \"import sys,subprocess; subprocess.run(sys.argv[1:])\" git reset --hard HEAD",
    "python3 -c \"import sys,os; os.execvp(sys.argv[1], sys.argv[1:])\" git checkout -- .",
    "perl -e 'system @ARGV' git stash",
    "perl -e 'exec @ARGV' git checkout -- b.py",
    "perl -e 'system @ARGV' coord uninstall-hooks",
    "HUNKWISE_COORDINATOR=1 perl -e 'system @ARGV' coord uninstall-hooks",
    "node -e \"require('child_process').spawnSync(process.argv[1],process.argv.slice(2),{stdio:'inherit'})\" git stash",
    "node -e \"require('child_process').spawnSync(process.argv[1],process.argv.slice(2))\" git checkout -- b.py",
    "python3 -m timeit \"__import__('os').system('git stash')\"",
    "python3 -m timeit -n1 \"__import__('os').system('git checkout -- b.py')\"",
    "python3 -m timeit -n1 \"__import__('subprocess').run(['coord','uninstall-hooks'],env={**__import__('os').environ,'HUNKWISE_COORDINATOR':'1'})\"",
    "python3 -m timeit -n1 -s 'import os' \"os.system('git reset --hard')\"",
    "python3 -m pydoc -w b",
    "printf '\"\"\"\\\\n>>> import os; os.system(\"git stash\")\\\\n\"\"\"\\\\n' > a.py && python3 -m doctest a.py",
    "printf 'import os\\\\nos.system(\"git stash\")\\\\n' > a.py && python3 -m trace --count a.py",
    "printf 'import os\\\\nos.system(\"git stash\")\\\\n' > a.py && python3 -m cProfile a.py",
    "printf 'import os\\\\nos.system(\"git stash\")\\\\n' > a.py && python3 -m runpy a",
    "X='git stash' python3 -c \"import os; os.system(os.environ['X'])\"",
    "X='git checkout -- b.py' perl -e 'system $ENV{X}'",
    "export X='git stash'; python3 -c \"import os; os.system(os.environ['X'])\"",
    "python3 -c \"import os; os.system(input())\" <<< 'git stash'",
    "python3 -c \"import subprocess,sys; subprocess.run(sys.stdin.read(), shell=True)\" <<< 'git checkout -- .'",
    "echo 'git stash' | python3 -c \"import os,sys; os.system(sys.stdin.read())\"",
    "perl -e 'system(<STDIN>)' <<< 'git stash'",
    "printf 'git stash' > /tmp/x/cmd && python3 -c \"import os; os.system(open('/tmp/x/cmd').read())\"",
    "echo 'git stash' > /tmp/x/cmd.sh; python3 -c \"import subprocess; subprocess.run(['sh','/tmp/x/cmd.sh'])\"",
    "python3 -c \"import subprocess; subprocess.run(['sh','-c','g%st stash' % 'i'])\"",
    "python3 -c \"import subprocess; subprocess.run(['sh','-c','{}it stash'.format('g')])\"",
    "python3 -c \"import subprocess; subprocess.run(['sh','-c','GIT stash'.lower()])\"",
    "python3 -c \"import subprocess; subprocess.run(['sh','-c','xgit stash'[1:]])\"",
    "python3 -c \"import subprocess; subprocess.run(['g*t','stash'][0:0] or ['sh','-c','/usr/bin/g?t stash'])\"",
    "python3 -c \"import subprocess; subprocess.run('/usr/bin/g[h-j]t stash', shell=True)\"",
    "python3 -c \"import subprocess; subprocess.run(['coord','uninstall-hooks'])\"",
    "python3 -c \"import os; os.environ['HUNKWISE_COORDINATOR']='1'; os.system('coord uninstall-hooks')\"",
    "python3 -c \"import os; os.environ['HUNKWISE_COORDINATOR']='1'; os.system('coord reject B --note x --discard')\"",
    "perl -e 'system(\"coord\",\"thaw\")'",
    "(sleep 2; python3 -c \"open('b.py','w').write('gone')\") >/dev/null 2>&1 &",
    "nohup sh -c 'sleep 2; : > \"$0\"' b.py >/dev/null 2>&1 &",
    "setsid bash -c 'sleep 2; f=b.py; echo gone > $f' >/dev/null 2>&1 < /dev/null &",
    "(sleep 2; X='git checkout -- b.py' python3 -c \"import os;os.system(os.environ['X'])\") >/dev/null 2>&1 &",
    "(sleep 2; HUNKWISE_COORDINATOR=1 X='git stash' python3 -c \"import os;os.system(os.environ['X'])\") >/dev/null 2>&1 &",
    "f=b.py; (sleep 2; rm -f \"$f\") >/dev/null 2>&1 &",
    "python3 -c \"import os;p='b.py';s=os.stat(p);open(p,'r+').write('#'*(s.st_size-1)+chr(10));os.utime(p,ns=(s.st_atime_ns,s.st_mtime_ns))\"",
    "CLAUDE_CODE_SESSION_ID=agent-B worker failed B --reason x",
    "CLAUDE_CODE_SESSION_ID=agent-B worker handoff B --to someone",
    "CLAUDE_CODE_SESSION_ID=agent-B worker done B --summary x",
    "COORD_SESSION=$(ls .git/coord/identities >/dev/null; cat .git/coord/identities/agent-B) worker failed B --reason x",
    "CLAUDE_CODE_SESSION_ID=agent-A worker start",
    "CLAUDE_CODE_SESSION_ID=agent-A worker start B",
    "python3 -m hunkwise.coordinator.cli thaw",
    "python3 -m hunkwise.coordinator.cli uninstall-hooks",
    "HUNKWISE_COORDINATOR=1 python3 -m hunkwise.coordinator.cli uninstall-hooks",
    f"{BIN}/python -m hunkwise.coordinator.cli thaw",
    f"{BIN}/python {BIN}/coord thaw",
    f"python3 {BIN}/coord uninstall-hooks",
    f"HUNKWISE_COORDINATOR=1 python3 {BIN}/coord uninstall-hooks",
    f"HUNKWISE_COORDINATOR=1 python3 {BIN}/coord reject B --note x --discard",
    "python3 -c \"from hunkwise.coordinator.cli import main; main()\" thaw",
    "HUNKWISE_COORDINATOR=1 python3 -c \"from hunkwise.coordinator.cli import main; main()\" uninstall-hooks",
    "python3 -c \"import runpy,sys; sys.argv=['coord','uninstall-hooks']; runpy.run_module('hunkwise.coordinator.cli', run_name='__main__')\"",
    "HUNKWISE_COORDINATOR=1 worker done A",
    "echo git stash | xargs -n2 env",
    "printf 'all:\\\\n\\\\tgit stash\\\\n' > /tmp/x/mk && make -f /tmp/x/mk",
    "printf 'all:\\\\n\\\\tgit checkout -- b.py\\\\n' > /tmp/x/mk2; make -f /tmp/x/mk2",
    "make SHELL=/tmp/x/evil.sh test",
    "make test MAKEFLAGS=--eval=x:",
    "MAKEFLAGS='--eval=all:;git stash' make",
    "GNUMAKEFLAGS='--eval=.DEFAULT_GOAL:=x' make test",
    "npm test --script-shell=/tmp/x/evil.sh",
    "npm_config_script_shell=/tmp/x/evil.sh npm test",
    "npm pkg set scripts.test='git stash' && npm test",
    "yarn run env git stash",
    "vim -es -S /tmp/x/cmds.vim",
    "ed -s f.txt <<< '!git stash'",
    "printf '!git stash\\\\nq\\\\n' | ed -s f.txt",
    "ed -s b.py <<< $',d\\\\nw\\\\nq'",
    "printf ',d\\\\nw\\\\nq\\\\n' | ed -s b.py",
    "ex -s -c '%d' -c wq b.py",
    "vim -es -c '%d' -c wq b.py",
    "script -q /dev/null <<< 'git stash'",
    "git diff -R b.py | patch -p1",
    "git diff b.py | patch -R -p1",
    "git grep -l x | xargs rm",
    "git ls-files | xargs rm -f",
    "git diff --name-only | xargs rm",
    "git status --porcelain | cut -c4- | xargs rm -rf",
    "git help -w log",
    "git help -i log",
    "git help --web log",
    "v=GIT_DIR; export $v=/tmp/x; git status",
    "v=GIT_DIR; declare -x \"$v=/tmp/x\"; git status",
    "v=GIT_DIR; printf -v $v /tmp/x; export $v; git status",
    "env $(echo GIT_DIR=/tmp/x) git status",
    "GIT_PAGER=more MORE='+!git stash' git log",
    "HISTFILE=b.py bash -ic 'echo x; history -w'",
    "PYTHONPATH=/tmp/x/pp python3 -c 'import json'",
    "PYTHONHOME=/tmp python3 -c 1",
    "PERL5LIB=/tmp/x/pl perl -MData::Dumper -e 1",
    "RUBYLIB=/tmp ruby -e 1",
    "NODE_PATH=/tmp node -e \"require('x')\"",
    "find . -name b.py | xargs rm",
    "for f in b.py; do rm $f; done",
    "while read f; do rm $f; done <<< b.py",
    "rm -rf {.git,x}",
    "d=.git; rm -rf $d",
    "d=.g; rm -rf ${d}it",
    "rm -rf $(echo .git)",
    "find . -maxdepth 1 -name '.c*' -exec rm -rf {} +",
    "ls -d .c* | xargs rm -rf",
    "python3 -c \"import os; os.remove(os.path.join('.claude','settings.local.json'))\"",
    "python3 -c \"import shutil; shutil.rmtree(chr(46)+'codex')\"",
    "python3 -c \"import os; os.remove('.%s/settings.local.json' % 'claude')\"",
    "python3 -c \"open('.%s/config' % 'git','w').write('')\"",
    "python3 -c \"open(chr(46)+'git/hooks/pre-commit','w').write('')\"",
    "python3 -c \"import os; [os.remove(p) for p in __import__('glob').glob('.g?t/hooks/*')]\"",
    "python3 -c \"import pathlib; [p.unlink() for p in pathlib.Path('.').rglob('hooks.json')]\"",
    "python3 -c \"import pathlib; [p.unlink() for p in pathlib.Path('.').rglob('settings.local.json')]\"",
    "perl -e 'unlink glob(\".c*/*.json\")'",
    "node -e \"require('fs').rmSync('.'+'codex',{recursive:true})\"",
    "ruby -e 'File.delete(\".claude/settings.local.json\")'",
    "python3 -c \"import os; os.makedirs('sub/'+chr(46)+'git')\"",
    "python3 -c \"open('sub/'+chr(46)+'git','w').write('gitdir: /nonexistent')\"",
]
HOSTILE += [c for c in HOSTILE_MORE if c not in HOSTILE]
HOSTILE += [c for c in HOSTILE_ROUND2 if c not in HOSTILE]
# Everyday once, hostile now: code on the command line that starts programs (what it runs
# could come from its argv, the environment or stdin), and a command left running past
# the check after the call.
HOSTILE += ["python3 -c \"import subprocess; print(subprocess.run(['pytest', '-q']).returncode)\"",
            "nohup pytest -q > /tmp/log 2>&1 &"]
EVERYDAY += ["git branch -r --contains HEAD", 'git log --author="$(git config user.name)" -1',
             "git diff $(git merge-base HEAD main)", "git log -1 $(git rev-parse HEAD)",
             "python3 -c \"import json; print(json.load(open('.git/coord/state.json'))['version'])\"",
             "find . -name __pycache__ -prune -exec rm -rf {} +",
             "vim README.md", "python -c \"import hunkwise; print(hunkwise.__file__)\""]
EVERYDAY += [c for c in EVERYDAY_MORE if c not in EVERYDAY]


def test_the_table_is_large_and_holds_every_line_of_the_issue() -> None:
    assert len(HOSTILE) >= 300 and len(EVERYDAY) >= 100, (len(HOSTILE), len(EVERYDAY))
    assert len(set(HOSTILE)) == len(HOSTILE), [c for c in HOSTILE if HOSTILE.count(c) > 1]
    assert len(set(EVERYDAY)) == len(EVERYDAY), [c for c in EVERYDAY if EVERYDAY.count(c) > 1]
    assert not set(HOSTILE) & set(EVERYDAY)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding what the lines reach for, and a bin/ for PATH."""
    d = tmp_path_factory.mktemp("scratch")
    (d / "bin").mkdir()
    os.symlink(GIT, d / "g")
    os.symlink(GIT, d / "bin" / "gpath")
    shutil.copyfile(os.path.realpath(GIT), d / "gcopy")
    scripts = {"gs.sh": "#!/bin/sh\nset -e\ngit stash\n", "wrap": "#!/bin/bash\nexec git \"$@\"\n",
               "runner.sh": "#!/bin/sh\nset -e\npytest -q \"$@\"\n",
               "x.py": "#!/usr/bin/env python3\nimport os\nos.system('git stash')\n",
               "tool.py": "import subprocess\nprint(subprocess.run(['ls']).returncode)\n",
               "envfile": "GIT_DIR=/tmp/x\n"}
    for name, text in scripts.items():
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    (d / "gcopy").chmod(0o755)
    venv = d / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "activate").write_text(
        "deactivate () {\n  hash -r 2> /dev/null\n}\nVIRTUAL_ENV=x\nPATH=\"$VIRTUAL_ENV/bin:$PATH\""
        "\nexport PATH\n")
    return d


def _env(scratch: Path) -> dict[str, str]:
    return {"PATH": f"{scratch / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": os.environ.get("HOME", "/root")}


@pytest.mark.parametrize("line", HOSTILE)
def test_hostile_lines_are_blocked(scratch: Path, line: str) -> None:
    found = check_command(line, env=_env(scratch), cwd=str(scratch))
    assert found is not None, f"not blocked: {line!r}"
    message = found.message()
    assert message.startswith("hunkwise blocked") and "Instead:" in message
    assert found.instead


@pytest.mark.parametrize("line", EVERYDAY)
def test_everyday_lines_pass(scratch: Path, line: str) -> None:
    found = check_command(line, env=_env(scratch), cwd=str(scratch))
    assert found is None, f"{line!r}: {found and found.message()}"


@pytest.mark.parametrize("line,names", [
    ("coord reject B --note x --discard", "coord reject is the coordinator's"),
    ("timeout 5 coord thaw", "coord thaw is the coordinator's"),
    ("GIT_EXTERNAL_DIFF=./x.sh git diff", "GIT_EXTERNAL_DIFF"),
    ("export GIT_PAGER='rm -rf src'; git log", "GIT_PAGER"),
    ("git ls-remote --upload-pack='rm -rf src' .", "upload-pack"),
    ("function f { git stash; }; f", "git stash"), ("trap 'git stash' EXIT", "trap"),
    ("hash -p /usr/bin/git g; g stash", "hash -p"), ("alias g=git; g stash", "alias"),
    ("xargs env git", "xargs"), ("bash /dev/stdin <<< 'git stash'", "git stash"),
    ("make -f /dev/stdin <<'EOF'\nall:\n\tgit stash\nEOF", "makefile on stdin"),
    ("BASH_ENV=./x.sh bash -c true", "BASH_ENV"), ("mapfile -C 'git stash' -c 1 < f.txt", "-C"),
    ("setpriv --reuid=0 git stash", "setpriv"), ("gh pr checkout 12", "gh"),
    ("sh -c 'g\\it stash'", "git stash"), ("echo Z2l0IHN0YXNo | base64 -d | sh", "piped"),
    ("python3 -c \"import os; os.system('g'+'it stash')\"", "names git"),
    ("./gcopy stash", "git stash"), ("gpath stash", "git stash"),
    ("ln -s /usr/bin/git /tmp/g; /tmp/g stash", "copy or link of git"),
])
def test_the_block_message_says_why(scratch: Path, line: str, names: str) -> None:
    found = check_command(line, env=_env(scratch), cwd=str(scratch))
    assert found is not None and names in found.message(), found and found.message()


# ---- writes: tool calls and shell lines, judged against a real tree's grants ---------------

@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith(("GIT_", "COORD_")):
                mp.delenv(key)
        for key, value in hermetic_env(home, os.environ.get("PATH", "")).items():
            mp.setenv(key, value)
        repo = build_repo(tmp_path_factory.mktemp("t") / "repo", {
            "src/api/a.py": "a\n", "src/api/b.py": "b\n", "src/other.py": "o\n",
            "f.txt": numbered(10), "g.txt": "g\n", "notes/a.md": "n\n", "coord.toml": "",
            ".claude/settings.json": "{}\n"})
        (repo / "vendor").mkdir()
        nested = build_repo(repo / "vendor" / "lib", {"x.py": "x\n"})
        assert (nested / ".git").is_dir()
        os.symlink("../../g.txt", repo / "src" / "api" / "link.txt")
        for args in (["assign", "t1", "--title", "t", "--expect", "e", "--write", "src/api/**",
                      "--write", "f.txt:1-5", "--write", "notes/*.md"],
                     ["assign", "t2", "--title", "t", "--expect", "e", "--write", "g.txt",
                      "--write", "src/other.py", "--write", "vendor/**"]):
            assert run_cli("coord", repo, *args).code == 0
        r = run_cli("worker", repo, "start", "t1", "--role", "backend")
        assert r.code == 0, r.stderr
        yield repo, json.loads(r.stdout)["session"]


def _call(tool: str, tool_input: Any, cwd: str) -> str:
    return json.dumps({"session_id": "abc", "cwd": cwd, "hook_event_name": "PreToolUse",
                       "tool_name": tool, "tool_input": tool_input})


PATCH = "*** Begin Patch\n{body}\n*** End Patch\n"


def _patch(body: str) -> str:
    return PATCH.format(body=body)


UPDATE_G = "*** Update File: g.txt\n@@\n-g\n+h"
# (tool, tool_input, cwd relative to the repo, or absolute)
HOSTILE_CALLS: list[tuple[str, Any, str]] = [
    ("Edit", {"file_path": "g.txt", "old_string": "g", "new_string": "h"}, "."),
    ("Write", {"file_path": "src/other.py", "content": "x"}, "."),
    ("Write", {"file_path": "coord.toml", "content": "x"}, "."),
    ("Write", {"file_path": "REPO/g.txt", "content": "x"}, "/tmp"),
    ("Write", {"file_path": "REPO/g.txt", "content": "x"}, "vendor/lib"),
    ("Write", {"file_path": "x.py", "content": "x"}, "vendor/lib"),
    ("Edit", {"file_path": "../g.txt", "old_string": "g", "new_string": "h"}, "src"),
    ("Write", {"file_path": "src/api/../../g.txt", "content": "x"}, "."),
    ("Write", {"file_path": "src/api/link.txt", "content": "x"}, "."),
    ("Write", {"file_path": ".git/config", "content": "[alias]"}, "."),
    ("Write", {"file_path": ".git/hooks/pre-commit", "content": "exit 0"}, "."),
    ("Write", {"file_path": ".GIT/config", "content": "x"}, "."),
    ("Write", {"file_path": "src/api/.git/config", "content": "x"}, "."),
    ("Write", {"file_path": ".git/coord/state.json", "content": "{}"}, "."),
    ("Write", {"file_path": ".claude/settings.local.json", "content": "{}"}, "."),
    ("Write", {"file_path": ".claude/settings.json", "content": "{}"}, "."),
    ("Edit", {"file_path": ".Claude/Settings.local.json", "old_string": "a",
              "new_string": "b"}, "."),
    ("Write", {"file_path": ".codex/hooks.json", "content": "{}"}, "."),
    ("Write", {"file_path": ".codex/config.toml", "content": ""}, "."),
    ("NotebookEdit", {"notebook_path": "g.txt", "new_source": "x"}, "."),
    ("Edit", {"old_string": "a", "new_string": "b"}, "."),
    ("Write", {"file_path": 7, "content": "x"}, "."),
    ("Write", {"file_path": "", "content": "x"}, "."),
    ("Write", "src/api/a.py", "."),
    ("Edit", ["src/api/a.py"], "."),
    ("NotebookEdit", {"new_source": "x"}, "."),
    # both paths given: whichever the tool writes, each is judged
    ("NotebookEdit", {"file_path": "src/api/a.py", "notebook_path": "g.txt", "new_source": "x"}, "."),
    ("apply_patch", {"command": _patch(UPDATE_G)}, "."),
    ("apply_patch", {"command": _patch("*** Update File: src/api/a.py\n*** Move to: g.txt\n"
                                       "@@\n-a\n+b")}, "."),
    ("apply_patch", {"command": _patch("*** Add File: src/api/n.py\n+x\n   *** Update File: "
                                       "g.txt\n@@\n-g\n+h")}, "."),
    ("apply_patch", {"command": _patch("  *** Delete File: coord.toml")}, "."),
    ("apply_patch", {"command": _patch("*** Add File: .git/hooks/post-checkout\n+x")}, "."),
    ("apply_patch", {"command": "<<'EOF'\n" + _patch(UPDATE_G) + "EOF"}, "."),
    ("apply_patch", {"command": _patch("*** Update File: ../g.txt\n@@\n-g\n+h")}, "src"),
    ("apply_patch", {"command": "*** Begin Patch\n*** Update File: src/api/a.py\n@@\n-a\n+b\n"},
     "."),
    ("apply_patch", {"command": 5}, "."),
    ("Bash", {"command": "cd .. && apply_patch <<'EOF'\n" + _patch(UPDATE_G) + "EOF\n"}, "src"),
    ("Bash", {"command": "apply_patch <<'EOF'\n" + _patch(UPDATE_G) + "EOF\n"}, "."),
    ("Bash", {"command": ["apply_patch", _patch(UPDATE_G)]}, "."),
    ("Bash", {"command": ["bash", "-lc", "cd src && apply_patch <<'EOF'\n" +
                          _patch("*** Update File: ../g.txt\n@@\n-g\n+h") + "EOF\n"]}, "."),
    ("Bash", {"command": ["bash", "-lc", "apply_patch <<'EOF'\n*** Begin Patch\nEOF\n"]}, "."),
    ("Bash", {"command": 12}, "."),
    ("Bash", {}, "."),
    ("PowerShell", {"command": "git stash"}, "."),
    ("PowerShell", {"command": "& ('gi'+'t') stash"}, "."),
    ("Monitor", {"command": "git stash"}, "."),
]

SHELL_WRITES = [
    "sed -i s/g/h/ g.txt", "echo x > g.txt", "echo x >> g.txt", "printf x >| g.txt",
    "cat f.txt &> g.txt", "cp src/api/a.py g.txt", "cp src/api/a.py src/api/b.py src/",
    "mv g.txt src/api/", "mv src/api/a.py src/other.py", "rm g.txt", "rm -rf src",
    "rm -rf vendor/lib/x.py", "tee g.txt < f.txt", "tee -a src/other.py", "truncate -s0 g.txt",
    "perl -pi -e 's/a/b/' g.txt", "perl -i.bak -pe 's/a/b/' g.txt", "ruby -pi -e 1 g.txt",
    "dd if=/dev/zero of=g.txt count=1", "ln -sf /dev/null g.txt", "chmod 000 g.txt",
    "chmod -R a-w src", "touch g.txt", "install -m644 f.txt g.txt", "patch -o g.txt f.txt p",
    "patch g.txt < p.diff", "patch -p1 <<'EOF'\n--- a/g.txt\n+++ b/g.txt\n@@ -1 +1 @@\n-g\n+h\nEOF",
    "black .", "prettier --write .", "ruff check --fix .", "ruff format", "isort .",
    "gofmt -w .", "cargo fmt", "black src", "ruff format src/other.py", "autopep8 -i g.txt",
    "eslint --fix .", "rm .claude/settings.local.json", "echo {} > .claude/settings.local.json",
    "mv .claude/settings.json /tmp/", "rm -rf .codex", "rm -rf .claude",
    "cd .git && rm hooks/pre-commit", "ln -sf /dev/null .git/hooks/pre-commit",
    "chmod -x .git/hooks/pre-commit", "> .git/config", "cp f.txt .git/config",
    "sed -i 's/x/y/' .git/config", "tee -a .git/config < f.txt", "echo x > src/api/../../g.txt",
    "cd src && echo x > ../g.txt", "sort -o g.txt f.txt", "awk '{print > \"g.txt\"}' f.txt",
    "sed -n 'w g.txt' f.txt", "find . -fprint g.txt", "timeout 5 sed -i s/a/b/ g.txt",
    "xargs -I{} cp {} g.txt < f.txt", "env X=1 rm g.txt", "bash -c 'rm g.txt'", "sudo rm g.txt",
    "echo x > /tmp/elsewhere/.git/config", "gawk -i inplace '{print}' g.txt",
    "sed -i -e s/a/b/ f.txt g.txt", "cp -r src/api vendor/", "echo x | tee src/api/a.py g.txt",
    "find .git -delete", "find .claude -name '*.json' -delete", "find .codex -type f -delete",
    # round two: hard links, compressors, archivers, copiers, downloads, fixers, finds that
    # reach protected files, and worker commands on another worker's task
] + [
    "ln -f g.txt src/api/a.py",
    "cp -l -f g.txt src/api/a.py",
    "ln -f g.txt src/api/a.py && echo gone >> src/api/a.py",
    "ln -f vendor/lib/x.py src/api/a.py && : > src/api/a.py",
    "cp --link --force g.txt src/api/a.py",
    "worker failed t2 --reason x",
    "worker done t2 --summary x",
    "worker handoff t2 --to someone",
    "worker blocked t2 --reason x",
    "uniq f.txt g.txt",
    "split -l1 f.txt g.txt",
    "csplit -f g.txt f.txt 1",
    "gzip g.txt",
    "gzip -f vendor/lib/x.py",
    "bzip2 g.txt",
    "xz g.txt",
    "zip -qm /tmp/x/z.zip g.txt",
    "tar -cf /tmp/x/t.tar g.txt --remove-files",
    "tar -cf g.txt f.txt",
    "tar -xf /tmp/x/t.tar",
    "tar -C vendor -xf /tmp/x/t.tar",
    "unzip -o /tmp/x/z.zip",
    "rsync f.txt g.txt",
    "rsync -a --delete src/ vendor/",
    "curl -s -o g.txt file:///etc/hostname",
    "wget -q -O g.txt file:///etc/hostname",
    "find . -name 'b*' -delete",
    "find vendor -delete",
    "find . -path ./vendor -prune -o -delete",
    "find . -newer src/api/a.py -delete",
    "pre-commit run -a",
    "2to3 -w g.txt",
    "pyupgrade g.txt",
    "docformatter -i g.txt",
    "ruff --fix .",
    "find . -name config -path '*/.git/*' -delete",
    "find . -name '*.json' -path './.claude/*' -delete",
    "find . -name settings.local.json -delete",
    "find . -name hooks.json -delete",
    "find . -type f -name '*.json' -delete",
    "rsync -a --delete /tmp/x/empty/ .claude/",
    "tar -xf /tmp/x/t.tar -C .git",
]

EVERYDAY_CALLS: list[tuple[str, Any, str]] = [
    ("Edit", {"file_path": "src/api/a.py", "old_string": "a", "new_string": "b"}, "."),
    ("Write", {"file_path": "REPO/src/api/new/x.py", "content": "x"}, "/tmp"),
    ("Write", {"file_path": "notes/b.md", "content": "x"}, "."),
    ("Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"}, "src/api"),
    ("Write", {"file_path": "/tmp/scratch-notes.txt", "content": "x"}, "."),
    ("NotebookEdit", {"notebook_path": "src/api/n.ipynb", "new_source": "x"}, "."),
    ("apply_patch", {"command": _patch("*** Update File: src/api/a.py\n@@\n-a\n+b")}, "."),
    ("apply_patch", {"command": _patch("*** Add File: src/api/c.py\n+c")}, "."),
    ("Bash", {"command": "cd src/api && apply_patch <<'EOF'\n" +
              _patch("*** Update File: a.py\n@@\n-a\n+b") + "EOF\n"}, "."),
    ("Read", {"file_path": "g.txt"}, "."), ("Grep", {"pattern": "git"}, "."),
    ("PowerShell", {"command": "Get-ChildItem"}, "."),
]
EVERYDAY_WRITES = [
    "sed -i s/a/b/ src/api/a.py", "echo x > src/api/new.py", "black src/api", "black src/api/a.py",
    "ruff format src/api/a.py", "prettier --write src/api/a.py", "ruff check --fix src/api",
    "cp src/api/a.py src/api/c.py", "rm src/api/b.py", "touch src/api/z.py", "echo x > /tmp/x.txt",
    "cat f.txt > /dev/null", "cd src/api && sed -i s/a/b/ a.py", "pytest -q > /tmp/out.txt 2>&1",
    "mkdir -p src/api/new", "sed -i '1s/x/y/' f.txt", "echo n >> notes/c.md",
    "isort src/api", "tee src/api/log.txt < f.txt", "cp f.txt /tmp/", "git diff > /tmp/p.diff",
    "mv src/api/a.py src/api/a2.py", "black src/api f.txt", "find . -name '*.pyc' -delete",
    "find src/api -name '*.tmp' -delete", "echo x > \"$(mktemp)\"", "git diff > \"$TMPDIR/p.diff\"",
]


def _in(tree: tuple[Path, str], cwd: str) -> str:
    repo = tree[0]
    return cwd if os.path.isabs(cwd) else str((repo / cwd).resolve())


def _fill(value: Any, repo: Path) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, repo) for k, v in value.items()}
    return value.replace("REPO", str(repo)) if isinstance(value, str) else value


def _judge(tree: tuple[Path, str], tool: str, tool_input: Any, cwd: str) -> tuple[int, str]:
    repo, session = tree
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    code, message = guard(_call(tool, _fill(tool_input, repo), _in(tree, cwd)),
                          {"COORD_SESSION": session, "PATH": os.environ["PATH"]})
    after = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert before == after  # judging touches nothing
    return code, message


@pytest.mark.parametrize("tool,tool_input,cwd", HOSTILE_CALLS,
                         ids=[f"{t}-{i}" for i, (t, _x, _c) in enumerate(HOSTILE_CALLS)])
def test_hostile_tool_calls_are_blocked(tree: tuple[Path, str], tool: str, tool_input: Any,
                                        cwd: str) -> None:
    code, message = _judge(tree, tool, tool_input, cwd)
    assert code == 2 and message.startswith("hunkwise"), message


@pytest.mark.parametrize("line", SHELL_WRITES)
def test_shell_writes_outside_the_grants_are_blocked(tree: tuple[Path, str], line: str) -> None:
    code, message = _judge(tree, "Bash", {"command": line}, ".")
    assert code == 2, f"not blocked: {line!r}"
    assert "hunkwise blocked" in message


@pytest.mark.parametrize("tool,tool_input,cwd", EVERYDAY_CALLS,
                         ids=[f"{t}-{i}" for i, (t, _x, _c) in enumerate(EVERYDAY_CALLS)])
def test_everyday_tool_calls_pass(tree: tuple[Path, str], tool: str, tool_input: Any,
                                  cwd: str) -> None:
    assert _judge(tree, tool, tool_input, cwd) == (0, "")


@pytest.mark.parametrize("line", EVERYDAY_WRITES)
def test_shell_writes_inside_the_grants_pass(tree: tuple[Path, str], line: str) -> None:
    assert _judge(tree, "Bash", {"command": line}, ".") == (0, ""), line


def test_a_formatter_on_the_tree_names_the_granted_paths(tree: tuple[Path, str]) -> None:
    code, message = _judge(tree, "Bash", {"command": "black ."}, ".")
    assert code == 2 and "`black src/api f.txt notes/*.md`" in message, message
    code, message = _judge(tree, "Bash", {"command": "ruff check --fix ."}, ".")
    assert code == 2 and "ruff check src/api" in message, message


def test_the_counts_of_the_write_tables() -> None:
    assert len(HOSTILE_CALLS) + len(SHELL_WRITES) >= 100
    assert len(EVERYDAY_CALLS) + len(EVERYDAY_WRITES) >= 30


def test_protected_files_are_refused_even_without_a_session(tree: tuple[Path, str]) -> None:
    repo, _session = tree
    for tool_input in ({"file_path": str(repo / ".git" / "config"), "content": "x"},
                       {"file_path": str(repo / ".claude" / "settings.local.json"), "content": ""}):
        code, message = guard(_call("Write", tool_input, str(repo)), {})
        assert code == 2 and any(w in message for w in ("never", "hook settings", ".git")), \
            message
    # other files are not judged without a session
    assert guard(_call("Write", {"file_path": str(repo / "g.txt"), "content": "x"},
                       str(repo)), {}) == (0, "")
