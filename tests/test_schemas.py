"""The schemas themselves: valid against the 2020-12 metaschema, inside the portable subset,
absolute `$id`s under one base, relative `$ref`s, and nothing resolved over the network."""

from __future__ import annotations

import copy
import json
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bundle import RECORDED_DIGESTS, SCHEMA_VERSION
from check_schemas import BASE_URI, PORTABLE_KEYWORDS, problems, subschemas
from generate import SCHEMA_DIR, SchemaSet
from jsonschema.exceptions import ValidationError
from jsonschema.validators import Draft202012Validator, extend
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from lionmsg import Instruction, Message
from lionmsg.runtime.element import _LION_CLASS_PATH
from lionmsg.runtime.wire import CANONICAL_UUID
from lionmsg.schema.files import KINDS, load_bundle
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


def test_a_content_property_without_a_default_is_reported(schema_copy: Path) -> None:
    # The generated dataclass would need a value for it, and records that leave it out would not load.
    _edit(schema_copy, "content/system.schema.json", lambda d: d["properties"].update({"note": {"type": "string"}}))
    found = list(problems(SchemaSet.load(schema_copy)))
    assert "content/system.schema.json#/properties/note: a content property needs a `default` (the generated " in (
        "\n".join(found)
    )


def test_a_content_schema_that_requires_a_property_is_reported(schema_copy: Path) -> None:
    """The generated loader reads no `required`: a record without the field would load with the default
    while the schema refuses it (review am P2-1)."""
    _edit(schema_copy, "content/action_response.schema.json", lambda d: d.update(required=["function"]))
    found = list(problems(SchemaSet.load(schema_copy)))
    assert (
        "content/action_response.schema.json#/required: a content schema cannot require a property (its "
        "generated loader reads every field as optional, with its `default`): give each property a default instead"
    ) in found
    # and the message schema's empty content, which the generated class writes, no longer passes
    assert any(p.startswith("messages/action_response.schema.json#/properties/content: its default {}") for p in found)


def test_a_required_name_that_is_no_property_is_reported(schema_copy: Path) -> None:
    _edit(schema_copy, "messages/system.schema.json", lambda d: d["properties"]["metadata"]["required"].append("lion"))
    found = list(problems(SchemaSet.load(schema_copy)))
    assert "messages/system.schema.json#/properties/metadata/required: 'lion' is not one of the properties" in found


@pytest.mark.parametrize(
    ("name", "pointer", "default", "message"),
    [
        ("content/system.schema.json", "/properties/system_message", 5, "its default 5 breaks the schema: 5 is not"),
        (
            "content/instruction.schema.json",
            "/properties/image_detail",
            "ultra",
            "its default 'ultra' breaks the schema",
        ),
    ],
)
def test_a_default_its_own_schema_refuses_is_reported(
    schema_copy: Path, name: str, pointer: str, default: Any, message: str
) -> None:
    """The generated classes would write the default into records the schemas refuse (review am P3-1);
    a `$ref`'d rule (image_detail's enum) counts as much as one written in place."""

    def set_default(data: dict[str, Any]) -> None:
        target = data
        for part in pointer.strip("/").split("/"):
            target = target[part]
        target["default"] = default

    _edit(schema_copy, name, set_default)
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any(p.startswith(f"{name}#{pointer}: {message}") for p in found), found


def test_a_schema_file_that_is_not_json_is_named_by_every_tool(schema_copy: Path) -> None:
    (schema_copy / "content" / "system.schema.json").write_text('{"type": "object",}', encoding="utf-8")
    expected = "content/system.schema.json: not valid JSON: "  # the decoder's words differ between versions
    for tool in ("check_schemas.py", "generate.py --check --schemas", "bundle.py --check --schemas"):
        script, *options = tool.split()
        command = [sys.executable, str(SCHEMA_DIR.parent / "tools" / script), *options, str(schema_copy)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        assert (done.returncode, done.stdout) == (1, ""), tool
        assert done.stderr.startswith(expected), (tool, done.stderr)
        assert ": line 1 column " in done.stderr, (tool, done.stderr)


def test_a_bundle_with_crlf_line_ends_fails_the_bundle_check(schema_copy: Path) -> None:
    # Review cq 7: the bundle was compared as text read with universal newlines.
    command = [sys.executable, str(SCHEMA_DIR.parent / "tools" / "bundle.py"), "--check", "--schemas", str(schema_copy)]
    bundle = schema_copy / "bundle.json"
    bundle.write_bytes(bundle.read_bytes().replace(b"\n", b"\r\n"))
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (1, f"{bundle} is stale: run `make bundle`\n")


def test_a_schema_change_without_a_version_bump_fails_the_bundle_check(schema_copy: Path) -> None:
    """The version promise (README) is checked: any change to a schema file changes the set's digest,
    and `bundle.py --check` names the digest to record with the bumped version."""
    command = [sys.executable, str(SCHEMA_DIR.parent / "tools" / "bundle.py"), "--check", "--schemas", str(schema_copy)]
    assert subprocess.run(command, capture_output=True, text=True, check=False).returncode == 0
    _edit(schema_copy, "content/system.schema.json", lambda d: d.update(description="reworded"))
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"the schemas changed since version {SCHEMA_VERSION} was recorded: bump SCHEMA_VERSION in tools/bundle.py"
    )
    assert re.search(r"record its digest [0-9a-f]{64}\n$", done.stderr)


