"""The schemas drive the generated classes: determinism, the staleness check, and a render from a
modified copy of the schemas."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from generate import (
    OUTPUT_DIR,
    SCHEMA_DIR,
    Check,
    SchemaFileError,
    SchemaSet,
    compile_check,
    render_all,
    render_messages,
    stale_report,
)
from jsonschema.validators import Draft202012Validator

from lionmsg import MessageRole
from lionmsg.runtime.wire import matches

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return render_all(SCHEMA_DIR)


def test_rendering_is_byte_identical_and_matches_the_committed_files(rendered: dict[str, str]) -> None:
    assert render_all(SCHEMA_DIR) == rendered
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in OUTPUT_DIR.glob("*.py")}
    assert on_disk == rendered


def test_every_generated_file_says_do_not_edit_and_names_its_sources(rendered: dict[str, str]) -> None:
    for name, text in rendered.items():
        first, second, third = text.splitlines()[:3]
        assert first.startswith("# DO NOT EDIT"), name
        assert second.startswith("# sources: "), name
        assert third.startswith("# template: templates/"), name
        assert (ROOT / third.removeprefix("# template: ")).is_file(), name  # a template that exists
    content_sources = rendered["content.py"].splitlines()[1]
    assert "schemas/content/instruction.schema.json" in content_sources
    assert "schemas/envelope.schema.json" in content_sources  # its UUID pattern is inlined there
    message_sources = rendered["messages.py"].splitlines()[1]
    assert "schemas/envelope.schema.json" in message_sources
    assert "schemas/content/system.schema.json" in message_sources  # content class names come from titles
    assert rendered["__init__.py"].splitlines()[1] == "# sources: none (no schema is read)"


def test_editing_a_generated_line_is_reported_with_a_diff(tmp_path: Path, rendered: dict[str, str]) -> None:
    copy = tmp_path / "generated"
    shutil.copytree(OUTPUT_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert stale_report(rendered, copy) == ""
    target = copy / "roles.py"
    target.write_text(target.read_text().replace('USER = "user"', 'USER = "human"'))
    report = stale_report(rendered, copy)
    assert report.startswith(f"--- {copy}/roles.py (on disk)\n+++ {copy}/roles.py (from schemas)\n")
    assert '-    USER = "human"' in report
    assert '+    USER = "user"' in report


def test_a_generated_file_with_crlf_line_ends_is_stale_and_says_why(tmp_path: Path, rendered: dict[str, str]) -> None:
    # Review cq 7: the check read files with universal newlines, so a CRLF copy passed as up to date.
    copy = tmp_path / "generated"
    shutil.copytree(OUTPUT_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "roles.py"
    target.write_bytes(target.read_bytes().replace(b"\n", b"\r\n"))
    crlf = f"{copy}/roles.py: it has CRLF line ends; generated files end their lines in LF\n"
    assert stale_report(rendered, copy) == crlf
    # Edited as well: the line ends are named, and the diff shows the edit alone (review ct 7).
    target.write_bytes(target.read_bytes().replace(b'USER = "user"', b'USER = "human"'))
    report = stale_report(rendered, copy)
    assert report.startswith(crlf + f"--- {copy}/roles.py (on disk)\n")
    assert [line for line in report.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        '-    USER = "human"',
        '+    USER = "user"',
    ]


def _check_command(out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "tools" / "generate.py"), "--check", "--out", str(out)]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def test_the_check_command_fails_and_prints_the_diff(tmp_path: Path) -> None:
    copy = tmp_path / "generated"
    shutil.copytree(OUTPUT_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _check_command(copy).returncode == 0
    (copy / "messages.py").write_text((copy / "messages.py").read_text() + "# a hand edit\n")
    done = _check_command(copy)
    assert done.returncode == 1
    assert "-# a hand edit" in done.stdout
    assert "run `make generate`" in done.stderr
    (copy / "messages.py").unlink()
    done = _check_command(copy)
    assert done.returncode == 1
    assert "+class Message(MessageBehaviour):" in done.stdout


def test_a_stub_beside_the_generated_modules_is_drift_too(tmp_path: Path) -> None:
    # Review cq 6: a hand-added content.pyi passed the check, and mypy read it instead of content.py.
    copy = tmp_path / "generated"
    shutil.copytree(OUTPUT_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "content.pyi").write_text("class InstructionContent: ...\n")
    done = _check_command(copy)
    assert done.returncode == 1
    assert f"--- {copy}/content.pyi (on disk)" in done.stdout


# -- the schemas really drive the classes ---------------------------------------------------------


def _edited_schemas(tmp_path: Path, **edits: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the schemas under `tmp_path`, each file named by `edits` (its path, `/` spelled `__`,
    `.schema.json` left out) changed in place by its function."""
    schemas = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, schemas)
    for name, change in edits.items():
        path = schemas / f"{name.replace('__', '/')}.schema.json"
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
    return schemas


