"""Shared test configuration and helpers."""

from __future__ import annotations

import copy
import gc
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parent.parent
# The generator and schema checker are scripts in tools/, tested like the package.
sys.path.insert(0, str(ROOT / "tools"))

# Shared machines are noisy: no per-example deadline. CI runs more examples than a local run, and
# prints the blob that reproduces a failure (its data is drawn afresh each run). The health checks left
# off judge how Hypothesis draws, not what lionmsg does: a slow spell of the host, or a run of drawn
# values too large for the buffer (the nested-record strategies reach 9 of the 20 allowed), must not
# fail a suite whose every drawn example passed.
_GENERATION_CHECKS_OFF = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("dev", deadline=None, max_examples=100, suppress_health_check=_GENERATION_CHECKS_OFF)
settings.register_profile(
    "ci", deadline=None, max_examples=200, suppress_health_check=_GENERATION_CHECKS_OFF, print_blob=True
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@contextmanager
def automatic_collection_off() -> Iterator[None]:
    """No cyclic collection starts by itself inside (an explicit gc.collect() still runs): for tests that
    count calls or passes, which one set off by any allocation, in any thread, would add to."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def value_id(value: Any) -> str:
    """A parametrize id that reads as the value and is the same in every process (pytest-xdist's workers
    must collect the same ids): its repr, but a bare `object()` or a model (whose repr holds a new id or
    an address) by its class name."""
    if type(value) is object or hasattr(type(value), "model_fields"):
        return type(value).__name__
    return repr(value)


def fields_of(message: Any) -> dict[str, Any]:
    """Every model field of a record with its value, plus the concrete class: what "equal field by
    field" compares (record equality itself is by id only, as in LionAGI)."""
    values = {name: getattr(message, name) for name in type(message).model_fields}
    values["__class__"] = type(message)
    return values


def assert_record_refused(load: Callable[[Any], Any], record: Any, match: str, loc: tuple[Any, ...]) -> None:
    """`load(record)` raises exactly a pydantic ValidationError matching `match`, its first error at
    `loc`, and leaves the record as it was (bad input changes nothing, the caller's dict included)."""
    before = copy.deepcopy(record)
    with pytest.raises(ValidationError, match=match) as raised:
        load(record)
    assert raised.type is ValidationError
    assert raised.value.errors()[0]["loc"] == loc
    assert record == before


@pytest.fixture
def default_digit_limit() -> Iterator[bool]:
    """Python's default int->str digit limit (4,300) for one test, whatever PYTHONINTMAXSTRDIGITS or
    another test set; False on an interpreter without the limit (before 3.10.7), where any integer spells
    itself. The limit before the test is put back."""
    if not hasattr(sys, "get_int_max_str_digits"):
        yield False
        return
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(4300)
    try:
        yield True
    finally:
        sys.set_int_max_str_digits(before)