def test_reordering_a_schemas_properties_needs_a_new_version(schema_copy: Path) -> None:
    # Review cq 1: the digest sorted every key, so fields moved within `properties` passed `make check`
    # unbumped, while the generated classes took them in the new order (positional arguments swapped,
    # records written in another key order).
    command = [sys.executable, str(SCHEMA_DIR.parent / "tools" / "bundle.py"), "--check", "--schemas", str(schema_copy)]
    _edit(
        schema_copy,
        "content/action_response.schema.json",
        lambda d: d.update(properties=dict(reversed(list(d["properties"].items())))),
    )
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr.split(":")[0]) == (
        1,
        f"the schemas changed since version {SCHEMA_VERSION} was recorded",
    )


# What each released version's schema set hashes to: a recorded digest is never changed (a new one is
# added with its version), so a change cannot be published under a version already out.
RELEASED_DIGESTS = {
    "1.0.0": "86ac6ea319c4616111281cfbd240fcc44797a4c4aa00d60d7a1033cbe556ab5c",
    "1.0.1": "7e687a7cf030dbcf173900ed501f7d762e1af8522836dc82a00e52cb858fde11",
    "1.0.2": "76fdca12c7c80fcb70b98834dc07907d42cf31f1dd70a78640c2bb04e443ff79",
}


def test_a_released_versions_digest_is_never_changed() -> None:
    # Review cq 4: overwriting the current version's digest passed make check.
    assert {version: RECORDED_DIGESTS.get(version) for version in RELEASED_DIGESTS} == RELEASED_DIGESTS
    assert SCHEMA_VERSION in RECORDED_DIGESTS


def test_the_readme_names_the_current_schema_version() -> None:
    readme = (SCHEMA_DIR.parent / "README.md").read_text(encoding="utf-8")
    assert f"`x-lionmsg-schema-version` is `{SCHEMA_VERSION}`" in readme


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


@pytest.mark.parametrize("phrase", [["a UUID"], "", "  "])
def test_an_expected_annotation_that_is_no_phrase_is_reported(schema_copy: Path, phrase: object) -> None:
    _edit(
        schema_copy,
        "content/system.schema.json",
        lambda d: d["properties"]["system_datetime"].update({"x-lionmsg-expected": phrase}),
    )
    found = list(problems(SchemaSet.load(schema_copy)))
    assert "content/system.schema.json#/properties/system_datetime: x-lionmsg-expected must be a phrase" in "\n".join(
        found
    ), found


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


def test_the_runtimes_copies_of_schema_patterns_are_the_schemas(schemas: SchemaSet) -> None:
    """Rules the runtime states by hand, for the envelope's fields the generated code does not check: a
    schema edit that `make generate` cannot carry fails here, naming the copy to change (review am P2-2;
    the image rules are pinned by drawing from the patterns, in test_images)."""
    uuid = schemas.get("envelope.schema.json")["$defs"]["uuid"]["pattern"]
    assert f"^{CANONICAL_UUID.pattern}$" == uuid, "change lionmsg/runtime/wire.py CANONICAL_UUID with it"
    prefix = _LION_CLASS_PATH.pattern.removesuffix("[A-Za-z_][A-Za-z0-9_]*")
    for name, schema in schemas.by_path.items():
        if name.startswith("messages/"):
            lion_class = schema["properties"]["metadata"]["properties"]["lion_class"]["pattern"]
            kind = lion_class.rsplit(")*", 1)[-1].removesuffix("$")
            assert lion_class == f"^{prefix}{kind}$", f"change lionmsg/runtime/element.py _LION_CLASS_PATH ({name})"