def _rename_roles(**names: str) -> Callable[[dict[str, Any]], None]:
    """A role.schema.json edit giving roles (by value) other member names, their values kept."""

    def change(data: dict[str, Any]) -> None:
        for value, member in names.items():
            data["x-enum-varnames"][data["enum"].index(value)] = member

    return change


@pytest.fixture
def modified_package(tmp_path: Path) -> Iterator[ModuleType]:
    """Render from a modified copy of the schemas into a throw-away package and import it."""
    confidence = {
        "description": "How sure the model is.",
        "type": ["number", "null"],
        "minimum": 0,
        "maximum": 1,
        "default": None,
        "x-lionmsg-omit": ["null"],
    }
    schemas = _edited_schemas(
        tmp_path,
        content__system=lambda d: d["properties"]["system_message"].update(default="You are a careful reviewer."),
        content__assistant_response=lambda d: d["properties"].update(confidence=confidence),
        # a minor version's loosening
        content__instruction=lambda d: d["properties"]["image_detail"]["enum"].insert(2, "max"),
        messages__instruction=lambda d: d["properties"].update(recipient={"default": "assistant"}),
        role=_rename_roles(user="HUMAN", assistant="MODEL"),
    )

    package = tmp_path / "pkg" / "regenerated"
    package.mkdir(parents=True)
    for name, text in render_all(schemas).items():
        (package / name).write_text(text)
    sys.path.insert(0, str(tmp_path / "pkg"))
    try:
        yield importlib.import_module("regenerated.messages")
    finally:
        sys.path.remove(str(tmp_path / "pkg"))
        for name in [m for m in sys.modules if m == "regenerated" or m.startswith("regenerated.")]:
            del sys.modules[name]


def test_a_changed_default_changes_the_generated_class(modified_package: ModuleType) -> None:
    content = importlib.import_module("regenerated.content")
    assert content.SystemContent().system_message == "You are a careful reviewer."
    assert modified_package.System().content.system_message == "You are a careful reviewer."


def test_an_added_optional_field_appears_with_its_checks_and_serializer(modified_package: ModuleType) -> None:
    content = importlib.import_module("regenerated.content")
    assert content.AssistantResponseContent().confidence is None
    assert content.AssistantResponseContent(confidence=0.5).to_dict() == {"assistant_response": "", "confidence": 0.5}
    assert content.AssistantResponseContent().to_dict() == {"assistant_response": ""}
    loaded = content.AssistantResponseContent.from_record({"confidence": 1})
    assert loaded.confidence == 1
    with pytest.raises(ValueError, match="confidence must be"):
        content.AssistantResponseContent.from_record({"confidence": 2})
    with pytest.raises(ValueError, match="confidence must be"):
        content.AssistantResponseContent(confidence="high")


def test_a_value_added_to_an_enum_is_checked_and_rendered_by_the_regenerated_class(
    modified_package: ModuleType,
) -> None:
    # Review bh F1: the renderer kept its own copy of the image details, so a record holding a value the
    # schema had gained loaded and validated, then could not be rendered (its turn left the chat).
    content = importlib.import_module("regenerated.content")
    details = frozenset({"low", "high", "max", "auto", None})
    assert {"image_detail": details} == content.InstructionContent._CHOICES
    record = {"instruction": "Look", "images": ["AAAA"], "image_detail": "max"}
    looked_at = content.InstructionContent.from_record(record)
    assert looked_at.rendered[1]["image_url"]["detail"] == "max"
    with pytest.raises(ValueError, match="image_detail must be one of"):
        content.InstructionContent.from_record({"images": ["AAAA"], "image_detail": "ultra"})


