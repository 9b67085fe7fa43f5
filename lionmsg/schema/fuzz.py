"""Generate a stream of schema-valid records outside a test run (`lionmsg fuzz`).

Hypothesis drives generation through a test function; each run stops after `max_examples` distinct
examples, so runs are chained (each with the next seed) until enough records came out.

Each record of a stream has its own id. Hypothesis favours simple values (a run of 200 records drew
the all-zero UUID 15 times, and 92 distinct ids in all), while the stream is meant to go into
pipelines, histories, stores and Exchanges, where a record whose id was seen before replaces that
message instead of adding one; so an id seen before is replaced by a fresh one.

The seed, the count and the kind decide the records: hypothesis adapts what it draws to the number of
examples a run asks for, so `--count 10` is not the first ten records of `--count 40` with the same seed,
and every run starts with the simplest record the schema allows, whatever the seed (ask for many records
in one call rather than one record from each of many seeds). Nothing else does. Hypothesis (from 6.131.1)
also draws constants it finds in the source of the loaded modules that are not installed packages (a
checkout's lionmsg, the caller's own code and tests), so the records of one seed would differ between a
checkout and an installed wheel, and with whatever the process imported first; it would also cache those
constants under `.hypothesis/` in the current directory. It has no switch for that
(HypothesisWorks/hypothesis#4627), so generation here runs with its local constants set aside
(`_seed_alone`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.strategies import SearchStrategy

from lionmsg.schema.strategies import records

__all__ = ["generate_records"]


def generate_records(count: int, kind: str | None = None, start_seed: int | None = None) -> Iterator[dict[str, Any]]:
    """`count` records of one kind (all kinds when None), each with its own id (as a UUID: ids differing
    only in case are the same); the same seed, count and kind give the same records (module docstring)."""
    strategy = records(kind)
    rng = random.Random(start_seed)
    fresh_ids = random.Random(rng.getrandbits(64))
    seen: set[UUID] = set()
    made = 0
    while made < count:
        batch = _batch(strategy, min(count - made, 1000), rng.getrandbits(64))
        if not batch:  # cannot happen for our schemas; guard against an endless loop anyway
            raise RuntimeError(f"hypothesis generated no {kind or 'record'} examples")
        for record in batch[: count - made]:
            made += 1
            yield _with_unseen_id(record, seen, fresh_ids)


def _with_unseen_id(record: dict[str, Any], seen: set[UUID], fresh_ids: random.Random) -> dict[str, Any]:
    ident = UUID(record["id"])
    while ident in seen:
        ident = UUID(int=fresh_ids.getrandbits(128), version=4)
        record = {**record, "id": str(ident)}
    seen.add(ident)
    return record


def _batch(strategy: SearchStrategy[dict[str, Any]], size: int, seed_value: int) -> list[dict[str, Any]]:
    batch: list[dict[str, Any]] = []

    @seed(seed_value)
    @settings(
        max_examples=size,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(record=strategy)
    def collect(record: dict[str, Any]) -> None:
        batch.append(record)

    with _seed_alone():
        collect()
    return batch


_LOCAL_CONSTANTS_LOCK = threading.RLock()


@contextmanager
def _seed_alone() -> Iterator[None]:
    """Hypothesis without the constants of local modules (see the module docstring) while generating.
    Hypothesis offers no public way to do this: its provider module's look-up of those constants is
    replaced, and the cache of constants it already filtered is emptied before and after, so that the
    caller's own hypothesis tests get theirs back. Every version the `fuzz` extra allows (6.135.13 to
    6.170.9) has both names used here (6.131.1 has no `Constants`; 6.118 and older no `providers`)."""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    original = providers._get_local_constants

    nothing = Constants()
    with _LOCAL_CONSTANTS_LOCK:  # one thread's restore must not undo another's generation
        providers._get_local_constants = lambda *args: nothing
        _forget_filtered_constants(providers)
        try:
            yield
        finally:
            providers._get_local_constants = original
            _forget_filtered_constants(providers)


def _forget_filtered_constants(providers: Any) -> None:
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if cache is not None:
        cache.cache.clear()