def test_the_bundle_validates_records_wherever_it_is_stored() -> None:
    """Its root refers to the record schema by its `$defs` entry, not a URI relative to where the bundle
    was fetched from (review am P3-3): registered under a client's own URI, it still resolves."""
    bundle = json.loads((SCHEMA_DIR / "bundle.json").read_text(encoding="utf-8"))
    stored = {key: value for key, value in bundle.items() if key != "$id"}
    registry: Registry[Any] = Registry().with_resource(
        "file:///srv/schemas/lionmsg.json", DRAFT202012.create_resource(stored)
    )
    validator = Draft202012Validator({"$ref": "file:///srv/schemas/lionmsg.json"}, registry=registry.crawl())
    record = Instruction(content={"instruction": "q"}).to_dict()
    assert validator.is_valid(record)
    assert not validator.is_valid({**record, "id": "not a uuid"})


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


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("^ok|fine$", "must be anchored with ^...$"),  # validators search: `okay` would pass one, not the loader
        ("^ok\\$", "must be anchored with ^...$"),  # an escaped dollar is no anchor
        ("^[0-9]:\\d{1,4}$", "uses \\d, which ECMA-262 and Python read differently"),
        ("^\\w+$", "uses \\w, which ECMA-262 and Python read differently"),
        ("^a.b$", "uses `.` outside a class"),
        ("^(?i:you)$", "uses '(?i': only (...), (?:...), (?=...) and (?!...) read alike"),
        ("^(?P<word>you)$", "uses '(?P'"),
        ("^[]a]$", "uses `[]` or `[^]`"),
        ("^[^]$", "uses `[]` or `[^]`"),
        ("^a*+$", "uses a possessive quantifier"),
        ("^a{,3}$", "uses {,n}"),
        ("^\\p{L}$", "uses '\\\\p{', which only one of ECMA-262 and Python reads"),
        ("^\\u{41}$", "uses '\\\\u{'"),
        ("^(a)\\1$", "uses '\\\\1'"),
        ("^[\\d]$", "uses \\d"),  # in a class too
    ],
)
def test_a_pattern_clients_would_read_differently_is_reported(schema_copy: Path, pattern: str, problem: str) -> None:
    # Review bh F3: only the anchors' text was checked.
    _edit(
        schema_copy,
        "content/system.schema.json",
        lambda d: d["properties"]["system_message"].update({"pattern": pattern}),
    )
    found = list(problems(SchemaSet.load(schema_copy)))
    assert any(f"pattern {pattern!r} {problem}" in p for p in found), found


@pytest.mark.parametrize(
    "pattern", ["^(?:ok|fine)$", "^a[.]b$", "^a\\.b$", "^[|]$", "^a\\\\$", "^(?=a)a$", "^[\\b]$", "^a+?$", "^\\u0041$"]
)
def test_a_pattern_every_client_reads_alike_is_accepted(schema_copy: Path, pattern: str) -> None:
    _edit(
        schema_copy,
        "content/system.schema.json",
        lambda d: d["properties"]["system_message"].update({"pattern": pattern}),
    )
    assert [p for p in problems(SchemaSet.load(schema_copy)) if "pattern" in p] == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_minimal_record_loads_to_the_schemas_defaults(kind: str) -> None:
    # Review bh F9: the envelope's fields are written by hand (templates/messages.py.jinja, element.py);
    # their defaults, a kind's own first, must be the schemas'.
    definitions = load_bundle()["$defs"]
    envelope = definitions["envelope"]["properties"]
    own = definitions[f"messages.{kind}"]["properties"]
    record = {"id": "0f8fad5b-d9cb-469f-a165-70867728950e", "created_at": 1, "metadata": {"lion_class": KINDS[kind]}}
    written = Message.from_dict(record).to_dict()
    for field in ("embedding", "sender", "recipient", "channel"):
        assert written[field] == own.get(field, envelope[field]).get("default"), field
    assert written["metadata"] == {"lion_class": KINDS[kind]}
    content = definitions.get(f"content.{kind}")
    if content is None:
        assert written["content"] == own["content"]["default"]
    else:
        defaults = {name: prop["default"] for name, prop in content["properties"].items()}
        assert {name: written["content"].get(name, default) for name, default in defaults.items()} == defaults