def test_the_choices_of_every_content_class_are_its_schemas_enums() -> None:
    from lionmsg.generated import content

    checked = 0
    for path in sorted((SCHEMA_DIR / "content").glob("*.schema.json")):
        schema = json.loads(path.read_text())
        enums = {key: frozenset(prop["enum"]) for key, prop in schema["properties"].items() if "enum" in prop}
        assert getattr(getattr(content, schema["title"]), "_CHOICES", {}) == enums, path.name
        checked += bool(enums)
    assert checked >= 1  # image_detail's, at least
    # The renderer reads image_detail's values there: an enum the generator does not see (under anyOf,
    # say) would leave it a KeyError at render time.
    assert "image_detail" in content.InstructionContent._CHOICES


def test_a_renamed_role_member_is_the_name_every_message_class_uses(modified_package: ModuleType) -> None:
    # Review cq 9: the kinds' fixed roles were spelled from the role's value (MessageRole.USER), so
    # renaming the member in x-enum-varnames generated classes that failed at import.
    roles = importlib.import_module("regenerated.roles")
    assert roles.MessageRole.HUMAN.value == "user"
    assert not hasattr(roles.MessageRole, "USER")
    instruction = modified_package.Instruction()
    assert instruction.role is roles.MessageRole.HUMAN
    assert instruction.recipient is roles.MessageRole.MODEL  # a default names its member through the same table
    assert modified_package.AssistantResponse().role is roles.MessageRole.MODEL
    assert modified_package.Instruction.from_dict(instruction.to_dict()).role is roles.MessageRole.HUMAN


def test_a_renamed_unset_member_declares_no_more_routing_overrides(tmp_path: Path) -> None:
    # Review ct 8: the template compared the kinds' defaults with the literal "MessageRole.UNSET", so
    # renaming that member re-declared sender and recipient in every typed kind.
    renamed = render_messages(SchemaSet.load(_edited_schemas(tmp_path, role=_rename_roles(unset="NOBODY"))))

    def overrides(text: str) -> list[str]:
        return [
            line.split("default=")[1].split(",")[0]
            for line in text.splitlines()
            if "= Field(default=MessageRole." in line
        ]

    original = render_messages(SchemaSet.load(SCHEMA_DIR))  # both before formatting: a field on one line
    assert len(overrides(original)) == 5  # the generic Message's two, and three the typed kinds change
    assert overrides(renamed) == [default.replace("UNSET", "NOBODY") for default in overrides(original)]
    assert "MessageRole.UNSET" not in renamed


def test_a_typed_kind_redeclares_a_routing_default_its_base_message_changed(tmp_path: Path) -> None:
    # Review cu 5: the kinds' defaults were compared with the envelope's, but the typed kinds inherit the
    # generic Message's: had message.schema.json changed its sender default, they would all take it.
    schemas = _edited_schemas(
        tmp_path, messages__message=lambda d: d["properties"].update(sender={"default": "system"})
    )
    rendered = render_messages(SchemaSet.load(schemas))
    classes = {block.split("(")[0]: block for block in rendered.split("\nclass ")[1:]}
    assert "sender: SenderRecipient | None = Field(default=MessageRole.SYSTEM," in classes["Message"]
    assert "sender: SenderRecipient | None = Field(default=MessageRole.UNSET," in classes["Instruction"]
    assert "sender:" not in classes["System"]  # its default is now the inherited one: not declared again


def test_a_kind_whose_role_is_no_role_is_refused_by_name(tmp_path: Path) -> None:
    schemas = _edited_schemas(tmp_path, messages__system=lambda d: d["properties"]["role"].update(const="narrator"))
    with pytest.raises(SchemaFileError, match=r"^messages/system.schema.json: role 'narrator' is not one of "):
        render_messages(SchemaSet.load(schemas))


