"""Shared test configuration and helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
# The generator and schema checker are scripts in tools/, tested like the package.
sys.path.insert(0, str(ROOT / "tools"))

# Shared machines are noisy: no per-example deadline. CI runs more examples than a local run.
settings.register_profile("dev", deadline=None, max_examples=100)
settings.register_profile("ci", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def fields_of(message: Any) -> dict[str, Any]:
    """Every model field of a record with its value, plus the concrete class: what "equal field by
    field" compares (record equality itself is by id only, as in LionAGI)."""
    values = {name: getattr(message, name) for name in type(message).model_fields}
    values["__class__"] = type(message)
    return values
