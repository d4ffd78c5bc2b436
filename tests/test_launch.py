"""`coord launch`, `coord stop`, `coord attach`, and the liveness flags (issue 26).

The agent is a stand-in driven as a real process: the scripted editor shipped for the demo
(coordinator/standin.py, `--agent demo`), which reads its prompt, puts each edit to the
guard through the hook protocol, writes, and then runs `worker done`, exits without a
report, or hangs; or a small shell command defined with `[agents.NAME]`. Every wait is
for a condition (a state change, a line in the log, a process gone), never a fixed time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from hunkwise.coordinator import launch
from hunkwise.shared.state import store
from hunkwise.shared.state.context import open_repo
from hunkwise.shared.state.models import Launch, State, Task

from testing.repo import git
from testing.state import age_claims
from testing.wait import wait_until

APP = "one\ntwo\nthree\nfour\n"


def _state(repo: Path) -> State:
    return store.load(open_repo(str(repo)).lay)


def _task(repo: Path, tid: str = "T1") -> Task:
    return _state(repo).tasks[tid]


def _script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripts: dict[str, Any]) -> None:
    path = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(scripts))
    monkeypatch.setenv("HUNKWISE_STANDIN_SCRIPT", str(path))


def _repo(make_repo: Any, coord: Any, toml: str = "") -> Path:
    files = {"app.txt": APP}
    if toml:
        files["coord.toml"] = toml
    repo = make_repo(files)
    assert coord(repo, "assign", "T1", "--title", "Shout two", "--expect", "line 2 says TWO",
                 "--write", "app.txt:1-2", "--check", "grep -q TWO app.txt").code == 0
    return repo


def _gone(pid: int) -> bool:
    rec = Launch(agent="x", session="s", pid=pid, proc_start=launch.proc_start(pid), started=0,
                 log="", prompt_file="")
    return not launch.alive(rec)


def _reported(repo: Path, tid: str = "T1", revision: int = 1) -> bool:
    t = _task(repo, tid)
    return t.state == "reported" and t.revision >= revision


@pytest.fixture(autouse=True)
def no_tmux(monkeypatch: pytest.MonkeyPatch) -> None:
    """Background processes unless a test asks for tmux (a tmux server is the tests' own)."""
    monkeypatch.setenv("HUNKWISE_NO_TMUX", "1")


def test_launch_claims_the_task_and_the_agent_delivers_its_report(
        make_repo, coord, tmp_path, monkeypatch) -> None:
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {
        "edits": [{"path": "app.txt", "find": "two", "replace": "TWO"}], "summary": "two is TWO"}})
    r = coord(repo, "launch", "T1", "--agent", "demo")
    assert r.code == 0, r.stderr
    got = r.doc["launched"][0]
    session = got["session"]
    # Claimed for a new session before the agent runs a single command.
    t = _task(repo)
    assert t.state in ("in_progress", "reported") and t.session == session
    assert t.launch is not None and t.launch.pid == got["pid"] and t.launch.tmux is None
    assert t.launch.log.startswith(str(open_repo(str(repo)).lay.root))
    prompt = Path(got["prompt_file"]).read_text()
    for want in ("Shout two", "line 2 says TWO", "app.txt:1-2", "grep -q TWO app.txt",
                 "worker done T1", session, "hunkwise-worker/SKILL.md"):
        assert want in prompt, want
    wait_until(lambda: _reported(repo), 60, "the stand-in's report")
    wait_until(lambda: _gone(got["pid"]), 60, "the stand-in's exit")
    log = Path(got["log"]).read_text()
    assert "edited app.txt" in log and "delivered T1 r1" in log
    st = coord(repo, "status").doc["tasks"][0]
    assert st["agent"]["state"] == "reported" and st["agent"]["problem"] is None
    assert coord(repo, "accept", "T1").code == 0
    assert git(repo, "show", "HEAD:app.txt") == "one\nTWO\nthree\nfour\n"