def test_a_changed_kind_default_changes_the_message_class(modified_package: ModuleType) -> None:
    recipient = modified_package.Instruction().recipient
    # The throw-away package has its own MessageRole class; compare by value.
    assert (type(recipient).__name__, recipient.value) == ("MessageRole", MessageRole.ASSISTANT.value)


# -- the wire-check compiler ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"type": "string"}, ["", "x"], [None, 1, b"x"]),
        ({"type": ["string", "null"]}, ["x", None], [1, []]),
        ({"type": "number"}, [1, 1.5, -2], [True, "1", None]),
        ({"type": "integer"}, [1, -3, 1.0], [1.5, False]),  # JSON Schema: 1.0 is an integer
        ({"enum": [0, 1, None]}, [0, 1, 1.0, None], [False, True, 2]),  # a bool is not a number
        ({"enum": [True]}, [True], [1, 1.0]),
        ({"const": 0}, [0, 0.0], [False, None]),
        ({"type": "array", "items": {"type": "object"}}, [[], [{}]], [[1], {}, "x"]),
        ({"enum": ["low", "high", None]}, ["low", None], ["ultra", 0]),
        ({"const": "user"}, ["user"], ["system"]),
        ({"type": "string", "pattern": "^a+$"}, ["a", "aaa"], ["b", "a\n", ""]),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ["x", None], [1]),
        ({"allOf": [{"type": "number"}, {"minimum": 0, "maximum": 1}]}, [0, 1, 0.5], [-1, 2, "x"]),
        ({"type": "string", "minLength": 2, "maxLength": 3}, ["ab", "abc"], ["a", "abcd"]),
    ],
)
def test_compiled_checks_accept_exactly_what_the_schema_accepts(schema: dict, good: list, bad: list) -> None:
    check = compile_check(schema)
    assert isinstance(check, Check)
    namespace = {"matches": matches}
    for value in good:
        assert eval(check.expr.replace("{v}", "value"), namespace, {"value": value}), value
    for value in bad:
        assert not eval(check.expr.replace("{v}", "value"), namespace, {"value": value}), value
    if "pattern" not in schema:  # Python's jsonschema reads `$` as Python does ("a\n" passes "^a+$"), not ECMA
        validator = Draft202012Validator(schema)
        assert [validator.is_valid(value) for value in good + bad] == [True] * len(good) + [False] * len(bad)


@pytest.mark.parametrize(
    ("schema", "refusal"),
    [
        ({"type": "string", "pattern": "^v"}, "unanchored pattern"),  # JSON Schema searches; matches() is whole
        ({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}, "cannot compile oneOf"),
        ({"enum": [0, True]}, "mixes booleans and numbers"),
    ],
)
def test_what_a_wire_check_would_read_differently_is_refused(schema: dict, refusal: str) -> None:
    with pytest.raises(ValueError, match=refusal):
        compile_check(schema)


def test_a_schema_that_names_what_it_accepts_is_named_so_in_the_message_wherever_it_sits() -> None:
    uuid_text = {"type": "string", "pattern": "^[0-9a-f]{8}$"}
    named = {**uuid_text, "x-lionmsg-expected": "a short id"}
    plain = compile_check(uuid_text)
    assert plain == Check(plain.expr, "a string matching ^[0-9a-f]{8}$")
    assert compile_check(named) == Check(plain.expr, "a short id")  # the words change, the check does not
    nullable = compile_check({"anyOf": [named, {"type": "null"}]})
    assert nullable is not None
    assert nullable.expected == "a short id or null"
    listed = compile_check({"type": "array", "items": named})
    assert listed is not None
    assert listed.expected == "an array of items that are each a short id"


def test_compiling_accepts_everything_for_empty_schemas_and_refuses_unknown_keywords() -> None:
    assert compile_check({}) is None
    assert compile_check({"description": "anything"}) is None
    with pytest.raises(ValueError, match="prefixItems"):
        compile_check({"prefixItems": [{"type": "string"}]})
