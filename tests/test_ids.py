"""lionmsg.runtime.ids: fresh UUIDs are version-4 RFC 4122 ids, never repeated (across threads and forks),
and parsed ones equal what `uuid.UUID` makes."""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lionmsg import Message
from lionmsg.runtime import ids
from lionmsg.runtime.wire import CANONICAL_UUID


def test_fast_uuids_are_version_4_rfc_4122_uuids() -> None:
    seen = {ids.new_uuid4() for _ in range(2000)}
    assert len(seen) == 2000
    for ident in list(seen)[:200]:
        assert type(ident) is uuid.UUID
        assert (ident.version, ident.variant) == (4, uuid.RFC_4122)
        assert uuid.UUID(str(ident)) == ident
        assert hash(uuid.UUID(str(ident))) == hash(ident)
    # Every bit but the six fixed version and variant bits varies: the masks keep the random ones.
    ones, zeros = 0, 0
    for ident in seen:
        ones |= ident.int
        zeros |= ~ident.int & (2**128 - 1)
    fixed = (0xF << 76) | (0x3 << 62)
    assert ones & zeros == (2**128 - 1) & ~fixed


def test_new_ids_when_another_thread_empties_the_pool_after_a_refill(monkeypatch: pytest.MonkeyPatch) -> None:
    refill = ids._refill
    calls = []

    def refill_then_lose_it_once() -> None:
        refill()
        calls.append(1)
        if len(calls) == 1:
            ids._POOL.clear()  # what another thread taking every number would leave

    monkeypatch.setattr(ids, "_refill", refill_then_lose_it_once)
    ids._POOL.clear()
    ident = ids.new_uuid4()
    assert (ident.version, ident.variant) == (4, uuid.RFC_4122)
    assert len(calls) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork (POSIX)")
# In a pytest-xdist worker the parent has execnet's threads, which 3.12+ warns of: the child takes no
# lock they may hold (it draws an id, writes to a pipe and leaves by os._exit).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_never_repeats_its_parents_ids() -> None:
    ids.new_uuid4()  # the parent now holds unused random numbers, which the child inherits
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # the child: write its next id and leave at once
        os.write(writer, ids.new_uuid4().bytes)
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        childs = uuid.UUID(bytes=pipe.read())
    os.waitpid(child, 0)
    parents = ids.new_uuid4()
    assert childs != parents
    assert childs.version == 4


def test_parsed_and_built_uuids_equal_the_standard_librarys() -> None:
    for _ in range(200):
        standard = uuid.uuid4()
        for text in (str(standard), str(standard).upper()):
            for built in (ids.uuid_from_int(standard.int), ids.parse_canonical_uuid(text)):
                assert type(built) is uuid.UUID
                assert built == standard
                assert hash(built) == hash(standard)
                assert str(built) == str(standard)
                assert built.is_safe is standard.is_safe
        assert ids.uuid_text(standard) == str(standard)


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_uuid_text_spells_every_value_as_the_standard_library(value: int) -> None:
    # Includes the edges: leading zero bytes (to_bytes pads them) and all-ones groups.
    standard = uuid.UUID(int=value)
    assert ids.uuid_text(standard) == str(standard)


@pytest.mark.parametrize("value", [0, 1, 0xFFFF << 48, 2**127, 2**128 - 1])
def test_uuid_text_at_the_edges_of_the_range(value: int) -> None:
    assert ids.uuid_text(uuid.UUID(int=value)) == str(uuid.UUID(int=value))


class _Spelled(uuid.UUID):
    def __str__(self) -> str:
        return "spelled"


def test_uuid_text_leaves_a_subclass_its_own_spelling() -> None:
    assert ids.uuid_text(_Spelled(int=5)) == "spelled"


CANONICAL = "123e4567-e89b-42d3-a456-426614174000"


@pytest.mark.parametrize(
    "text",
    [
        CANONICAL.replace("-", ""),  # bare hex: uuid.UUID takes it, the schema does not
        "{" + CANONICAL[1:-1] + "}",
        CANONICAL[:35] + "g",  # a letter beyond f
        "0x" + CANONICAL[2:],  # int(..., 16) takes a 0x prefix
        CANONICAL[:35] + "\u0663",  # a non-ASCII digit, which int() would read
        CANONICAL[:9] + "_" + CANONICAL[10:],  # int() skips underscores between digits
        CANONICAL[:9] + "+" + CANONICAL[10:],
        CANONICAL[:9] + " " + CANONICAL[10:],
        CANONICAL[:9] + "-" + CANONICAL[10:],  # a fifth hyphen
        CANONICAL[:8] + "0" + CANONICAL[9:],  # a hyphen missing
        CANONICAL[:8] + CANONICAL[9:13] + "-" + CANONICAL[13:],  # hyphens in the wrong places
        CANONICAL + "\n",
        "",
    ],
)
def test_only_the_schemas_uuid_text_parses(text: str) -> None:
    assert CANONICAL_UUID.fullmatch(text) is None
    assert ids.parse_canonical_uuid(text) is None


def test_non_text_and_text_subclasses_do_not_parse() -> None:
    class Text(str):
        """A str subclass: records hold exact strings, so it is left to pydantic's road."""

    for value in (None, 5, uuid.UUID(CANONICAL), CANONICAL.encode(), Text(CANONICAL)):
        assert ids.parse_canonical_uuid(value) is None


@given(st.text(alphabet="0123456789abcdefABCDEFgxX-_ +\u0663", min_size=34, max_size=38))
def test_parsing_agrees_with_the_schema_pattern(text: str) -> None:
    parsed = ids.parse_canonical_uuid(text)
    if CANONICAL_UUID.fullmatch(text) is None:
        assert parsed is None
    else:
        assert parsed == uuid.UUID(text)


@given(st.from_regex(CANONICAL_UUID, fullmatch=True))
def test_every_canonical_text_parses_to_its_uuid(text: str) -> None:
    assert ids.parse_canonical_uuid(text) == uuid.UUID(text)


def test_new_elements_take_their_ids_from_the_pool() -> None:
    ids._POOL.clear()
    ids.new_uuid4()  # refills the pool (256 values) and takes one
    message = Message(content="x")
    assert (message.id.version, message.id.variant) == (4, uuid.RFC_4122)
    assert len(ids._POOL) == 254
