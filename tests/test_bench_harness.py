"""The benchmark harness (bench/harness.py, bench/spec.py): the repetitions a worker keeps, what each probes."""

from __future__ import annotations

import importlib
from typing import Any
from uuid import UUID

import pytest

from bench import spec
from bench.harness import Rep, Timings, WorkloadError, repeat
from bench.systems.floor_model import FloorExchange, Mail
from bench.systems.lion_api import exchange_workload


def _counting_rep() -> tuple[list[int], Rep]:
    calls: list[int] = []

    def rep() -> Timings:
        calls.append(len(calls))
        return {"op": float(len(calls))}

    return calls, rep


def test_a_fixed_count_runs_that_many_after_discarding_a_short_first_one() -> None:
    calls, rep = _counting_rep()
    samples, walls, warmed = repeat(rep, reps=3, budget_s=60.0)
    assert warmed is True
    assert len(calls) == 4
    assert samples == {"op": [2.0, 3.0, 4.0]}  # the first call (the warm-up) is not among them
    assert len(walls) == 3


def test_short_repetitions_go_on_until_the_minimum_time_or_the_cap() -> None:
    _, rep = _counting_rep()
    # Each repetition takes microseconds: 60 s are never reached, so the cap decides.
    samples, walls, _ = repeat(rep, reps=3, budget_s=60.0, min_time_s=60.0, max_reps=9)
    assert len(walls) == 9
    assert samples["op"] == [float(k) for k in range(2, 11)]


def test_without_a_cap_the_minimum_time_adds_nothing() -> None:
    _, rep = _counting_rep()
    _, walls, _ = repeat(rep, reps=3, budget_s=60.0, min_time_s=60.0)
    assert len(walls) == 3


def test_a_cap_below_the_count_does_not_cut_the_count() -> None:
    _, rep = _counting_rep()
    _, walls, _ = repeat(rep, reps=4, budget_s=60.0, min_time_s=60.0, max_reps=2)
    assert len(walls) == 4


def test_the_budget_stops_a_worker_after_its_first_kept_repetition() -> None:
    _, rep = _counting_rep()
    _, walls, _ = repeat(rep, reps=5, budget_s=0.0, min_time_s=60.0, max_reps=50)
    assert len(walls) == 1


def test_each_repetition_probes_fresh_positions_the_same_for_every_system() -> None:
    # Probing the previous repetition's positions again would find them in the CPU caches.
    first, second = spec.fresh_indices(100_000, 2_000, "lookup"), spec.fresh_indices(100_000, 2_000, "lookup")
    draws = [next(first) for _ in range(3)]
    assert draws == [next(second) for _ in range(3)]  # seeded: every system's worker gets the same draws
    assert all(len(draw) == 2_000 and all(0 <= i < 100_000 for i in draw) for draw in draws)
    assert len({tuple(draw) for draw in draws}) == 3
    assert len(set(draws[0]) & set(draws[1])) < 100  # ~40 shared of 2,000 by chance


@pytest.mark.parametrize("system", ["lionmsg", "floor"])
@pytest.mark.parametrize("kind", ["direct", "broadcast"])
def test_an_exchange_repetition_stopped_after_the_sends_times_them_alone_and_checks_the_outboxes(
    system: str, kind: str
) -> None:
    workloads = importlib.import_module(f"bench.systems.{system}_side").WORKLOADS
    whole = workloads[f"exchange_{kind}"](120)()
    assert list(whole) == [f"exchange_{kind}_send", f"exchange_{kind}_collect"]
    sends_only = workloads[f"exchange_{kind}"](120, last_metric=f"exchange_{kind}_send")()
    assert list(sends_only) == [f"exchange_{kind}_send"]
    with pytest.raises(ValueError, match=f"the {kind} Exchange workload has no metric 'replace'"):
        workloads[f"exchange_{kind}"](120, last_metric="replace")


class _LosingExchange(FloorExchange):
    """Drops every tenth message it is asked to send."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def send(self, sender: UUID, recipient: UUID | None, content: Any) -> Mail:
        self.sent += 1
        message = Mail(content=content, sender=sender, recipient=recipient)
        if self.sent % 10:
            self.mailboxes[sender].outbox.append(message)
        return message


class _ShufflingExchange(FloorExchange):
    """Queues every message, but each sender's newest first."""

    def send(self, sender: UUID, recipient: UUID | None, content: Any) -> Mail:
        message = Mail(content=content, sender=sender, recipient=recipient)
        self.mailboxes[sender].outbox.insert(0, message)
        return message


class _MisaddressingExchange(FloorExchange):
    """Queues every message in order, but addressed back to its own sender."""

    def send(self, sender: UUID, recipient: UUID | None, content: Any) -> Mail:
        message = Mail(content=content, sender=sender, recipient=sender)
        self.mailboxes[sender].outbox.append(message)
        return message


def test_a_sends_only_repetition_refuses_lost_misordered_or_misaddressed_mail() -> None:
    def outbox(exchange: FloorExchange, owner: UUID) -> list[Mail]:
        return exchange.mailboxes[owner].outbox

    lost = exchange_workload(_LosingExchange, 100, True, outbox, "exchange_broadcast_send")
    with pytest.raises(WorkloadError, match="90 messages queued after 100 broadcast sends"):
        lost()
    misordered = exchange_workload(_ShufflingExchange, 100, True, outbox, "exchange_broadcast_send")
    with pytest.raises(WorkloadError, match=r"broadcast mail of .* misqueued"):
        misordered()
    # Review ct 3: the recipients were not compared, so a send that misaddressed everything passed.
    for broadcast, kind in ((True, "broadcast"), (False, "direct")):
        misaddressed = exchange_workload(_MisaddressingExchange, 200, broadcast, outbox, f"exchange_{kind}_send")
        with pytest.raises(WorkloadError, match=rf"{kind} mail of .* misqueued"):
            misaddressed()