def test_the_agent_gets_its_session_and_task_in_its_environment(make_repo, coord) -> None:
    toml = ('[agents.envdump]\ncommand = ["sh", "-c", '
            '"echo $COORD_SESSION $COORD_TASK > {prompt_file}.env; cat {prompt_file}"]\n')
    repo = _repo(make_repo, coord, toml)
    got = coord(repo, "launch", "T1", "--agent", "envdump").doc["launched"][0]
    env_file = Path(got["prompt_file"] + ".env")
    wait_until(env_file.exists, 30, "the agent's environment dump")
    wait_until(lambda: env_file.read_text().endswith("\n"), 30, "the dump's end")
    assert env_file.read_text().split() == [got["session"], "T1"]


def test_an_agent_that_exits_without_a_report_is_flagged_at_once_with_its_log(
        make_repo, coord, tmp_path, monkeypatch) -> None:
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {
        "edits": [{"path": "app.txt", "find": "two", "replace": "TWO"}], "end": "exit"}})
    pid = coord(repo, "launch", "T1", "--agent", "demo").doc["launched"][0]["pid"]
    wait_until(lambda: _gone(pid), 60, "the stand-in's exit")
    agent = coord(repo, "status").doc["tasks"][0]["agent"]
    assert agent["problem"] == "agent exited without a report"
    assert "exiting without a report" in agent["log_tail"]
    human = coord(repo, "status", json_out=False).stdout
    assert "T1: agent exited without a report" in human and "exiting without a report" in human
    brief = coord(repo, "status", "--brief").doc["brief"]
    assert "agent exited T1: agent exited without a report" in brief
    # The board and the watcher say the same.
    from hunkwise.coordinator.board import board_state
    from hunkwise.coordinator.board_render import render

    doc = board_state(open_repo(str(repo)))
    assert doc["tasks"][0]["agent"]["problem"] == "agent exited without a report"
    assert "agent exited without a report" in render(doc, "csrf")
    events = launch.exited_events(open_repo(str(repo)))
    assert [e["event"] for e in events] == ["agent-exited"]
    assert "exiting without a report" in events[0]["body"]


def test_the_watcher_notifies_an_exited_agent_once(make_repo, coord, tmp_path, monkeypatch) -> None:
    out = tmp_path / "notified.jsonl"
    toml = ("[notify]\ncommand = \"cat >> " + str(out) + "\"\n"
            '[agents.quitter]\ncommand = ["sh", "-c", "echo bye"]\n')
    repo = _repo(make_repo, coord, toml)
    pid = coord(repo, "launch", "T1", "--agent", "quitter").doc["launched"][0]["pid"]
    wait_until(lambda: _gone(pid), 30, "the agent's exit")
    assert coord(repo, "watch", "--timeout", "1.5", "--interval", "0.2").code == 0
    wait_until(out.exists, 30, "the notification")
    kinds = [json.loads(line)["event"] for line in out.read_text().splitlines() if line]
    assert kinds.count("agent-exited") == 1


def test_a_worker_that_reported_is_never_a_stale_claim(make_repo, coord, worker) -> None:
    repo = _repo(make_repo, coord)
    assert coord(repo, "assign", "T2", "--title", "t", "--expect", "e", "--write",
                 "app.txt:4").code == 0
    s1 = worker(repo, "start", "T1").doc["session"]
    (repo / "app.txt").write_text("one\nTWO\nthree\nfour\n")
    assert worker(repo, "done", "T1", session=s1).code == 0
    worker(repo, "start", "T2")
    age_claims(repo, "T1", "T2")
    rows = {t["id"]: t for t in coord(repo, "status").doc["tasks"]}
    assert rows["T1"]["stale"] is False and rows["T2"]["stale"] is True
    assert "reported" in coord(repo, "status", json_out=False).stdout.split("\n")[1]
    brief = coord(repo, "status", "--brief").doc["brief"]
    assert "1 open claim(s) (1 stale)" in brief and "claim T1" not in brief


