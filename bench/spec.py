"""What the benchmark measures: the workloads, their metrics and targets, and the seeded inputs.

Standard library only: every system's worker imports this module, including the LionAGI one, which runs
under another interpreter without lionmsg.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

SEED = 6006  # ADR-0006

SIZES = (1_000, 10_000, 100_000)
SMOKE_SIZE = 50

# A worker's first repetition shorter than this is discarded as a warm-up (first-call costs, cold memory:
# the heap's pages touched for the first time). Long enough for every lionmsg cell at N=100,000, so no
# lionmsg cell is timed cold and no lionmsg growth figure sets a cold repetition against warm ones (at
# 5 s, the cells between 5 and 30 s were cold and the shorter ones warm); a repetition still longer is
# measured cold, as repeating it would cost minutes: LionAGI's Exchange at 100k (and its 10k broadcast,
# 39-41 s a repetition in run 29) on an idle host, and on
# run 24's slower one most of LionAGI's 100k cells and the floor's 100k broadcast, which favours lionmsg
# in those ratios.
WARMUP_BELOW_S = 30.0

REPLACE_OPS = 1_000  # add-or-replace calls per repetition, whatever N is
LOOKUP_PROBES = 2_000  # membership / pile[id] / index() look-ups per repetition, whatever N is
DIRECT_OWNERS = 100
BROADCAST_OWNERS = 10

TOPICS = ("physics", "biology", "history", "music", "economics", "geology", "poetry")
GUIDANCE = "Answer in one sentence."

TIMES = "\N{MULTIPLICATION SIGN}"  # spelled by name: ruff flags the literal sign as ambiguous

SYSTEMS = ("lionmsg", "lionagi", "floor")
SYSTEM_LABELS = {"lionmsg": "lionmsg", "lionagi": "LionAGI 0.36.0", "floor": "pydantic floor"}


# -- targets and metrics ---------------------------------------------------------------------------

TargetKind = Literal["speedup", "floor_ratio", "growth", "memory_vs_lionagi", "memory_vs_floor"]


@dataclass(frozen=True)
class Target:
    """One quality bar of design.md §7 as it applies to one metric.

    speedup: lionmsg ops/s ÷ LionAGI ops/s ≥ bound; floor_ratio: lionmsg ops/s ÷ floor ops/s ≥ bound;
    growth: lionmsg cost per op at the largest N ÷ at the smallest ≤ bound; memory_*: lionmsg bytes ÷
    the other system's bytes ≤ bound.
    """

    kind: TargetKind
    bound: float

    @property
    def label(self) -> str:
        return {
            "speedup": f"≥{self.bound:g}{TIMES} LionAGI",
            "floor_ratio": f"within {1 / self.bound:g}{TIMES} of floor",
            "growth": f"growth ≤{self.bound:g}{TIMES}",
            "memory_vs_lionagi": f"≤{self.bound:g}{TIMES} LionAGI",
            "memory_vs_floor": f"≤{self.bound:g}{TIMES} floor",
        }[self.kind]


TEN_X = Target("speedup", 10)
HUNDRED_X = Target("speedup", 100)
NEAR_FLOOR = Target("floor_ratio", 0.5)
FLAT = Target("growth", 2)  # per-op cost at 100k within 2x of 1k: O(1) per op, or linear in total


@dataclass(frozen=True)
class Metric:
    """One timed (or measured) quantity of a workload: one row group of the table."""

    name: str
    label: str
    ops: Callable[[int], int]  # operations per repetition at N (what "per op" divides by)
    targets: tuple[Target, ...]
    unit: Literal["s", "bytes"] = "s"
    # Whether the floor's growth says anything about lionmsg's: not where the floor uses another
    # algorithm (its `progression.index` is a list scan, O(N) by construction).
    floor_growth_comparable: bool = True


@dataclass(frozen=True)
class Workload:
    """A named workload: one fresh process per (workload, system, N); it reports its metrics."""

    name: str
    metrics: tuple[Metric, ...]
    largest_only: bool = False  # measured at the largest N only (memory)
    reps: int | None = None  # fixed repetitions (memory is deterministic: one), else the driver's setting
    warmup: bool = True  # False: a warm-up would hand the measured build memory already freed once (RSS)
    # Its metrics are timed one after another within a repetition, and a repetition may stop after any
    # of them (`--last-metric`): a system whose whole repetition is too slow at a size still has its
    # first metrics timed there (LionAGI's broadcast send at 100k, ~12 s, before a ~600 s collection).
    staged: bool = False


def _per_n(n: int) -> int:
    return n


def _replace_ops(n: int) -> int:
    return REPLACE_OPS


def _probes(n: int) -> int:
    return LOOKUP_PROBES


def _one(n: int) -> int:
    return 1


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "add_instruction",
        (Metric("add_instruction", "build + add_message (Instruction)", _per_n, (TEN_X, NEAR_FLOOR)),),
    ),
    Workload(
        "add_assistant_response",
        (Metric("add_assistant_response", "build + add_message (AssistantResponse)", _per_n, (TEN_X, NEAR_FLOOR)),),
    ),
    Workload("replace", (Metric("replace", "add-or-replace at a random index", _replace_ops, (TEN_X, FLAT)),)),
    Workload("contains", (Metric("contains", "`id in pile`", _probes, (TEN_X, FLAT)),)),
    Workload("getitem", (Metric("getitem", "`pile[id]`", _probes, (TEN_X, FLAT)),)),
    Workload(
        "index",
        (Metric("index", "`progression.index(id)`", _probes, (TEN_X, FLAT), floor_growth_comparable=False),),
    ),
    Workload(
        "to_chat_msgs", (Metric("to_chat_msgs", "`to_chat_msgs()` uncached (per message)", _per_n, (TEN_X, FLAT)),)
    ),
    Workload(
        "dict_roundtrip",
        (Metric("dict_roundtrip", "to_dict + from_dict (Instruction)", _per_n, (TEN_X, NEAR_FLOOR)),),
    ),
    Workload("json_roundtrip", (Metric("json_roundtrip", "to_json + from_json (Instruction)", _per_n, (TEN_X,)),)),
    Workload(
        "a_add_concurrent",
        (Metric("a_add_concurrent", "concurrent `a_add_message`, async callback", _per_n, (TEN_X,)),),
    ),
    Workload(
        "exchange_direct",
        (
            Metric("exchange_direct_send", "Exchange send, direct (100 owners)", _per_n, (TEN_X, FLAT)),
            Metric("exchange_direct_collect", "Exchange collect_all, direct (100 owners)", _per_n, (HUNDRED_X, FLAT)),
        ),
        staged=True,
    ),
    Workload(
        "exchange_broadcast",
        (
            Metric("exchange_broadcast_send", "Exchange send, broadcast (10 owners)", _per_n, (TEN_X, FLAT)),
            Metric(
                "exchange_broadcast_collect",
                "Exchange collect_all, broadcast (10 owners, 9 copies each)",
                _per_n,
                (HUNDRED_X, FLAT),
            ),
        ),
        staged=True,
    ),
    Workload(
        "memory",
        (
            Metric(
                "memory_traced",
                "bytes per stored Instruction (tracemalloc)",
                _one,
                (Target("memory_vs_lionagi", 0.5), Target("memory_vs_floor", 1.3)),
                unit="bytes",
            ),
            Metric("memory_rss", "bytes per stored Instruction (RSS delta)", _one, (), unit="bytes"),
        ),
        largest_only=True,
        reps=1,
        warmup=False,
    ),
)

WORKLOADS_BY_NAME = {workload.name: workload for workload in WORKLOADS}
METRICS_BY_NAME = {metric.name: metric for workload in WORKLOADS for metric in workload.metrics}


# -- seeded inputs (identical for every system) ---------------------------------------------------


def instruction_fields(i: int) -> dict[str, Any]:
    """The `add_message` keyword arguments of the i-th instruction (besides sender)."""
    return {
        "instruction": f"Summarise document {i}.",
        "guidance": GUIDANCE,
        "context": [{"doc": i, "topic": TOPICS[i % len(TOPICS)]}],
    }


def instruction_text(i: int) -> str:
    """How the i-th instruction renders (LionAGI 0.36.0's text; lionmsg and the floor must agree)."""
    return (
        f"Guidance: {GUIDANCE}\nInstruction: Summarise document {i}.\n"
        f"Context:\n- doc: {i}\n  topic: {TOPICS[i % len(TOPICS)]}"
    )


def assistant_text(i: int) -> str:
    return f"Document {i} is about {TOPICS[i % len(TOPICS)]}."


def is_response_turn(i: int) -> bool:
    """In a conversation history, even positions are instructions and odd ones assistant responses."""
    return i % 2 == 1


def revision(k: int) -> str:
    """The new guidance the k-th add-or-replace writes."""
    return f"Revised guidance {k}."


def _rng(salt: str) -> random.Random:
    return random.Random(f"{SEED}:{salt}")


def sample_indices(n: int, k: int, salt: str) -> list[int]:
    """k positions in range(n), drawn with replacement from a seeded generator."""
    rng = _rng(f"{salt}:{n}")
    return [rng.randrange(n) for _ in range(k)]


def fresh_indices(n: int, k: int, salt: str) -> Iterator[list[int]]:
    """`sample_indices` for each repetition in turn, a new seeded draw every time (the same sequence for
    every system). Look-ups and replacements at the positions the previous repetition used would find
    their messages in the CPU caches, which at N=100,000 is not what a look-up at a random id meets."""
    for repetition in itertools.count():
        yield sample_indices(n, k, f"{salt}:{repetition}")


def owner_ids(count: int) -> list[UUID]:
    rng = _rng(f"owners:{count}")
    return [UUID(int=rng.getrandbits(128), version=4) for _ in range(count)]


def exchange_content(i: int) -> dict[str, Any]:
    return {"seq": i, "note": f"status update {i}"}


def direct_plan(n: int) -> list[tuple[UUID, UUID, dict[str, Any]]]:
    """n direct sends among DIRECT_OWNERS owners: senders in turn, each to a random other owner."""
    owners = owner_ids(DIRECT_OWNERS)
    rng = _rng(f"direct:{n}")
    plan = []
    for i in range(n):
        sender = i % DIRECT_OWNERS
        recipient = (sender + 1 + rng.randrange(DIRECT_OWNERS - 1)) % DIRECT_OWNERS
        plan.append((owners[sender], owners[recipient], exchange_content(i)))
    return plan


def broadcast_plan(n: int) -> list[tuple[UUID, dict[str, Any]]]:
    """n broadcasts from BROADCAST_OWNERS owners in turn."""
    owners = owner_ids(BROADCAST_OWNERS)
    return [(owners[i % BROADCAST_OWNERS], exchange_content(i)) for i in range(n)]


def spot_checks(n: int) -> list[int]:
    """A few positions every workload verifies (first, last and some in between)."""
    return sorted({0, n - 1, *sample_indices(n, 16, "spot")})
