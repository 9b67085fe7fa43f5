"""The schemas themselves: valid against the 2020-12 metaschema, inside the portable subset,
absolute `$id`s under one base, relative `$ref`s, and nothing resolved over the network."""

from __future__ import annotations

import copy
import json
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from check_schemas import BASE_URI, PORTABLE_KEYWORDS, problems, subschemas
from generate import SCHEMA_DIR, SchemaSet
from jsonschema.exceptions import ValidationError
from jsonschema.validators import Draft202012Validator, extend
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from lionmsg import Instruction
from lionmsg.schema.patterns import python_pattern
from tests.samples import rich_messages

CONTENT_KINDS = ("system", "instruction", "assistant_response", "action_request", "action_response")
EXPECTED_FILES = {
    "role.schema.json",
    "envelope.schema.json",
    "record.schema.json",
    *(f"content/{n}.schema.json" for n in CONTENT_KINDS),
    *(f"messages/{n}.schema.json" for n in ("message", *CONTENT_KINDS)),
}


@pytest.fixture(scope="module")
def schemas() -> SchemaSet:
    return SchemaSet.load(SCHEMA_DIR)


def test_the_schema_set_is_complete_and_sound(schemas: SchemaSet) -> None:
    assert set(schemas.by_path) == EXPECTED_FILES
    assert list(problems(schemas)) == []


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_every_schema_is_valid_against_its_metaschema(schemas: SchemaSet, name: str) -> None:
    schema = schemas.get(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == BASE_URI + name


def test_only_portable_keywords_are_used(schemas: SchemaSet) -> None:
    for name, schema in schemas.by_path.items():
        for pointer, sub in subschemas(schema):
            used = {k for k in sub if not k.startswith("x-")} - {"$schema", "$id"}
            assert used <= PORTABLE_KEYWORDS, (name, pointer, used - PORTABLE_KEYWORDS)


@pytest.fixture
def schema_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, copy)
    return copy


def _edit(root: Path, name: str, change: Any) -> None:
    path = root / name
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("prefixItems", [{"type": "string"}]),
        ("unevaluatedProperties", False),
        ("dependentRequired", {"a": ["b"]}),
        ("if", {"type": "string"}),
        ("$dynamicRef", "#meta"),
    ],
)
def test_a_keyword_outside_the_subset_is_reported(schema_copy: Path, keyword: str, value: Any) -> None:
    _edit(
        schema_copy, "content/system.schema.json", lambda d: d["properties"]["system_message"].update({keyword: value})
    )
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any(f"keyword {keyword!r} is outside the portable subset" in p for p in found), found


def test_an_absolute_or_dangling_ref_is_reported(schema_copy: Path) -> None:
    def point_away(data: dict[str, Any]) -> None:
        data["properties"]["id"]["allOf"] = [{"$ref": "https://example.org/elsewhere.json"}]
        data["properties"]["channel"] = {"$ref": "missing.schema.json"}

    _edit(schema_copy, "envelope.schema.json", point_away)
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any("must be relative" in p for p in found), found
    assert any("'missing.schema.json' does not resolve locally" in p for p in found), found


def test_a_recursive_ref_is_reported(schema_copy: Path) -> None:
    _edit(schema_copy, "content/system.schema.json", lambda d: d["properties"].update({"again": {"$ref": "#"}}))
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any("recursive $ref" in p for p in found), found


def test_a_wrong_id_or_dialect_and_a_metaschema_violation_are_reported(schema_copy: Path) -> None:
    def break_it(data: dict[str, Any]) -> None:
        data["$id"] = "https://elsewhere.example/role.json"
        data["$schema"] = "http://json-schema.org/draft-07/schema#"
        data["enum"] = "not-a-list"

    _edit(schema_copy, "role.schema.json", break_it)
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any("$id must be" in p for p in found), found
    assert any("$schema must be" in p for p in found), found
    assert any("invalid against the 2020-12 metaschema" in p for p in found), found


def test_properties_without_object_type_is_reported(schema_copy: Path) -> None:
    _edit(schema_copy, "messages/system.schema.json", lambda d: d["properties"]["metadata"].pop("type"))
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any('needs `"type": "object"`' in p for p in found), found


def test_an_optional_content_property_without_a_default_is_reported(schema_copy: Path) -> None:
    # The generated dataclass would need a value for it, and records that leave it out would not load.
    _edit(schema_copy, "content/system.schema.json", lambda d: d["properties"].update({"note": {"type": "string"}}))
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any("content/system.schema.json#/properties/note: an optional content property needs a" in p for p in found)


def test_an_enum_value_that_is_no_json_scalar_is_reported(schema_copy: Path) -> None:
    _edit(
        schema_copy,
        "content/instruction.schema.json",
        lambda d: d["properties"]["image_detail"]["enum"].append({"level": "low"}),
    )
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any(
        "instruction.schema.json#/properties/image_detail: enum values must be strings, numbers, booleans or null" in p
        for p in found
    ), found


def test_an_unanchored_pattern_is_reported(schema_copy: Path) -> None:
    _edit(
        schema_copy,
        "content/system.schema.json",
        lambda d: d["properties"]["system_message"].update({"pattern": "^You"}),
    )
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any("pattern '^You' must be anchored with ^...$" in p for p in found), found


def test_an_unknown_annotation_is_reported(schema_copy: Path) -> None:
    _edit(
        schema_copy,
        "content/system.schema.json",
        lambda d: d["properties"]["system_datetime"].update({"x-lionmsg-omitt": ["null"]}),
    )
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any("unknown annotation 'x-lionmsg-omitt'" in p for p in found), found


def test_no_ref_resolution_touches_the_network(monkeypatch: pytest.MonkeyPatch, schemas: SchemaSet) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    fresh = SchemaSet.load(SCHEMA_DIR)
    for schema in fresh.by_path.values():
        resolver = fresh.resolver(schema)
        for _, sub in subschemas(schema):
            if "$ref" in sub:
                resolver.lookup(sub["$ref"])
    record = Draft202012Validator(fresh.get("record.schema.json"), registry=fresh.registry)
    for message in rich_messages():
        assert record.is_valid(message.to_dict())


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    # What the README asks of a Python client: `$` is the end of input, as in ECMA-262.
    if isinstance(instance, str) and re.search(python_pattern(pattern), instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def test_the_bundle_keeps_a_clients_ecma_pattern_inside_every_ref() -> None:
    # A `$schema` inside an embedded file made jsonschema build a fresh validator class at each `$ref`
    # into it (check-jsonschema too), with Python's `pattern` back: a trailing newline then passed.
    bundle = json.loads((SCHEMA_DIR / "bundle.json").read_text(encoding="utf-8"))
    assert [name for name, schema in bundle["$defs"].items() if "$schema" in schema] == []
    registry: Registry[Any] = Registry().with_resource(bundle["$id"], DRAFT202012.create_resource(bundle)).crawl()
    ecma = extend(Draft202012Validator, {"pattern": _ecma_pattern})(bundle, registry=registry)
    record = Instruction(content={"instruction": "q", "images": ["https://example.com/a.png"]}).to_dict()
    assert ecma.is_valid(record)
    for change in (
        lambda r: r.update(id=r["id"] + "\n"),
        lambda r: r["metadata"].update(lion_class="Instruction\n"),
        lambda r: r["content"].update(images=["https://example.com/a.png\n"]),
    ):
        changed = copy.deepcopy(record)
        change(changed)
        assert not ecma.is_valid(changed)