def test_stop_ends_the_agents_process_group_and_releases_the_claim_with_a_handoff(
        make_repo, coord, worker, tmp_path) -> None:
    toml = ('[agents.tree]\ncommand = ["sh", "-c", '
            '"sleep 300 & echo $! > {prompt_file}.child; echo ready; wait"]\n')
    repo = _repo(make_repo, coord, toml)
    got = coord(repo, "launch", "T1", "--agent", "tree").doc["launched"][0]
    child_file = Path(got["prompt_file"] + ".child")
    wait_until(lambda: child_file.exists() and child_file.read_text().strip(), 30, "the child")
    child = int(child_file.read_text())
    (repo / "app.txt").write_text("one\nTWO\nthree\nfour\n")  # the agent's edit, unreported
    r = coord(repo, "stop", "T1")
    assert r.code == 0, r.stderr
    assert r.doc["stopped"] is True and r.doc["released"] is True
    assert _gone(got["pid"]) and _gone(child)
    t = _task(repo)
    assert t.state == "assigned" and t.claim is None
    assert t.launch is not None and coord(repo, "status").doc["tasks"][0]["agent"]["problem"] is None
    assert r.doc["handoff"]["files"] == ["app.txt"]
    # Another session takes it up where it stopped.
    start = worker(repo, "start", "T1").doc
    assert start["checkpoint"]["kind"] == "recovery"


def test_stop_never_signals_a_process_that_is_not_the_recorded_one(make_repo, coord) -> None:
    repo = _repo(make_repo, coord)
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        with store.transaction(open_repo(str(repo)).lay) as state:
            # The recorded pid was reused: same number, another start time.
            state.tasks["T1"].launch = Launch(
                agent="demo", session="sess-20260101-0000-worker@m", pid=other.pid,
                proc_start=(launch.proc_start(other.pid) or 0) + 1, started=1.0, log="",
                prompt_file="")
        r = coord(repo, "stop", "T1")
        assert r.code == 0 and r.doc["stopped"] is False
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_task_whose_agent_is_alive_is_not_launched_again(make_repo, coord, tmp_path,
                                                         monkeypatch) -> None:
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {"end": "hang"}})
    got = coord(repo, "launch", "T1", "--agent", "demo").doc["launched"][0]
    wait_until(lambda: "hanging" in Path(got["log"]).read_text(), 30, "the hang")
    before = store.state_bytes(open_repo(str(repo)).lay)
    r = coord(repo, "launch", "T1", "--agent", "demo", json_out=False)
    assert r.code == 3 and "still running" in r.stderr and len(r.stderr.strip().split("\n")) == 1
    assert store.state_bytes(open_repo(str(repo)).lay) == before
    assert coord(repo, "stop", "T1").code == 0
    assert _gone(got["pid"])


@pytest.mark.parametrize(("args", "toml", "code", "needle"), [
    (["--agent", "nosuch"], "", 2, "unknown agent 'nosuch'"),
    (["--agent", "gone"], '[agents.gone]\ncommand = ["no-such-agent-binary-x", "{prompt}"]\n',
     2, "'no-such-agent-binary-x' is not found on PATH"),
    (["--agent", "demo", "--tmux"], "", 3, "tmux could not start a window"),
])
def test_bad_input_is_one_line_and_claims_nothing(make_repo, coord, tmp_path, monkeypatch,
                                                  args: list[str], toml: str, code: int,
                                                  needle: str) -> None:
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "tmux").write_text("#!/bin/sh\necho 'server exited unexpectedly' >&2\nexit 1\n")
    (fake / "tmux").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    repo = _repo(make_repo, coord, toml)
    r = coord(repo, "launch", "T1", *args, json_out=False)
    assert r.code == code, r.stderr
    assert needle in r.stderr and len(r.stderr.strip().split("\n")) == 1, r.stderr
    t = _task(repo)
    assert t.state == "assigned" and t.claim is None and t.session is None and t.launch is None


def test_a_task_that_cannot_start_is_refused_before_anything_runs(make_repo, coord, worker) -> None:
    repo = _repo(make_repo, coord)
    assert coord(repo, "launch", "nosuch", "--agent", "demo").code == 2
    worker(repo, "start", "T1")
    r = coord(repo, "launch", "T1", "--agent", "demo", json_out=False)
    assert r.code == 3 and "only assigned or changes_requested" in r.stderr
    assert _task(repo).launch is None


