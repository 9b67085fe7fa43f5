"""Schema-driven fuzzing (hypothesis + hypothesis-jsonschema, from `schemas/bundle.json`).

For every kind: (a) a generated record loads with `Message.from_dict` into the kind's class, writes a
record the schema accepts, and loads again equal; (b) after one random mutation, the schema and
`from_dict` still agree on whether the record is acceptable, in both directions.

CI runs 200 examples per kind and property; `make fuzz N=...` sets `LIONMSG_FUZZ_EXAMPLES` to run many
more.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import pathlib
import random
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeAlias
from uuid import UUID

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from lionmsg import LION_CLASSES, Message
from lionmsg.runtime.addressing import normalize_address
from lionmsg.runtime.content.base import MessageContent
from lionmsg.runtime.wire import loads_json, write_json
from lionmsg.schema import strategies
from lionmsg.schema.files import KINDS, kind_of_class, load_bundle
from lionmsg.schema.fuzz import generate_records
from lionmsg.schema.strategies import EDGE_KEY, generation_schema, inlined_kind_schema, records
from lionmsg.schema.validator import RecordValidator, _long_integers_abbreviated

EXAMPLES = int(os.environ.get("LIONMSG_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    database=None,  # no example database: CI runs start clean and stay reproducible from the seed
    deadline=None,  # generating one record costs 10-85 ms on a shared machine
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

VALIDATOR = RecordValidator()
STRATEGIES = {kind: records(kind) for kind in KINDS}
CLASSES: dict[str, type[Message]] = {kind: LION_CLASSES[name] for kind, name in KINDS.items()}

Key: TypeAlias = str | int
Path: TypeAlias = tuple[Key, ...]


def _without_role(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != "role"}


# -- (a) round trip -------------------------------------------------------------------------------


def _assert_nothing_lost(record: dict[str, Any], message: Message, written: dict[str, Any]) -> None:
    """What the record said survives loading (normalised as README "Records" says, never dropped)."""
    assert UUID(written["id"]) == UUID(record["id"])
    assert written["created_at"] == float(record["created_at"])  # a JSON integer is read as a float
    assert written["metadata"] == {**record.get("metadata", {}), "lion_class": type(message).__name__}
    if record.get("embedding") is not None:
        assert written["embedding"] == [float(number) for number in record["embedding"]]
    if "channel" in record:
        assert written["channel"] == record["channel"]
    for key in ("sender", "recipient"):
        if key in record:
            assert getattr(message, key) == normalize_address(record[key])
    if "content" not in record:
        return
    if type(message) is Message:
        assert written["content"] == record["content"]
        return
    for key, value in record["content"].items():
        if key in ("action_request_id", "action_response_id") and value is not None:
            assert UUID(written["content"][key]) == UUID(value), key  # a UUID: compared as one, not as text
        elif value is not None and value != []:  # absent fields are left out of records
            assert written["content"][key] == value, key


def _shown(value: Any) -> str:
    """repr() of a record, with the integers too long for repr() (the strategies draw them) abbreviated."""
    return repr(_long_integers_abbreviated(value))


@pytest.mark.parametrize("kind", list(KINDS))
@FUZZ
@given(data=st.data())
def test_a_generated_record_loads_writes_a_valid_record_and_loads_again_equal(kind: str, data: st.DataObject) -> None:
    record = data.draw(STRATEGIES[kind], label="record")
    assert VALIDATOR.errors(record) == []  # sanity: the generator follows the schema
    cls = CLASSES[kind]

    message = Message.from_dict(record)
    assert type(message) is cls
    written = message.to_dict()
    note(f"written: {_shown(written)}")
    assert VALIDATOR.errors(written) == []
    assert written["role"] == cls._role.value
    _assert_nothing_lost(record, message, written)

    again = Message.from_dict(written)
    assert type(again) is cls
    assert again.to_dict() == written
    assert Message.from_json(message.to_json()).to_dict() == written
    _assert_copies_are_deep_and_equal(message, written)


def _containers_held(values: tuple[Any, ...]) -> set[int]:
    """The ids of every list and dict in `values` (a tuple: a list made for the call could be freed and
    its id given to another's) and inside them."""
    found: set[int] = set()
    pending = list(values)
    while pending:
        item = pending.pop()
        if isinstance(item, (list, dict)):
            found.add(id(item))
            pending.extend(item.values() if isinstance(item, dict) else item)
    return found


def _rendering(content: Any) -> Any:
    try:
        return content.rendered
    except ValueError as error:  # a record the schema accepts may still not render (an unknown detail)
        return ("ValueError", str(error))


def _assert_copies_are_deep_and_equal(message: Message, written: dict[str, Any]) -> None:
    """A clone and a typed content's copy (generated: field by field) hold what deepcopy's copy holds,
    render the same and share no list or dict with the message."""
    content, clone = message.content, message.clone()
    assert clone.to_dict()["content"] == written["content"]
    assert not _containers_held((message.content, message.metadata)) & _containers_held((clone.content, clone.metadata))
    if isinstance(content, MessageContent):
        copied = content.copy()
        assert type(copied) is type(content)
        assert repr(copied.to_dict()) == repr(copy.deepcopy(content).to_dict())
        assert _rendering(copied) == _rendering(content)
        held = _containers_held(tuple(getattr(content, name) for name in content.field_names()))
        for duplicate in (copied, clone.content):
            assert not held & _containers_held(tuple(getattr(duplicate, name) for name in content.field_names()))


# -- what the strategies draw ---------------------------------------------------------------------


def _published_form(node: Any) -> Any:
    """A node of `generation_schema` as the published schema has it: `anyOf: [integer form, X]` is X,
    and the address format is gone."""
    if isinstance(node, list):
        return [_published_form(item) for item in node]
    if not isinstance(node, dict):
        return node
    branches = node.get("anyOf")
    if list(node) == ["anyOf"] and len(branches) == 2 and branches[0] == {**branches[1], "type": "integer"}:
        return _published_form(branches[1])
    return {
        key: _published_form(value) for key, value in node.items() if (key, value) != ("format", "x-lionmsg-address")
    }


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_generation_schema_is_the_published_one_with_integers_spelled_out(kind: str) -> None:
    schema = generation_schema(kind)
    assert _published_form(schema) == inlined_kind_schema(kind)  # the same rules, every bound kept
    envelope = schema["allOf"][0]["properties"]
    bounds = {"minimum": -1.7976931348623157e308, "maximum": 1.7976931348623157e308}
    assert envelope["created_at"] == {"anyOf": [{"type": "integer", **bounds}, {"type": "number", **bounds}]}
    assert envelope["sender"] == {"allOf": [{"type": ["string", "null"], "format": "x-lionmsg-address"}]}


_UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_ROLE_VALUES = {"system", "user", "assistant", "unset", "action"}


def _address_kind(value: str | None) -> str:
    if value is None:
        return "null"
    if value in _ROLE_VALUES:
        return "role"
    if _UUID_TEXT.fullmatch(value):
        return "uuid" if value == value.lower() else "mixed-case uuid"
    return "name"


def test_the_strategies_draw_integers_for_numbers_and_roles_and_uuids_for_addresses() -> None:
    """hypothesis-jsonschema alone draws only floats for `"type": "number"` and only arbitrary text for
    an address: integer timestamps and embeddings and the role/UUID normalisation of addresses went
    unfuzzed. A fixed seed: the same records on every run of one hypothesis version (Python 3.10 has an
    older one); 300 records, because hypothesis starts with its simplest examples: on 3.10 the first
    150 of this seed held one null address."""
    seen: Counter[str] = Counter()
    for record in generate_records(300, None, 0):
        assert VALIDATOR.is_valid(record)
        seen[f"created_at {type(record['created_at']).__name__}"] += 1
        seen.update(f"embedding item {type(item).__name__}" for item in record.get("embedding") or [])
        seen.update(f"address {_address_kind(record[key])}" for key in ("sender", "recipient") if key in record)
    wanted = ["created_at int", "created_at float", "embedding item int", "embedding item float"]
    wanted += [f"address {kind}" for kind in ("role", "uuid", "mixed-case uuid", "name", "null")]
    assert {name: seen[name] for name in wanted if seen[name] < 2} == {}, seen


def test_the_strategies_draw_the_values_readers_part_on_and_records_keep_them_exactly() -> None:
    """Lone surrogates, integers past Python's int-to-text digit limit, values nested deeper than a few
    levels and negative zero: hypothesis-jsonschema draws none of them (review at F5). One record in
    ten to twenty carries some in its metadata; each loads, writes and loads again as it came."""
    seen: Counter[str] = Counter()
    carried = 0
    for record in generate_records(300, None, 2):
        edge = (record.get("metadata") or {}).get(EDGE_KEY)
        if edge is None:
            continue
        carried += 1
        seen.update(edge.keys())
        assert VALIDATOR.is_valid(record)
        message = Message.from_dict(record)
        text = message.to_json()
        assert write_json(loads_json(text)["metadata"][EDGE_KEY]) == write_json(edge)  # -0.0 keeps its sign
        assert Message.from_json(text).to_dict() == message.to_dict()
        assert Message.from_dict(message.to_dict()).to_dict() == message.to_dict()
    assert carried >= 10, carried  # 14 for this seed: hypothesis draws its simplest seeds again and again
    assert {kind: seen[kind] for kind in ("text", "keys", "integer", "nested", "zero") if seen[kind] < 3} == {}, seen


def test_the_strategies_give_content_and_each_content_field_real_odds() -> None:
    """The schema alone gave content to a fifth to a third of the records and each content field to
    2.5-15% of them: two thirds of the draws now carry content, half of those every field of typed
    content (a generic message's content is any JSON value, scalars among them)."""
    for kind in KINDS:
        drawn = list(generate_records(90, kind, 1))
        assert all(VALIDATOR.is_valid(record) for record in drawn)
        with_content = [record["content"] for record in drawn if "content" in record]
        assert len(with_content) >= 45, (kind, len(with_content))
        if kind == "message":
            scalars = [value for value in with_content if not isinstance(value, (dict, list))]
            assert len(scalars) >= 2, with_content
            continue
        fields = load_bundle()["$defs"][f"content.{kind}"]["properties"]
        per_field = Counter(name for content in with_content for name in content)
        assert {name: per_field[name] for name in fields if per_field[name] < 15} == {}, (kind, per_field)


def test_what_a_seed_gives_does_not_depend_on_the_callers_modules(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hypothesis draws constants from the source of loaded modules that are not installed packages: a
    module of the caller's holding text and numbers must not change what a seed gives, and no cache of
    such constants is written to the current directory."""
    before = list(generate_records(40, None, 5))
    local = tmp_path / "caller_constants.py"
    local.write_text(
        "NAMES = ['Zq9 caller', 'tool-7', 'SYSTEM', 'A0B1C2D3-E4F5-4A6B-8C7D-9E0F1A2B3C4D']\n"
        "NUMBERS = [1234567, -98765, 2.718281828, 1e300]\n",
        encoding="utf-8",
    )
    spec = importlib.util.spec_from_file_location("caller_constants", local)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "caller_constants", module)  # loaded, as a caller's module is
    monkeypatch.chdir(tmp_path)
    assert list(generate_records(40, None, 5)) == before
    assert not (tmp_path / ".hypothesis" / "constants").exists()


# -- (b) mutations --------------------------------------------------------------------------------

# Any JSON number. JSON text has no NaN or infinity, but it may spell out an integer beyond a double:
# neither the schema check nor `from_dict` may take one for `created_at` or an `embedding` item.
# 2**1024 - 2**971 + 1 and its negative are beyond the largest double but round down to it: float()
# takes them, the schema's maximum does not.
_HUGE = [10**400, -(10**400), 2**1024, 2**53 + 1, 2**1024 - 2**971 + 1, -(2**1024 - 2**971 + 1)]
_NUMBERS = st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(_HUGE)
_SCALARS = st.none() | st.booleans() | _NUMBERS | st.text(max_size=8)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)

_UUID = "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f"
UUID_TEXTS = [
    _UUID,
    _UUID.upper(),
    _UUID + "\n",
    "\n" + _UUID,
    " " + _UUID,
    "{" + _UUID + "}",
    "urn:uuid:" + _UUID,
    _UUID.replace("-", ""),
    _UUID[:-1],
    _UUID[:-1] + "g",
    "",
]
IMAGE_REFS = [
    "https://example.org/cat.png",
    "HTTP://EXAMPLE.ORG/a.jpg?x=1#top",
    "https://[2001:db8::1]:8443/cat.png",
    "http://x",
    "https://x/",
    "https:///cat.png",
    "https://",
    "https://example.org/my cat.png",
    "https://example.org/cat.png\n",
    "https://exa\u00a0mple.org/",
    "https://example.org/\u2028",
    "http:/example.org",
    "ftp://example.org/cat.png",
    "file:///etc/passwd",
    "data:image/png;base64,iVBORw0KGgo=",
    "data:image/jpeg;base64,/9j/4AAQ",
    "data:image/jpg;base64,AAAA",
    "data:image/gif;base64,R0lGODlh",
    "data:image/webp;base64,UklGRg==",
    "data:image/png;base64,",
    "data:image/png;base64,=",
    "data:image/png;base64,====",
    "data:image/png;base64,AAA",
    "data:image/png;base64,AAAA\n",
    "data:image/png;base64,not base64!",
    "data:image/svg+xml;base64,PHN2Zz4=",
    "data:image/PNG;base64,AAAA",
    "DATA:image/png;base64,AAAA",
    "data:image/png,AAAA",
    "iVBORw0KGgo=",
    "AAAA",
    "AA==",
    "AAA=",
    "A===",
    "AAA",
    "AAAA====",
    "AA=A",
    "AAAA\n",
    "Zm9v YmFy",
    "",
    "\u00e9t\u00e9",
]
IMAGE_DETAILS = ["low", "high", "auto", None, "ultra", "LOW", "", "auto\n"]
ROLES = ["system", "user", "assistant", "unset", "action", "admin", "USER", ""]
LION_CLASS_VALUES = [
    *KINDS.values(),
    *(f"lionagi.protocols.messages.{kind}.{name}" for kind, name in KINDS.items()),
    "_private.x9.Instruction",
    "lionagi..Instruction",
    ".System",
    "System.",
    "my-pkg.ActionRequest",
    "1pkg.ActionResponse",
    "Message\n",
    "instruction",
    "RoledMessage",
    "Element",
    "Node",
    "Pile",
    "",
    "MessageMessage",
    "x.AssistantResponseX",
]
NAMES = ["context", "lion_class", "role", "success", "model_response", "request_id", "result", "extra"]
TEXT_SLOTS = ["", "x", "\n", "user", "assistant", "null", "0", "true", "{}", "[]"]


def _targeted(path: Path) -> list[Any]:
    """Values near the edge of the rule that governs `path` (empty when no particular rule does)."""
    last = next((key for key in reversed(path) if isinstance(key, str)), "")
    values: list[Any] = []
    if last == "images":
        values += IMAGE_REFS if isinstance(path[-1], int) else [[ref] for ref in IMAGE_REFS]
    if last == "image_detail":
        values += IMAGE_DETAILS
    if last in ("id", "sender", "recipient", "action_request_id", "action_response_id"):
        values += UUID_TEXTS
    if last in ("role", "sender", "recipient"):
        values += ROLES
    if last == "lion_class":
        values += LION_CLASS_VALUES
    if last in ("embedding", "created_at"):
        values += [[], [0], [1.5, -2], [True], [None], ["1.0"], [[1.0]], 0, -1.5, True, "1.5", *_HUGE, _HUGE]
    return values


@cache
def _content_fields(kind: str) -> list[str]:
    if kind == "message":
        return []
    properties: dict[str, Any] = load_bundle()["$defs"][f"content.{kind}"]["properties"]
    return sorted(properties)


ENVELOPE_KEYS = ["id", "created_at", "metadata", "content", "embedding", "sender", "recipient", "channel", "role"]


def _known_paths(kind: str) -> dict[str, list[Path]]:
    """The places a schema rule governs, present in the record or not, by area: every content field of
    the kind (and an image and a tool schema), every envelope key (and an embedding item), and the
    discriminator."""
    content: list[Path] = [("content", name) for name in _content_fields(kind)]
    if kind == "instruction":
        content += [("content", "images", 0), ("content", "images", 1), ("content", "tool_schemas", 0)]
    return {
        "content": content or [("content",)],
        "envelope": [(key,) for key in ENVELOPE_KEYS] + [("embedding", 0)],
        "metadata": [("metadata", "lion_class"), ("metadata",)],
    }


def _existing_paths(node: Any, prefix: Path = ()) -> list[Path]:
    paths: list[Path] = []
    children: list[tuple[Key, Any]] = []
    if isinstance(node, dict):
        children = list(node.items())
    elif isinstance(node, list):
        children = list(enumerate(node))
    for key, child in children:
        paths.append((*prefix, key))
        paths.extend(_existing_paths(child, (*prefix, key)))
    return paths


def _value_at(record: Any, path: Path) -> Any:
    for key in path:
        record = record[key]
    return record


def _get(node: Any, key: Key) -> Any:
    if isinstance(node, dict):
        return node.get(key)
    return node[key] if isinstance(key, int) and key < len(node) else None


def _put(node: Any, key: Key, value: Any) -> None:
    if isinstance(node, dict) or (isinstance(key, int) and key < len(node)):
        node[key] = value
    else:
        node.append(value)


def _set(node: Any, path: Path, value: Any) -> None:
    """Set the value at `path`, creating (or replacing) the containers on the way as needed."""
    key, rest = path[0], path[1:]
    if not rest:
        _put(node, key, value)
        return
    child = _get(node, key)
    wanted: type = list if isinstance(rest[0], int) else dict
    if not isinstance(child, wanted):
        child = wanted()
        _put(node, key, child)
    _set(child, rest, value)


def _delete(node: Any, path: Path) -> None:
    del _value_at(node, path[:-1])[path[-1]]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


VALUES_OF_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "number": _NUMBERS,
    "string": st.sampled_from(TEXT_SLOTS) | st.text(max_size=8),
    "array": st.lists(JSON_VALUES, max_size=3),
    "object": st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=6), JSON_VALUES, max_size=3),
}


@dataclass(frozen=True)
class Mutation:
    """One change to a record: what it does, where, and (for the changes that set one) the value."""

    op: str
    path: Path
    value: Any = None

    def apply(self, record: dict[str, Any]) -> dict[str, Any]:
        mutated = copy.deepcopy(record)
        if self.op == "delete":
            _delete(mutated, self.path)
        else:
            _set(mutated, self.path, self.value)
        return mutated

    def label(self, kind: str) -> str:
        """For `event()`: the operation and where, with keys no schema names shown as `*`."""
        known = {*ENVELOPE_KEYS, *_content_fields(kind), "lion_class"}
        shown = [f"[{key}]" if isinstance(key, int) else key if key in known else "*" for key in self.path]
        return f"{kind}: {self.op} {'.'.join(shown)}"


MUTATION_OPS = ["replace", "wrong-type", "delete", "lion-class", "add-key"]


@st.composite
def mutations(draw: Callable[..., Any], record: dict[str, Any], kind: str) -> Mutation:
    """One random mutation of `record`: replace a value (where a rule applies, present or not, or
    anywhere in the record), put a value of another JSON type in place of one, delete a key or an item,
    name another class in the discriminator (or drop it), or add a key to an object.

    The structural choices come from a Random seeded by a drawn number and the record itself:
    hypothesis's own choices (and seeds) lean towards the first option, which made one mutation of one
    field half of the run. The same record and seed give the same mutation, so a failure reproduces."""
    digest = hashlib.sha256(write_json(record).encode()).digest()  # json.dumps refuses long integers
    rng = random.Random(draw(st.integers(0, 2**64 - 1), label="seed") ^ int.from_bytes(digest[:8], "big"))
    existing = sorted(_existing_paths(record), key=repr)
    # Existing places are picked by top-level key first, so a large `metadata` does not crowd out the rest,
    # and content (where most rules are) four times as often as any other key.
    tops = sorted({path[0] for path in existing}, key=repr)

    def existing_path() -> Path:
        top = rng.choices(tops, weights=[4 if top == "content" else 1 for top in tops])[0]
        return rng.choice([path for path in existing if path[0] == top])

    def value_for(path: Path) -> Any:
        targeted = _targeted(path)
        if targeted and rng.random() < 0.6:
            return copy.deepcopy(rng.choice(targeted))
        if rng.random() < 0.2:
            return rng.choice(TEXT_SLOTS)
        return draw(JSON_VALUES, label="value")

    op = rng.choices(MUTATION_OPS, weights=[50, 15, 10, 12, 13] if existing else [50, 0, 0, 12, 13])[0]
    if op == "replace":
        known = _known_paths(kind)
        area = rng.choices(["content", "envelope", "metadata", "anywhere"], weights=[60, 20, 5, 15])[0]
        path = existing_path() if area == "anywhere" and existing else rng.choice(known.get(area, known["content"]))
        return Mutation(op, path, value_for(path))
    if op == "wrong-type":
        path = existing_path()
        current = _json_type(_value_at(record, path))
        other = rng.choice([name for name in VALUES_OF_TYPE if name != current])
        return Mutation(op, path, draw(VALUES_OF_TYPE[other], label="value"))
    if op == "delete":
        return Mutation(op, existing_path())
    if op == "lion-class":
        metadata = record.get("metadata")
        if isinstance(metadata, dict) and "lion_class" in metadata and rng.random() < 0.25:
            return Mutation("delete", ("metadata", "lion_class"))
        return Mutation("replace", ("metadata", "lion_class"), rng.choice(LION_CLASS_VALUES))
    # add-key
    where = rng.choice([(), *(path for path in existing if isinstance(_value_at(record, path), dict))])
    taken = set(_value_at(record, where))
    names = [name for name in NAMES if name not in taken]
    name = rng.choice(names) if names and rng.random() < 0.5 else draw(st.text(max_size=6), label="key")
    while name in taken:
        name += "_"
    return Mutation(op, (*where, name), value_for((*where, name)))


def _from_dict_verdict(record: dict[str, Any], *, check_written: bool = True) -> tuple[bool, str]:
    try:
        message = Message.from_dict(record)
    except (ValueError, TypeError) as error:  # pydantic's ValidationError is a ValueError
        return False, f"{type(error).__name__}: {error}"
    if check_written:
        # Whatever loads is of the class its discriminator names and writes a record the schema accepts.
        metadata = record.get("metadata")
        named = metadata.get("lion_class") if isinstance(metadata, dict) else None
        assert type(message) is CLASSES[kind_of_class(named)]
        written = message.to_dict()
        assert VALIDATOR.is_valid(written), (written, [str(e) for e in VALIDATOR.errors(written)])
    return True, "loads"


@pytest.mark.parametrize("kind", list(KINDS))
@FUZZ
@given(data=st.data())
def test_the_schema_and_from_dict_agree_on_mutated_records(kind: str, data: st.DataObject) -> None:
    """`role` is output-only (ADR-0006 D1): `from_dict` ignores it by design, while the schema pins it per
    kind (a forged role is invalid there). So the verdicts are compared on the record without its `role`
    key; `from_dict` must also give the same verdict with and without it, since it ignores the role."""
    record = data.draw(STRATEGIES[kind], label="record")
    mutation = data.draw(mutations(record, kind), label="mutation")
    mutated = mutation.apply(record)
    note(f"mutated: {_shown(mutated)}")
    event(mutation.label(kind))

    schema_accepts = VALIDATOR.is_valid(_without_role(mutated))
    loads, outcome = _from_dict_verdict(mutated)
    event(f"{kind}: {'accepted' if schema_accepts else 'rejected'} by the schema")
    assert loads == schema_accepts, (
        f"schema {'accepts' if schema_accepts else 'rejects'} but from_dict {outcome}; "
        f"schema errors: {[str(e) for e in VALIDATOR.errors(_without_role(mutated))]}"
    )
    assert _from_dict_verdict(_without_role(mutated), check_written=False)[0] == loads


def test_a_kind_is_named_by_its_schema_name_or_its_class_as_lionmsg_fuzz_names_it() -> None:
    assert list(generate_records(4, "Instruction", 3)) == list(generate_records(4, "instruction", 3))
    assert inlined_kind_schema("actionresponse") == inlined_kind_schema("action_response")
    assert generation_schema("System") == generation_schema("system")
    with pytest.raises(KeyError, match="unknown record kind 'Instructions'; known: message, system"):
        records("Instructions")


def test_the_schemas_handed_out_are_the_callers_to_change() -> None:
    # Review cg: both returned the cached dict the strategies draw from, so narrowing it for one test
    # changed what records() drew for every later one in the process.
    for accessor in (inlined_kind_schema, generation_schema):
        before = copy.deepcopy(accessor("system"))
        changed = accessor("system")
        changed["required"].append("channel")
        assert accessor("system") == before
    drawn = list(generate_records(20, "system", 0))
    assert any("channel" not in record for record in drawn)


@settings(max_examples=200, deadline=None)
@given(st.text(strategies._ANY_CHARACTER), st.booleans())
def test_address_text_holds_only_what_json_can_hold(text: str, paired: bool) -> None:
    # Review bt: the address strategy drew any code points, so now and then a high surrogate followed
    # by a low one, which no JSON text can hold (its readers read the two escapes as one character):
    # the round-trip property failed for a record the validator calls valid. Such text is not drawn,
    # and the writers refuse it.
    if paired:
        text = f"{text[:1]}\ud83d\ude00{text[1:]}"
    drawn = Message(content="x", sender=strategies._pairs_apart(text))
    assert Message.from_json(drawn.to_json()).to_dict() == drawn.to_dict()
    if paired:
        with pytest.raises(ValueError, match="a high surrogate followed by a low one"):
            Message(content="x", sender=text).to_json()
