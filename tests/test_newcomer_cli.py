"""A newcomer's first commands: `coord --help` says where to start, `--repo` before the
command name, colour, the pager and shell completion (docs/newcomer.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testing.cli import ok
from testing.env import BIN
from testing.repo import MakeRepo, write


def test_help_groups_commands_by_workflow_with_examples(coord, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    r = coord(repo, "--help", json_out=False)
    assert r.code == 0
    text = r.stdout
    heads = [line for line in text.split("\n") if line and not line.startswith(" ")
             and line.endswith(":")]
    for word in ("plan", "review", "release", "sessions", "machines", "setup"):
        assert any(h.startswith(word) for h in heads), (word, heads)
    # In workflow order: planning before reviewing before releasing.
    assert text.index("\nplan") < text.index("\nreview") < text.index("\nrelease")
    assert text.index("  init ") < text.index("  assign ") < text.index("  accept ")
    assert "Start here" in text and "coord assign --title" in text
    # No truncated descriptions (click's short help ends a cut one with "...").
    assert not [line for line in text.split("\n")[1:] if line.rstrip().endswith("...")]
    # Every registered command is listed.
    from hunkwise.coordinator.cli import cli

    for name, cmd in cli.commands.items():
        if not cmd.hidden:
            assert f"\n  {name} " in text, name


def test_a_command_added_to_no_section_is_still_listed() -> None:
    import click
    from hunkwise.shared.cli import WorkflowGroup

    class G(WorkflowGroup):
        sections = (("plan", ("a",)),)

    @click.group(cls=G)
    def g() -> None:
        """G."""

    @g.command(name="a")
    def a() -> None:
        """First."""

    @g.command(name="zz")
    def zz() -> None:
        """Added later."""

    from click.testing import CliRunner

    out = CliRunner().invoke(g, ["--help"]).output
    assert "other:" in out and "zz" in out and "Added later." in out


def test_repo_before_the_command_name(coord, worker, make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"a.txt": "a\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    doc = ok(coord(elsewhere, "--repo", str(repo), "assign", "t1", "--title", "T", "--expect",
                   "E", "--write", "a.txt"))
    assert doc["task"]["id"] == "t1"
    status = ok(coord(elsewhere, "--repo", str(repo), "status"))
    assert [t["id"] for t in status["tasks"]] == ["t1"]
    started = ok(worker(elsewhere, "--repo", str(repo), "start", "t1"))
    assert started["task"]["state"] == "in_progress"
    # The command's own --repo wins over the group's.
    other = make_repo({"b.txt": "b\n"})
    assert ok(coord(elsewhere, "--repo", str(other), "status", "--repo", str(repo)))["tasks"]


def test_repo_before_the_command_as_a_process(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo({"a.txt": "a\n"})
    p = subprocess.run([str(BIN / "coord"), "--repo", str(repo), "status"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "no tasks" in p.stdout


# ---- colour ------------------------------------------------------------------------------

def _task_with_diff(coord, worker, make_repo: MakeRepo) -> Path:
    repo = make_repo({"a.txt": "one\ntwo\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t1", "--session", "sess-20260101-0000-worker@m"))
    write(repo, "a.txt", "one\nTWO\n")
    return repo


def test_color_always_colours_diff_lines_and_states(coord, worker, make_repo: MakeRepo) -> None:
    repo = _task_with_diff(coord, worker, make_repo)
    r = coord(repo, "diff", "t1", "--color", "always", json_out=False)
    assert r.code == 0, r.stderr
    assert "\x1b[32m+TWO\x1b[0m" in r.stdout
    assert "\x1b[31m-two\x1b[0m" in r.stdout
    r = coord(repo, "--color", "always", "status", json_out=False)
    assert "\x1b[33min_progress\x1b[0m" in r.stdout
    # Never inside JSON, whatever --color says.
    doc = ok(coord(repo, "diff", "t1", "--color", "always"))
    assert "\x1b" not in doc["patch"]


def test_no_colour_when_not_a_terminal_or_never_or_no_color(coord, worker,
                                                            make_repo: MakeRepo) -> None:
    repo = _task_with_diff(coord, worker, make_repo)
    assert "\x1b" not in coord(repo, "diff", "t1", json_out=False).stdout  # not a tty
    assert "\x1b" not in coord(repo, "diff", "t1", "--color", "never", json_out=False).stdout


def _run_on_a_tty(argv: list[str], cwd: Path, env: dict[str, str],
                  base: dict[str, str] | None = None) -> str:
    """Run a command with its stdin and stdout on a pseudo-terminal; what it printed.
    `env` goes over `base` (this process's environment unless given)."""
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=subprocess.PIPE,
                         env={**(dict(os.environ) if base is None else base), **env})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_on_a_terminal_unless_no_color(coord, worker, make_repo: MakeRepo,
                                              tmp_path: Path) -> None:
    repo = _task_with_diff(coord, worker, make_repo)
    argv = [str(BIN / "coord"), "diff", "t1"]
    out = _run_on_a_tty(argv, repo, {"PAGER": "cat", "TERM": "xterm"})
    assert "\x1b[32m+TWO" in out
    out = _run_on_a_tty(argv, repo, {"PAGER": "cat", "TERM": "xterm", "NO_COLOR": "1"})
    assert "+TWO" in out and "\x1b[" not in out