@pytest.mark.parametrize("where", ["claiming", "starting", "recording"])
def test_a_launch_interrupted_midway_leaves_no_claim_without_a_process(
        make_repo, coord, tmp_path, monkeypatch, where: str) -> None:
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {"end": "hang"}})
    started: list[int] = []
    real_start = launch._start_background

    def start(*a: Any) -> int:
        if where == "starting":
            raise KeyboardInterrupt
        pid = real_start(*a)
        started.append(pid)
        return pid

    def record(*a: Any) -> None:
        raise KeyboardInterrupt

    real_claim = launch._claim

    def claim(*a: Any) -> Any:
        real_claim(*a)  # the claim is taken, then the interrupt lands
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "_start_background", start)
    if where == "recording":
        monkeypatch.setattr(launch, "_record", record)
    if where == "claiming":
        monkeypatch.setattr(launch, "_claim", claim)
    with pytest.raises(KeyboardInterrupt):
        launch.launch(open_repo(str(repo)), ["T1"], agent="demo")
    t = _task(repo)
    assert t.state == "assigned" and t.claim is None and t.launch is None
    monkeypatch.undo()
    for pid in started:
        assert _gone(pid)


def test_request_changes_signals_the_worker_and_relaunch_sends_the_agent_back(
        make_repo, coord, tmp_path, monkeypatch) -> None:
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {
        "edits": [{"path": "app.txt", "find": "two", "replace": "TWO"}],
        "on_changes": {"edits": [{"path": "app.txt", "find": "one", "replace": "ONE"}],
                       "summary": "one too"}}})
    first = coord(repo, "launch", "T1", "--agent", "demo").doc["launched"][0]
    wait_until(lambda: _reported(repo), 60, "the first report")
    r = coord(repo, "request-changes", "T1", "--note", "shout line 1 too", "--relaunch")
    assert r.code == 0, r.stderr
    sigs = [s for s in _state(repo).signals if s.type == "CHANGES_REQUESTED"]
    assert [(s.to, s.about, s.payload) for s in sigs] == [(first["session"], "T1", "shout line 1 too")]
    again = r.doc["relaunched"]["launched"][0]
    assert again["session"] != first["session"]
    prompt = Path(again["prompt_file"]).read_text()
    assert prompt.startswith("CHANGES REQUESTED for T1: shout line 1 too")
    wait_until(lambda: _reported(repo, revision=2), 60, "the second report")
    wait_until(lambda: _gone(again["pid"]), 60, "the second agent's exit")  # its done finished
    r = coord(repo, "accept", "T1")
    assert r.code == 0, r.stderr
    assert git(repo, "show", "HEAD:app.txt") == "ONE\nTWO\nthree\nfour\n"


def test_relaunch_by_setting_and_no_relaunch_without_it(make_repo, coord, tmp_path,
                                                        monkeypatch) -> None:
    repo = _repo(make_repo, coord, "[launch]\nrelaunch = true\n")
    _script(tmp_path, monkeypatch, {"T1": {
        "edits": [{"path": "app.txt", "find": "two", "replace": "TWO"}]}})
    pid = coord(repo, "launch", "T1", "--agent", "demo").doc["launched"][0]["pid"]
    wait_until(lambda: _reported(repo), 60, "the first report")
    r = coord(repo, "request-changes", "T1", "--note", "again", "--no-relaunch")
    assert "relaunched" not in r.doc and _task(repo).state == "changes_requested"
    wait_until(lambda: _gone(pid), 60, "the first agent's exit")
    assert coord(repo, "launch", "T1", "--agent", "demo").code == 0
    wait_until(lambda: _reported(repo, revision=2), 60, "the second report")
    r = coord(repo, "request-changes", "T1", "--note", "once more")
    assert r.doc["relaunched"]["launched"][0]["task"] == "T1"
    wait_until(lambda: _reported(repo, revision=3), 60, "the third report")


def test_a_decision_answered_for_a_blocked_task_starts_its_agent_again(
        make_repo, coord, tmp_path, monkeypatch) -> None:
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {
        "ask": "TWO or Two?", "end": "blocked", "reason": "waiting for the answer",
        "on_changes": {"edits": [{"path": "app.txt", "find": "two", "replace": "TWO"}]}}})
    coord(repo, "launch", "T1", "--agent", "demo")
    wait_until(lambda: _task(repo).last_status == "blocked", 60, "the blocked report")
    dec = coord(repo, "decisions").doc["decisions"][0]["id"]
    r = coord(repo, "decide", dec, "--answer", "TWO", "--relaunch")
    assert r.code == 0 and r.doc["reopened"] == "T1"
    prompt = Path(r.doc["relaunched"]["launched"][0]["prompt_file"]).read_text()
    assert prompt.startswith(f"DECISION ANSWERED for T1: {dec}: TWO")
    wait_until(lambda: _task(repo).last_status == "done", 60, "the report after the answer")


