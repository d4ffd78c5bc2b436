"""Entry point for `make bench`: runs every benchmark of this directory (today: core_loop).

    .venv/bin/python bench/run.py [core_loop options...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
sys.path.insert(0, str(Path(__file__).resolve().parent))

import core_loop  # noqa: E402

if __name__ == "__main__":
    sys.exit(core_loop.main(sys.argv[1:]))
