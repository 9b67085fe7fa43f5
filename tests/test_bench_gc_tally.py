"""bench.profiling's garbage-collector tally: passes and time per generation, read through gc.callbacks."""

from __future__ import annotations

import gc

from bench.profiling import GcTally
from tests.conftest import automatic_collection_off


def test_the_tally_counts_each_pass_by_generation_and_only_while_entered() -> None:
    # Automatic passes off: another thread's allocation (pytest-xdist's) could start one while entered.
    with automatic_collection_off():
        with GcTally() as tally:
            assert tally in gc.callbacks
            gc.collect(0)
            gc.collect(2)
            gc.collect(2)
        assert tally not in gc.callbacks
        gc.collect(1)  # after leaving: not counted
    assert tally.passes == [1, 0, 2]
    assert all(seconds >= 0.0 for seconds in tally.seconds)
    assert tally.seconds[2] > 0.0


def test_the_lines_give_passes_milliseconds_share_and_cost_per_operation() -> None:
    tally = GcTally()
    tally.passes, tally.seconds = [3, 1, 2], [0.002, 0.001, 0.5]
    assert tally.lines(total_s=1.0, ops=100_000) == [
        "generation  passes        ms   share  µs/op",
        "         0       3       2.0    0.2%   0.02",
        "         1       1       1.0    0.1%   0.01",
        "         2       2     500.0   50.0%   5.00",
    ]