def test_attach_without_tmux_names_the_log(make_repo, coord, tmp_path, monkeypatch) -> None:
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {"end": "hang"}})
    got = coord(repo, "launch", "T1", "--agent", "demo").doc["launched"][0]
    r = coord(repo, "attach", "T1", json_out=False)
    assert r.code == 3 and got["log"] in r.stderr
    coord(repo, "stop", "T1")


def test_agent_settings_are_checked_with_their_line(make_repo, coord) -> None:
    repo = make_repo({"coord.toml": '[verify]\ncommands = []\n[agents.x]\ncommand = []\n'})
    r = coord(repo, "launch", "T1", "--agent", "x", json_out=False)
    assert r.code == 2 and "[agents.x.command]" in r.stderr and "(line 4)" in r.stderr


def test_a_launch_record_round_trips_and_a_task_without_one_writes_none() -> None:
    from hunkwise.shared.state.models import parse_grant
    from hunkwise.shared.state.store import strict_json_loads

    t = Task(id="T1", title="t", expect="e", grants=[parse_grant("a.txt")], created_at=1.0,
             updated_at=1.0)
    assert "launch" not in t.model_dump()
    t.launch = Launch(agent="demo", session="s", pid=12, proc_start=34, started=5.0,
                      log="/l", prompt_file="/p", tmux="hunkwise:@1", command=["x"], seq=2)
    back = Task.model_validate(strict_json_loads(t.model_dump_json()))
    assert back == t and back.launch is not None and back.launch.seq == 2


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux binary")
def test_in_tmux_the_agent_runs_in_a_window_that_attach_opens(
        make_repo, coord, tmp_path, monkeypatch) -> None:
    socket = f"hw-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("HUNKWISE_TMUX_SOCKET", socket)
    monkeypatch.delenv("HUNKWISE_NO_TMUX")
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {
        "edits": [{"path": "app.txt", "find": "two", "replace": "TWO"}], "end": "hang"}})
    try:
        got = coord(repo, "launch", "T1", "--agent", "demo").doc["launched"][0]
        assert got["tmux"] and got["tmux"].startswith("hunkwise:")
        wait_until(lambda: "hanging" in Path(got["log"]).read_text(), 60, "the window's output")
        windows = subprocess.run(["tmux", "-L", socket, "list-windows", "-a", "-F",
                                  "#{window_name} #{pane_pid}"], capture_output=True, text=True)
        assert f"T1 {got['pid']}" in windows.stdout
        r = coord(repo, "attach", "T1")
        assert r.doc["command"] == ["tmux", "-L", socket, "attach-session", "-t", "hunkwise"]
        assert coord(repo, "stop", "T1").doc["released"] is True
        assert _gone(got["pid"])
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
        tmp = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / socket
        tmp.unlink(missing_ok=True)


def test_the_launch_command_contract_as_a_process(make_repo, coord, tmp_path, monkeypatch) -> None:
    """Through the real `coord` executable: one JSON document, and the agent outlives it."""
    repo = _repo(make_repo, coord)
    _script(tmp_path, monkeypatch, {"T1": {"end": "hang"}})
    r = coord(repo, "launch", "T1", "--agent", "demo", process=True)
    assert r.code == 0, r.stderr
    pid = r.doc["launched"][0]["pid"]
    assert not _gone(pid)
    assert os.getpgid(pid) == pid  # its own process group
    assert coord(repo, "stop", "T1", process=True).code == 0
    wait_until(lambda: _gone(pid), 30, "the stop")


@pytest.mark.slow
def test_the_demo_runs_the_whole_loop_with_launched_agents(tmp_path) -> None:
    """`make demo`: launched stand-ins, an exited agent flagged, a relaunch, exact commits,
    the freeze/verify proof; its temporary repository removed at the end."""
    import sys

    from testing.env import ROOT

    env = {k: v for k, v in os.environ.items() if k != "HUNKWISE_NO_TMUX"}
    env["TMPDIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, str(ROOT / "demo" / "demo.py")], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = r.stdout
    assert "agent exited without a report" in out and "the guard refused" in out
    assert "What this run proved" in out and "verify ok" in out
    assert list(tmp_path.glob("hunkwise-demo-*")) == []