def test_long_diff_goes_through_the_pager_on_a_terminal_only(coord, worker, make_repo: MakeRepo,
                                                             tmp_path: Path) -> None:
    repo = _task_with_diff(coord, worker, make_repo)
    seen = tmp_path / "paged.txt"
    pager = f"{sys.executable} -c \"import sys, os; open({str(seen)!r}, 'w').write(os.environ.get('LESS', '') + '|' + sys.stdin.read())\""
    argv = [str(BIN / "coord"), "diff", "t1"]
    _run_on_a_tty(argv, repo, {"GIT_PAGER": pager, "PAGER": "false", "TERM": "xterm",
                               "LESS": ""})
    # GIT_PAGER before PAGER; LESS as the user set it (empty here) is kept.
    assert seen.exists() and "+TWO" in seen.read_text()
    seen.unlink()
    env = {k: v for k, v in os.environ.items() if k not in ("LESS", "GIT_PAGER")}
    p = subprocess.Popen(argv, cwd=repo, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         env={**env, "PAGER": pager})
    out, _ = p.communicate(timeout=60)
    assert b"+TWO" in out and not seen.exists()  # piped: no pager
    _run_on_a_tty(argv + ["--json"], repo, {"PAGER": pager})
    assert not seen.exists()  # --json: never a pager
    env_less = {k: v for k, v in os.environ.items() if k not in ("LESS", "GIT_PAGER")}
    _run_on_a_tty(argv, repo, {"PAGER": pager, "TERM": "xterm"}, base=env_less)
    assert seen.read_text().startswith("FRX|")  # git's default LESS
    # A pager that is not there shows nothing: the text is printed as it is.
    out = _run_on_a_tty(argv, repo, {"PAGER": "/nonexistent/pager", "TERM": "xterm"},
                        base=env_less)
    assert "+TWO" in out


def test_shell_completion_is_provided(make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    script = subprocess.run([str(BIN / "coord")], cwd=repo, capture_output=True, text=True,
                            env={**os.environ, "_COORD_COMPLETE": "bash_source"}, timeout=60)
    assert script.returncode == 0 and "_coord_completion" in script.stdout
    words = subprocess.run([str(BIN / "coord")], cwd=repo, capture_output=True, text=True,
                           env={**os.environ, "_COORD_COMPLETE": "bash_complete",
                                "COMP_WORDS": "coord sta", "COMP_CWORD": "1"}, timeout=60)
    assert "status" in words.stdout
