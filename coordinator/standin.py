"""A scripted stand-in for a coding agent: `coord launch --agent demo` runs it.

It behaves as an agent launched by `coord launch` does, without a model: it reads its first
prompt (the file given as its argument), makes the edits its script gives for its task,
each one first put to the agent guard through the hook protocol (`coord guard` with the
PreToolUse JSON an Edit call sends, exit 2 blocks it), and ends as the script says: `worker
done`, `worker blocked`, exiting without a report, or hanging until it is stopped.

The script is a JSON file named by `$HUNKWISE_STANDIN_SCRIPT`: per task id,
`{"edits": [EDIT...], "end": "done"|"blocked"|"exit"|"hang", "summary": S, "reason": R,
"ask": QUESTION, "on_changes": {...}}` (or a list of them: one per launch of the task,
`$HUNKWISE_LAUNCH_SEQ`), where an EDIT is `{"path": P, "find": OLD, "replace": NEW}`,
`{"path": P, "append": TEXT}` or `{"path": P, "write": TEXT}`, and `on_changes` is the
script to follow instead when the prompt opens with changes requested.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def say(text: str) -> None:
    print(f"[standin {os.environ.get('COORD_TASK', '?')}] {text}", flush=True)


def _run(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def guarded(repo: Path, path: str) -> str | None:
    """The guard's refusal of an Edit of `path`, or None when it lets it through."""
    call = {"hook_event_name": "PreToolUse", "tool_name": "Edit", "cwd": str(repo),
            "session_id": os.environ.get("COORD_SESSION", ""),
            "tool_input": {"file_path": str(repo / path)}}
    got = _run(["coord", "guard"], json.dumps(call))
    if got.returncode == 2:
        return (got.stderr.strip() or "blocked").split("\n")[0]
    return None


def apply(repo: Path, edit: dict[str, Any]) -> str:
    path = repo / edit["path"]
    if "write" in edit:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(edit["write"])
        return f"wrote {edit['path']}"
    text = path.read_text() if path.exists() else ""
    if "append" in edit:
        path.write_text(text + edit["append"])
        return f"appended {len(edit['append'].splitlines())} line(s) to {edit['path']}"
    old, new = edit["find"], edit["replace"]
    if old not in text:
        return f"{edit['path']}: {old!r} not found, nothing changed"
    path.write_text(text.replace(old, new, 1))
    return f"edited {edit['path']}: {old.strip()!r} -> {new.strip()!r}"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m hunkwise.coordinator.standin PROMPT_FILE", file=sys.stderr)
        return 2
    prompt = Path(argv[0]).read_text()
    task = os.environ.get("COORD_TASK", "")
    repo = Path.cwd()
    say(f"read my prompt ({len(prompt.splitlines())} lines): {prompt.splitlines()[0]}")
    script_path = os.environ.get("HUNKWISE_STANDIN_SCRIPT")
    scripts = json.loads(Path(script_path).read_text()) if script_path else {}
    script: Any = scripts.get(task, {})
    if isinstance(script, list):  # one script per launch of the task, the last repeated
        seq = int(os.environ.get("HUNKWISE_LAUNCH_SEQ", "1") or 1)
        script = script[min(seq, len(script)) - 1] if script else {}
    if prompt.startswith(("CHANGES REQUESTED", "DECISION ANSWERED")) and "on_changes" in script:
        say(f"sent back ({prompt.splitlines()[0]}): following the note")
        script = script["on_changes"]
    for edit in script.get("edits", []):
        refused = guarded(repo, edit["path"])
        if refused:
            say(f"the guard refused an edit of {edit['path']}: {refused}")
            continue
        say(apply(repo, edit))
    end = script.get("end", "done")
    if end == "hang":
        say("hanging (as scripted) until stopped")
        while True:
            signal.pause()
    if end == "exit":
        say("exiting without a report (as scripted)")
        return 0
    if "ask" in script:
        asked = _run(["worker", "ask", task, "--question", script["ask"], "--kind", "scope"])
        say(f"asked the supervisor: {script['ask']} ({asked.stdout.strip() or asked.stderr.strip()})")
    if end == "blocked":
        got = _run(["worker", "blocked", task, "--reason", script.get("reason", "blocked")])
    else:
        got = _run(["worker", "done", task, "--summary", script.get("summary", "done")])
    for line in (got.stdout + got.stderr).strip().split("\n"):
        if line:
            say(f"worker {end}: {line}")
    return got.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
