"""What the test suite shares, one meaning to a name; tests/conftest.py builds its fixtures
from these, and no test module imports another.

- env: the checkout's root, the interpreter's bin directory, the hermetic environment.
- repo: running git in a test repository, writing files, numbered lines, a repo builder.
- cli: running `coord` and `worker` (in this process or as a process) and reading results.
- wait: waiting for a line of output or a condition, never for a fixed time.
- state: editing the coordinator's state to set a scene (an aged claim).
- locks: watching what happens while the state lock is held.
- trace: listing the git processes a command starts.
- machines: two or more clones of one bare remote, told apart by HUNKWISE_MACHINE.
- project: a repository with `coord verify` commands, for freezes and verifies.

Not installed: the wheel holds `hunkwise.*` only. pytest puts the checkout's root on
sys.path (tests/ is a package), which is where this one is found.
"""
