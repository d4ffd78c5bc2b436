"""The shipped skills: named as their folders, packaged as data, installed where Claude Code
and Codex read a project's skills, and removed again (issue 26)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
from hunkwise.coordinator import skills

from testing.env import ROOT
from testing.repo import git

COMMANDS = re.compile(r"`((?:coord|worker) [a-z-]+)")


def test_each_skill_folder_is_named_after_its_skill() -> None:
    folders = sorted(p.name for p in (ROOT / "skills").iterdir() if p.is_dir())
    assert folders == sorted(skills.NAMES)
    for name in folders:
        text = (ROOT / "skills" / name / "SKILL.md").read_text()
        assert skills.front_name(text) == name
        assert re.search(r"^description: \S", text, re.M)


def test_the_skills_name_only_commands_that_exist() -> None:
    from hunkwise.coordinator.cli import cli as coord_cli
    from hunkwise.worker.cli import cli as worker_cli

    known = {f"coord {n}" for n in coord_cli.commands} | {f"worker {n}" for n in worker_cli.commands}
    for name in skills.NAMES:
        used = set(COMMANDS.findall((ROOT / "skills" / name / "SKILL.md").read_text()))
        assert used <= known, sorted(used - known)


def test_the_installation_finds_its_skills_as_package_data() -> None:
    src = skills.source()
    assert src.parent.name == "hunkwise" or src == ROOT / "skills"
    assert (src / "hunkwise-worker" / "SKILL.md").read_bytes() == \
        (ROOT / "skills" / "hunkwise-worker" / "SKILL.md").read_bytes()


@pytest.mark.parametrize(("agent", "where"), [("claude", ".claude/skills"),
                                              ("codex", ".agents/skills")])
def test_install_hooks_puts_the_skills_where_the_agent_reads_them(
        make_repo, coord, agent: str, where: str) -> None:
    repo = make_repo({"a.txt": "a\n"})
    r = coord(repo, "install-hooks", "--agent", agent)
    assert r.code == 0, r.stderr
    wrote = r.doc["agents"][agent]["skills"]
    assert sorted(Path(p).parent.name for p in wrote) == sorted(skills.NAMES)
    for name in skills.NAMES:
        dest = repo / where / name / "SKILL.md"
        assert dest.read_bytes() == (ROOT / "skills" / name / "SKILL.md").read_bytes()
    # The copies are no one's change in the shared tree.
    assert git(repo, "status", "--porcelain") == ""
    assert coord(repo, "status").doc["unowned"] == []
    # Again: nothing changes, nothing doubles.
    assert coord(repo, "install-hooks", "--agent", agent).code == 0
    r = coord(repo, "uninstall-hooks")
    assert r.code == 0
    assert not (repo / where / "hunkwise-worker").exists()
    assert all(str(repo / where / n / "SKILL.md") in r.doc["skills"] for n in skills.NAMES)


def test_uninstall_leaves_a_skill_of_the_same_name_that_is_not_ours(make_repo, coord) -> None:
    repo = make_repo({"a.txt": "a\n"})
    mine = repo / ".claude" / "skills" / "hunkwise-worker" / "SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: something-else\ndescription: x\n---\n")
    coord(repo, "uninstall-hooks")
    assert mine.exists()


def test_launch_makes_the_worker_skill_available_to_a_claude_agent(make_repo, coord,
                                                                   monkeypatch) -> None:
    """A launched claude agent finds the skill in the project (the profile is defined
    here with a harmless command; the skills go where Claude Code reads them)."""
    monkeypatch.setenv("HUNKWISE_NO_TMUX", "1")
    repo = make_repo({"a.txt": "a\n", "coord.toml": '[agents.claude]\ncommand = ["true"]\n'})
    assert coord(repo, "assign", "T1", "--title", "t", "--expect", "e", "--write", "a.txt").code == 0
    assert coord(repo, "launch", "T1", "--agent", "claude").code == 0
    assert (repo / ".claude" / "skills" / "hunkwise-worker" / "SKILL.md").is_file()


@pytest.mark.slow
def test_a_wheel_ships_the_skills(tmp_path_factory: pytest.TempPathFactory) -> None:
    from testing.wheel import built_wheel

    names = zipfile.ZipFile(built_wheel(tmp_path_factory)).namelist()
    for name in skills.NAMES:
        assert f"hunkwise/skills/{name}/SKILL.md" in names
