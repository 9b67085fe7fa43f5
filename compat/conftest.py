"""The LionAGI 0.36.0 compatibility group: `make test-compat` builds the reference environment and
points LIONMSG_LIONAGI_PYTHON at its interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))


class LionAGI:
    """Runs `compat/lionagi_side.py` under the LionAGI interpreter."""

    def __init__(self, python: str) -> None:
        self.python = python

    def run(self, command: str, payload: Any = None) -> Any:
        done = subprocess.run(
            [self.python, str(Path(__file__).parent / "lionagi_side.py"), command],
            input=None if payload is None else json.dumps(payload),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"LionAGI side failed:\n{done.stderr}")
        return json.loads(done.stdout)


@pytest.fixture(scope="session")
def lionagi() -> LionAGI:
    python = os.environ.get("LIONMSG_LIONAGI_PYTHON")
    if not python:
        raise pytest.UsageError("set LIONMSG_LIONAGI_PYTHON (run `make test-compat`)")
    return LionAGI(python)
