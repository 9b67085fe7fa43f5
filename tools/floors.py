"""Print the requirements of the lowest versions lionmsg declares it works with, one per line, for
`make test-floors`: each dependency of the package and of its `cli` and `fuzz` extras pinned at its
lower bound (`pydantic>=2.10.1,<3` -> `pydantic==2.10.1`), markers kept, and the dev pins of the tools
that run the suite itself.

    python tools/floors.py [PYPROJECT]
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("cli", "fuzz")
# What runs the suite (not what lionmsg runs on): pinned as `make install` pins them.
SUITE_TOOLS = ("pytest", "pytest-xdist", "jinja2", "pyyaml")
_LOWER_BOUND = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)\s*(?P<bounds>[^;]*?)\s*(?P<marker>;.*)?$")


def floor(requirement: str) -> str:
    """`requirement` pinned at its `>=` bound; a requirement without one is an error (nothing to test)."""
    parts = _LOWER_BOUND.match(requirement.strip())
    lower = [b.strip()[2:].strip() for b in parts["bounds"].split(",") if b.strip().startswith(">=")] if parts else []
    if parts is None or len(lower) != 1:
        raise SystemExit(f"{requirement!r} has no single lower bound (>=) to test")
    return f"{parts['name']}=={lower[0]}{parts['marker'] or ''}"


def requirements(pyproject: Path) -> list[str]:
    try:  # by name: mypy checks the tools as Python 3.10, which has no tomllib
        tomllib: Any = importlib.import_module("tomllib")
    except ModuleNotFoundError:  # make runs the tools with the default interpreter (3.11 here)
        raise SystemExit("tools/floors.py needs Python 3.11+ (tomllib) to read pyproject.toml") from None

    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    floors = [floor(r) for r in [*project["dependencies"], *(r for extra in EXTRAS for r in extras[extra])]]
    tools = [r for r in extras["dev"] if re.split(r"[=<>; ]", r, maxsplit=1)[0] in SUITE_TOOLS]
    return [*floors, *tools]


if __name__ == "__main__":
    print("\n".join(requirements(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "pyproject.toml")))
