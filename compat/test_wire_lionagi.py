"""Wire compatibility with LionAGI 0.36.0, both directions, for each of the six classes (design.md §5)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from generate import SCHEMA_DIR, SchemaSet
from jsonschema.validators import Draft202012Validator

from compat.conftest import LionAGI
from lionmsg import LION_CLASSES, Message
from tests.samples import failed_action_response, rich_messages

SCHEMAS = SchemaSet.load(SCHEMA_DIR)
RECORD = Draft202012Validator(SCHEMAS.get("record.schema.json"), registry=SCHEMAS.registry)
LIONAGI_MODULE = "lionagi.protocols.messages"


def short(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its discriminator reduced to the short class name (LionAGI writes full paths)."""
    record = copy.deepcopy(record)
    record["metadata"]["lion_class"] = record["metadata"]["lion_class"].rpartition(".")[2]
    return record


@pytest.fixture(scope="module")
def lionagi_records(lionagi: LionAGI) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = lionagi.run("dump")
    return records


def test_lionagi_writes_every_class(lionagi_records: list[dict[str, Any]]) -> None:
    names = [r["metadata"]["lion_class"] for r in lionagi_records]
    assert [n.rpartition(".")[2] for n in names] == [*LION_CLASSES, "ActionResponse"]
    assert all(n.startswith(LIONAGI_MODULE) for n in names)


def test_lionagi_records_are_valid_against_our_schemas(lionagi_records: list[dict[str, Any]]) -> None:
    for record in lionagi_records:
        assert list(RECORD.iter_errors(record)) == [], record


def test_lionagi_records_load_into_the_right_class_with_every_field_intact(
    lionagi_records: list[dict[str, Any]],
) -> None:
    for record in lionagi_records:
        message = Message.from_dict(record)
        assert type(message).__name__ == record["metadata"]["lion_class"].rpartition(".")[2]
        assert message.to_dict() == short(record)


def test_lionmsg_records_load_into_the_right_lionagi_class_with_every_field_intact(lionagi: LionAGI) -> None:
    ours = [m.to_dict() for m in [*rich_messages(), failed_action_response()]]
    theirs = lionagi.run("load", ours)
    assert len(theirs) == len(ours)
    for record, loaded in zip(ours, theirs, strict=True):
        name = record["metadata"]["lion_class"]
        assert loaded["class"].startswith(LIONAGI_MODULE)
        assert loaded["class"].rpartition(".")[2] == name
        assert short(loaded["record"]) == record
