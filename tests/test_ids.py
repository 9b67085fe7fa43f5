"""lionmsg.runtime.ids: fresh UUIDs are version-4 RFC 4122 ids, never repeated (across threads and forks),
and parsed ones equal what `uuid.UUID` makes."""

from __future__ import annotations

import os
import uuid

import pytest

from lionmsg import Message
from lionmsg.runtime import ids


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
        for built in (ids.uuid_from_int(standard.int), ids.uuid_from_canonical_text(str(standard))):
            assert type(built) is uuid.UUID
            assert built == standard
            assert hash(built) == hash(standard)
            assert str(built) == str(standard)
            assert built.is_safe is standard.is_safe


def test_new_elements_take_their_ids_from_the_pool() -> None:
    ids._POOL.clear()
    ids.new_uuid4()  # refills the pool (256 values) and takes one
    message = Message(content="x")
    assert (message.id.version, message.id.variant) == (4, uuid.RFC_4122)
    assert len(ids._POOL) == 254
