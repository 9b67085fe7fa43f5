"""The `lionmsg` command (`lionmsg/cli.py`): schema, validate, fuzz and show (its standard input, its
escaping; tests/test_show.py has the rest), their output and exit status."""

from __future__ import annotations

import errno
import functools
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from lionmsg import Message, MessageManager
from lionmsg.cli import main
from lionmsg.runtime.render.table import address_label, conversation_table
from lionmsg.runtime.wire import loads_json
from lionmsg.schema import files
from lionmsg.schema.files import KINDS, schema_dir, schema_names
from lionmsg.schema.strategies import EDGE_KEY
from lionmsg.schema.validator import RecordValidator

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "cases"
VALID = sorted(CASES.glob("valid/*/*.json"))
INVALID = sorted(CASES.glob("invalid/*/*.json"))
SCRIPT = Path(sys.executable).parent / "lionmsg"
VALIDATOR = RecordValidator()

GOOD = {"id": "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f", "created_at": 1767225600.0, "content": "hi"}
BAD_ID = "0b7e9c1a-2d3f-4a5b-9c6d-7e8f9a0b1c2d"
BAD = {
    "id": BAD_ID,
    "created_at": 1767225600.0,
    "metadata": {"lion_class": "Instruction"},
    "content": {"image_detail": "ultra"},
}
BAD_REPORT = [
    f"invalid Instruction record {BAD_ID}",
    "    $.content.image_detail: 'ultra' is not one of ['low', 'high', 'auto', None]"
    " (schema: content/instruction.schema.json#/properties/image_detail/enum)",
]


def run(*argv: str | Path) -> tuple[int, str]:
    """`lionmsg ARGV` in process: the exit status and what it wrote to its output stream."""
    out = io.StringIO()
    status = main([str(arg) for arg in argv], out=out)
    return status, out.getvalue()


def summary(checked: int, invalid: int, unreadable: int = 0) -> str:
    return f"{checked} record(s) checked, {invalid} invalid, {unreadable} file(s) unreadable\n"


def lines_of(out: str) -> list[str]:
    """Output lines: JSON Lines end at "\n" only (a JSON string may hold U+2028 raw; splitlines() would cut)."""
    return out.split("\n")[:-1] if out.endswith("\n") else out.split("\n")


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # reports name files as given: relative to the repository


# -- schema ---------------------------------------------------------------------------------------


def test_schema_prints_the_record_union_by_default() -> None:
    status, out = run("schema")
    assert status == 0
    printed = json.loads(out)
    assert printed["$id"] == "https://lionmsg.dev/schemas/v1/record.schema.json"
    assert printed == json.loads((REPO / "schemas" / "record.schema.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name", ["instruction", "Instruction", "INSTRUCTION", "messages/instruction", "messages/instruction.schema.json"]
)
def test_schema_prints_one_schema_by_kind_class_or_file(name: str) -> None:
    status, out = run("schema", name)
    assert status == 0
    printed = json.loads(out)
    assert printed["$id"] == "https://lionmsg.dev/schemas/v1/messages/instruction.schema.json"
    assert printed == json.loads((REPO / "schemas/messages/instruction.schema.json").read_text(encoding="utf-8"))


def test_schema_takes_every_kind_name_fuzz_takes() -> None:
    # Review cg: `fuzz --kind actionresponse` worked where `schema actionresponse` was a usage error.
    expected = (REPO / "schemas/messages/action_response.schema.json").read_text(encoding="utf-8")
    for name in ("action_response", "ActionResponse", "actionresponse"):
        assert run("fuzz", "--count", "1", "--kind", name)[0] == 0
        status, out = run("schema", name)
        assert (status, json.loads(out)) == (0, json.loads(expected))


def test_schema_prints_a_content_schema_by_file() -> None:
    status, out = run("schema", "content/instruction.schema.json")
    assert status == 0
    assert json.loads(out)["$id"] == "https://lionmsg.dev/schemas/v1/content/instruction.schema.json"


def test_schema_bundle_is_the_published_bundle_byte_for_byte() -> None:
    status, out = run("schema", "--bundle")
    assert status == 0
    assert out == (REPO / "schemas" / "bundle.json").read_text(encoding="utf-8")
    assert schema_dir() == REPO / "schemas"


def _layout(root: Path, *, checkout: bool, stray_copy: bool, project: str = "lionmsg") -> Path:
    """A package directory `root/lionmsg` with the schemas where a checkout (`project`'s repository)
    or a wheel keeps them."""
    package = root / "lionmsg"
    package.mkdir(parents=True)
    if checkout:
        (root / "pyproject.toml").write_text(f"[project]\nname = '{project}'\n")
        shutil.copytree(REPO / "schemas", root / "schemas")
    if stray_copy or not checkout:
        (package / "_schemas").mkdir()
        (package / "_schemas" / "bundle.json").write_text('{"title": "a stale copy"}')
    return package


def test_a_checkout_reads_its_own_schemas_even_beside_a_stray_package_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review cq 8: a leftover lionmsg/_schemas/ in a checkout silently stood in for schemas/.
    monkeypatch.setattr(files, "_PACKAGE", _layout(tmp_path, checkout=True, stray_copy=True))
    assert files.schema_dir() == tmp_path / "schemas"


def test_a_copy_beside_another_projects_pyproject_and_schemas_reads_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review ct 2: `pip install -t .` or a vendored copy in an application's root read the application's
    # schemas/bundle.json as lionmsg's (or failed without one).
    package = _layout(tmp_path, checkout=True, stray_copy=True, project="myapp")
    monkeypatch.setattr(files, "_PACKAGE", package)
    assert files.schema_dir() == package / "_schemas"
    # lionmsg's own checkout without its bundle says so, instead of reading a stray package copy (review cu 1).
    package = _layout(tmp_path / "other", checkout=False, stray_copy=True)
    (tmp_path / "other" / "pyproject.toml").write_text('[project]\nname = "lionmsg"\n')
    monkeypatch.setattr(files, "_PACKAGE", package)
    with pytest.raises(FileNotFoundError, match=f"^no lionmsg schemas at {tmp_path}/other/schemas "):
        files.schema_dir()


# How each interpreter reads a pyproject's name: tomllib from 3.11, a scan of the [project] table on 3.10.
# Every interpreter runs the scan here, so the 3.10 road is tested wherever the suite runs.
_PROJECT_NAME_READERS = [
    files._project_name_scanned,
    *([files._project_name_read] if sys.version_info >= (3, 11) else []),
]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ('[project]\nname = "lionmsg"\nversion = "0.1.0"\n', "lionmsg"),
        ("[project]\n  name = 'lionmsg'  # the distribution\n", "lionmsg"),
        ('  [ project ]  # ours\n"name" = "lionmsg"\n', "lionmsg"),
        ('[project]\ndependencies = [\n  "a",\n]\nname = "lionmsg"\n', "lionmsg"),
        ('[tool.other]\nname = "lionmsg"\n\n[project]\nname = "myapp"\n', "myapp"),
        ('[project]\nname = "myapp"\n\n[tool.other]\nname = "lionmsg"\n', "myapp"),
        ('[tool.other]\nname = "lionmsg"\n', None),
        ("not toml at all [\n", None),
    ],
)
@pytest.mark.parametrize("reader", _PROJECT_NAME_READERS, ids=lambda reader: reader.__name__)
def test_the_checkout_is_told_by_the_project_tables_name(
    reader: Callable[[str], object], text: str, name: str | None
) -> None:
    # Review cu 2: a `name = "lionmsg"` line in any table counted; review cv 2: the 3.10 scan missed a
    # spaced header, a quoted key and a name after a multi-line array.
    assert reader(text) == name


def test_an_installed_package_reads_the_copy_it_carries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "_PACKAGE", _layout(tmp_path, checkout=False, stray_copy=False))
    assert files.schema_dir() == tmp_path / "lionmsg" / "_schemas"
    shutil.rmtree(tmp_path / "lionmsg" / "_schemas")
    with pytest.raises(FileNotFoundError, match=f"^no lionmsg schemas at {tmp_path}/lionmsg/_schemas "):
        files.schema_dir()


def test_schema_list_names_every_schema_file_and_the_bundle() -> None:
    status, out = run("schema", "--list")
    assert status == 0
    listed = lines_of(out)
    on_disk = sorted(p.relative_to(REPO / "schemas").as_posix() for p in (REPO / "schemas").rglob("*.schema.json"))
    assert listed == [*on_disk, "bundle.json"]
    assert listed[:-1] == schema_names()
    assert {"record.schema.json", "envelope.schema.json", "messages/instruction.schema.json"} <= set(listed)


def test_schema_unknown_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run("schema", "nope")
    assert (status, out) == (2, "")
    assert (
        capsys.readouterr().err == f"lionmsg: no schema named 'nope.schema.json'; known: {', '.join(schema_names())}\n"
    )


def test_schema_bundle_and_list_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        run("schema", "--bundle", "--list")
    assert raised.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["bundle.json", "bundle"])
def test_schema_prints_the_bundle_by_the_name_list_gives_it(name: str) -> None:
    assert run("schema", name) == (0, (REPO / "schemas" / "bundle.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["schema", "instruction", "--list"], "--list"),
        (["schema", "--list", "bundle.json"], "--list"),
        (["schema", "record", "--bundle"], "--bundle"),
    ],
)
def test_schema_a_name_with_list_or_bundle_is_a_usage_error(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        run(*argv)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: lionmsg schema ")
    assert err.endswith(f"\nlionmsg schema: error: argument {option}: not allowed with argument NAME\n")


# -- validate: the corpus -------------------------------------------------------------------------


def test_validate_accepts_every_valid_case() -> None:
    status, out = run("validate", *map(rel, VALID))
    assert (status, out) == (0, summary(len(VALID), 0))


def _reports(out: str) -> dict[str, tuple[str, list[str]]]:
    """`validate` output by file: the headline after `FILE: ` and the indented error lines under it."""
    reports: dict[str, tuple[str, list[str]]] = {}
    current: list[str] = []
    for line in lines_of(out)[:-1]:
        if line.startswith("    "):
            current.append(line)
            continue
        where, _, headline = line.partition(": ")
        assert where not in reports, f"{where} reported twice"
        current = []
        reports[where] = (headline, current)
    return reports


def test_validate_reports_every_invalid_case_one_by_one() -> None:
    status, out = run("validate", *map(rel, INVALID))
    assert status == 1
    assert out.endswith(summary(len(INVALID), len(INVALID)))
    reports = _reports(out)
    assert sorted(reports) == sorted(map(rel, INVALID))
    error_line = re.compile(r"    \$\S*: .+ \(schema: [a-z_/]+\.schema\.json#/\S*\)")
    for path in INVALID:
        record = json.loads(path.read_text(encoding="utf-8"))
        headline, errors = reports[rel(path)]
        ident = record.get("id")
        shown = "" if not isinstance(ident, str) else f" {ident}" if ident.isprintable() else f" {json.dumps(ident)}"
        assert headline == f"invalid {KINDS[VALIDATOR.kind_of(record)]} record{shown}"
        assert errors, f"{rel(path)}: no errors listed"
        assert errors == [f"    {error}" for error in VALIDATOR.errors(record)]
        for line in errors:
            assert error_line.fullmatch(line), line


def test_validate_quotes_an_id_that_would_break_the_report_line() -> None:
    status, out = run("validate", "tests/cases/invalid/message/id-uuid-trailing-newline.json")
    assert status == 1
    assert lines_of(out)[0] == (
        "tests/cases/invalid/message/id-uuid-trailing-newline.json: invalid Message record"
        ' "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f\\n"'
    )
    assert len(lines_of(out)) == 3  # the headline, one error, the summary


def test_validate_json_lines_end_at_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    separators = {**GOOD, "content": "a\u2028b\u2029c\x85d\x1ce\x1df\x1eg\x0bh\x0ci"}
    path.write_text(json.dumps(separators, ensure_ascii=False) + "\n" + json.dumps(BAD) + "\r\n", encoding="utf-8")
    assert run("validate", path) == (1, f"{path}:2: {BAD_REPORT[0]}\n{BAD_REPORT[1]}\n" + summary(2, 1))


@pytest.mark.parametrize(
    ("case", "location", "schema_path"),
    [
        (
            "instruction/image-detail-ultra.json",
            "$.content.image_detail",
            "content/instruction.schema.json#/properties/image_detail/enum",
        ),
        ("instruction/image-uri-ftp-scheme.json", "$.content.images[0]", "content/instruction.schema.json#/$defs/"),
        ("message/id-uuid-trailing-newline.json", "$.id", "envelope.schema.json#/$defs/uuid/pattern"),
        ("system/role-forged.json", "$.role", "messages/system.schema.json#/properties/role/const"),
        ("action_request/arguments-json-string.json", "$.content.arguments", "content/action_request.schema.json#/"),
        (
            "action_response/action-response-request-id-bad.json",
            "$.content.action_request_id",
            "content/action_response.schema.json#/properties/action_request_id/anyOf",
        ),
        ("message/extra-top-level-key.json", "$", "envelope.schema.json#/additionalProperties"),
    ],
)
def test_validate_names_where_the_record_and_the_rule_are(case: str, location: str, schema_path: str) -> None:
    status, out = run("validate", f"tests/cases/invalid/{case}")
    assert status == 1
    assert any(line.startswith(f"    {location}: ") and f"(schema: {schema_path}" in line for line in lines_of(out)), (
        out
    )


# -- validate: files ------------------------------------------------------------------------------


def _lines(*records: Any) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def test_validate_json_lines_reports_a_malformed_line_by_number(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(_lines(GOOD, GOOD, '{"id": oops}', "", BAD), encoding="utf-8")
    status, out = run("validate", path)
    assert status == 1
    assert out == (
        f"{path}:3: not valid JSON: Expecting value (column 8)\n"
        f"{path}:5: {BAD_REPORT[0]}\n{BAD_REPORT[1]}\n" + summary(4, 2)
    )


@pytest.mark.parametrize("suffix", [".jsonl", ".ndjson", ".JSONL", ".NDJson"])
def test_validate_json_lines_of_valid_records_pass(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"records{suffix}"
    path.write_text(_lines(GOOD, {**GOOD, "content": None}, "   "), encoding="utf-8")
    assert run("validate", path) == (0, summary(2, 0))


def test_validate_an_array_reports_items_by_index(tmp_path: Path) -> None:
    path = tmp_path / "records.json"
    path.write_text(json.dumps([GOOD, BAD, GOOD, 5]), encoding="utf-8")
    status, out = run("validate", path)
    assert status == 1
    lines = lines_of(out)
    assert lines[:2] == [f"{path}[1]: {BAD_REPORT[0]}", BAD_REPORT[1]]
    assert lines[2].startswith(f"{path}[3]: invalid Message record")
    assert out.endswith(summary(4, 2))


def test_validate_a_malformed_json_document_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text('{\n  "id": "x",\n  "created_at": ,\n}\n', encoding="utf-8")
    assert run("validate", path) == (1, f"{path}:3: not valid JSON: Expecting value (column 17)\n" + summary(1, 1))


def test_validate_an_empty_file(tmp_path: Path) -> None:
    empty_json, empty_lines = tmp_path / "empty.json", tmp_path / "empty.jsonl"
    empty_json.write_bytes(b"")
    empty_lines.write_bytes(b"")
    assert run("validate", empty_json) == (
        1,
        f"{empty_json}:1: not valid JSON: Expecting value (column 1)\n" + summary(1, 1),
    )
    assert run("validate", empty_lines) == (0, summary(0, 0))  # JSON Lines: no line, no record


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        ("1e400", "1e400 is out of range for a JSON number"),
        ("-2.5E+999", "-2.5E+999 is out of range for a JSON number"),
        ("NaN", "NaN is not a JSON value"),
        ("-Infinity", "-Infinity is not a JSON value"),
    ],
)
def test_validate_numbers_json_does_not_have_are_syntax_errors_at_their_place(
    tmp_path: Path, literal: str, message: str
) -> None:
    """The strict checks' refusals are placed as the decoder's own syntax errors are: line and column of
    the literal, past look-alikes inside strings and numbers a double holds."""
    path = tmp_path / "record.json"
    path.write_text(
        f'[\n  {{"id": "NaN [1e400", "n": 1.5e300}},\n  {{"id": "x",\n   "created_at": {literal}}}\n]', "utf-8"
    )
    assert run("validate", path) == (1, f"{path}:4: not valid JSON: {message} (column 18)\n" + summary(1, 1))
    lines = tmp_path / "records.jsonl"
    lines.write_text(f'\n{{"id": "Infinity", "created_at": {literal}}}\n', "utf-8")
    assert run("validate", lines) == (1, f"{lines}:2: not valid JSON: {message} (column 34)\n" + summary(1, 1))


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_validate_json_nested_too_deeply_is_a_syntax_error_at_the_bracket_not_read(tmp_path: Path, name: str) -> None:
    """Placed at the first bracket deeper than the decoder reads (loads_json's own tests pin which one:
    the deepest a fresh stack reads, wherever the reader is called from)."""
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        line, column = r"1", r"(\d+)"
    else:  # one bracket a line: the line is the depth
        path.write_text("[\n" * 100_000 + "]" * 100_000, encoding="utf-8")
        line, column = r"(\d+)", r"1"
    status, out = run("validate", path)
    found = re.fullmatch(
        rf"{re.escape(str(path))}:{line}: not valid JSON: arrays and objects nested too deeply to read"
        + rf" \(column {column}\)\n{re.escape(summary(1, 1))}",
        out,
    )
    assert status == 1
    assert found is not None, out
    assert 500 < int(found.group(1)) < 100_000


def test_validate_an_integer_beyond_a_double_is_invalid_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text(f'{{"id": "{GOOD["id"]}", "created_at": 1{"0" * 400}}}', encoding="utf-8")
    status, out = run("validate", path)
    assert status == 1
    assert lines_of(out)[0] == f"{path}: invalid Message record {GOOD['id']}"
    # A JSON integer is a JSON number: it breaks the bound, as JSON Schema and ajv report it.
    assert lines_of(out)[1].endswith(
        " is greater than the maximum of 1.7976931348623157e+308"
        " (schema: envelope.schema.json#/properties/created_at/maximum)"
    )


LONG = "9" * 5000  # past Python's int->str digit limit (4300 by default), so past what repr() spells


def _shown(text: str, limited: bool) -> str:
    """How an error spells the integer `text`: abbreviated where repr() refuses it, else in full."""
    if not limited:
        return text
    sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text)
    return f"{sign}{digits[:6]}...{digits[-6:]} ({len(digits)} digits)"


def test_validate_an_integer_too_long_to_spell_is_checked_and_shown_abbreviated(
    tmp_path: Path, default_digit_limit: bool
) -> None:
    shown, shown_negative = _shown(LONG, default_digit_limit), _shown("-1" + LONG, default_digit_limit)
    # jsonschema spells failing values with repr(), which refuses such an integer: that crashed validate,
    # even on a valid generic Message (the union's other branches fail and spell its content).
    ident = GOOD["id"]
    records = tmp_path / "long.jsonl"
    records.write_text(
        f'{{"id": "{ident}", "created_at": {LONG}}}\n'
        f'{{"id": "{ident}", "created_at": 1.0, "content": -{LONG}}}\n'
        f'{{"id": "{ident}", "created_at": 1.0, "metadata": {{"lion_class": "ActionResponse"}},'
        f' "content": {{"output": [{LONG}]}}}}\n'
        f'{{"id": "{ident}", "created_at": 1.0, "sender": -1{LONG}}}\n'
        f"{LONG}\n",
        encoding="utf-8",
    )
    later = tmp_path / "later.json"
    later.write_text(json.dumps(BAD), encoding="utf-8")
    assert run("validate", records, later) == (
        1,
        f"{records}:1: invalid Message record {ident}\n"
        f"    $.created_at: {shown} is greater than the maximum of 1.7976931348623157e+308"
        " (schema: envelope.schema.json#/properties/created_at/maximum)\n"
        f"{records}:4: invalid Message record {ident}\n"
        f"    $.sender: {shown_negative} is not of type 'string', 'null'"
        " (schema: envelope.schema.json#/$defs/address/type)\n"
        f"{records}:5: invalid Message record\n"
        f"    $: {shown} is not of type 'object' (schema: messages/message.schema.json#/type)\n"
        f"    $: {shown} is not of type 'object' (schema: envelope.schema.json#/type)\n"
        f"{later}: {BAD_REPORT[0]}\n{BAD_REPORT[1]}\n" + summary(6, 4),
    )


def test_the_validator_keeps_its_verdict_on_integers_too_long_to_spell(default_digit_limit: bool) -> None:
    shown = _shown(LONG, default_digit_limit)
    limit = sys.get_int_max_str_digits() if default_digit_limit else None
    long = loads_json(LONG)
    valid = {**GOOD, "content": {"n": [long, -long]}}
    assert (VALIDATOR.is_valid(valid), VALIDATOR.errors(valid)) == (True, [])
    invalid = {**GOOD, "embedding": [1.5, long]}
    assert VALIDATOR.is_valid(invalid) is False
    assert [str(error) for error in VALIDATOR.errors(invalid)] == [
        f"$.embedding[1]: {shown} is greater than the maximum of 1.7976931348623157e+308"
        " (schema: envelope.schema.json#/properties/embedding/items/maximum)"
    ]
    assert invalid["embedding"][1] == long
    assert type(invalid["embedding"][1]) is int  # the record itself is left alone
    if limit is not None:  # nothing process-wide changed
        assert sys.get_int_max_str_digits() == limit


def test_the_validator_refuses_a_non_finite_number_anywhere_in_a_decoded_record() -> None:
    # Python's json reads NaN and Infinity, no other client does: where the schemas allow any value
    # (content, metadata) no rule of theirs breaks, yet the record is not JSON (review at F2).
    record = {**GOOD, "metadata": {"x": [1, math.inf]}, "content": {"n": {"deep": [[math.nan]]}}}
    assert VALIDATOR.is_valid(record) is False
    assert [str(error) for error in VALIDATOR.errors(record)] == [
        "$.content.n.deep[0][0]: nan is not a JSON number: numbers must be finite (schema: )",
        "$.metadata.x[1]: inf is not a JSON number: numbers must be finite (schema: )",
    ]  # in record order: GOOD's content comes before the metadata added here
    # Where a rule of the schemas breaks on it, that rule alone is reported.
    record["created_at"] = -math.inf
    assert [error.location for error in VALIDATOR.errors(record)] == [
        "$.created_at",
        "$.content.n.deep[0][0]",
        "$.metadata.x[1]",
    ]
    assert VALIDATOR.errors(record)[0].schema_path == "envelope.schema.json#/properties/created_at/type"
    assert (VALIDATOR.is_valid({**GOOD, "content": {"n": [1.5, 10**400]}}), VALIDATOR.errors(GOOD)) == (True, [])


def test_the_validators_errors_come_in_record_order() -> None:
    # Indices by number (images[2] before images[10]) and keys as the record writes them (id first).
    images = ["AAAA"] * 11
    images[2], images[10] = "a!", "b!"
    record = {"id": "not an id", "created_at": "later", "metadata": {"lion_class": "Instruction"}}
    record["content"] = {"images": images}
    paths = [error.location for error in VALIDATOR.errors(record)]
    assert paths == ["$.id", "$.created_at", "$.content.images[2]", "$.content.images[10]"]


def test_validate_reads_json_lines_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(_lines(GOOD, "[1,", BAD)))
    status, out = run("validate", "-")
    assert status == 1
    assert out == f"-:2: not valid JSON: Expecting value (column 4)\n-:3: {BAD_REPORT[0]}\n{BAD_REPORT[1]}\n" + summary(
        3, 2
    )


def test_validate_reads_a_pretty_printed_record_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(BAD, indent=2) + "\n"))
    assert run("validate", "-") == (1, f"-: {BAD_REPORT[0]}\n{BAD_REPORT[1]}\n" + summary(1, 1))
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(GOOD, indent=2)))
    assert run("validate", "-") == (0, summary(1, 0))


@pytest.mark.parametrize("indent", [None, 2])
def test_validate_reads_an_array_from_stdin_item_by_item(monkeypatch: pytest.MonkeyPatch, indent: int | None) -> None:
    # One JSON value on stdin is read as a .json file is, on one line or several: an array is records.
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps([GOOD, BAD], indent=indent) + "\n"))
    assert run("validate", "-") == (1, f"-[1]: {BAD_REPORT[0]}\n{BAD_REPORT[1]}\n" + summary(2, 1))


@pytest.mark.parametrize(
    ("text", "status", "expected"),
    [
        ("", 0, summary(0, 0)),  # nothing at all: JSON Lines of no line
        ("\n  \n", 0, summary(0, 0)),
        (json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n", 0, summary(2, 0)),  # two values: JSON Lines
        ("[1,\n", 1, "-:1: not valid JSON: Expecting value (column 4)\n" + summary(1, 1)),
        # A log whose first record was torn to a bare `{`: JSON Lines still, for the records on the lines
        # after it (review bj F4).
        (
            "{\n" + json.dumps(GOOD) + "\n",
            1,
            "-:1: not valid JSON: Expecting property name enclosed in double quotes (column 2)\n" + summary(2, 1),
        ),
        # A broken first record on a line of its own: still JSON Lines (its first line is no bare bracket).
        (
            "[1\n" + json.dumps(GOOD) + "\n",
            1,
            "-:1: not valid JSON: Expecting ',' delimiter (column 3)\n" + summary(2, 1),
        ),
    ],
)
def test_validate_stdin_that_is_not_one_json_value_is_json_lines(
    monkeypatch: pytest.MonkeyPatch, text: str, status: int, expected: str
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert run("validate", "-") == (status, expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A pretty-printed record with a comma missing: its one error, where a .json file gets it (review bh F2:
        # each of its lines was a "record" that was not JSON).
        ('{\n  "id": "x"\n  "created_at": 1\n}\n', "-:3: not valid JSON: Expecting ',' delimiter (column 3)"),
        ("[\n  1,\n", "-:3: not valid JSON: Expecting value (column 1)"),
        # `jq .`'s output for two records: one document with more after it, as in a .json file.
        (
            json.dumps(GOOD, indent=2) + "\n" + json.dumps(GOOD, indent=2) + "\n",
            "-:{}: not valid JSON: Extra data (column 1)",
        ),
    ],
)
def test_validate_stdin_that_is_a_broken_document_gets_its_one_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, expected: str
) -> None:
    expected = expected.format(json.dumps(GOOD, indent=2).count("\n") + 2)
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert run("validate", "-") == (1, expected + "\n" + summary(1, 1))
    path = tmp_path / "same.json"
    path.write_text(text)
    assert run("validate", path) == (1, expected.replace("-:", f"{path}:", 1) + "\n" + summary(1, 1))


def test_validate_stdin_nested_too_deeply_is_a_line_that_is_not_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("[" * 100_000 + "]" * 100_000))
    status, out = run("validate", "-")
    found = re.fullmatch(
        r"-:1: not valid JSON: arrays and objects nested too deeply to read \(column (\d+)\)\n"
        + re.escape(summary(1, 1)),
        out,
    )
    assert status == 1
    assert found is not None, out
    assert 500 < int(found.group(1)) < 100_000


def test_validate_closed_stdin_is_an_unreadable_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", None)  # what Python leaves when started with fd 0 closed
    assert run("validate", "-", rel(VALID[0])) == (2, summary(1, 0, 1))
    assert capsys.readouterr().err == "lionmsg: cannot read -: standard input is closed\n"


def test_validate_a_missing_file_is_a_usage_error_and_the_rest_is_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"
    status, out = run("validate", missing, rel(VALID[0]))
    assert (status, out) == (2, summary(1, 0, 1))
    assert capsys.readouterr().err == f"lionmsg: cannot read {missing}: No such file or directory\n"


def test_validate_non_utf8_bytes_on_stdin_are_the_same_usage_error_as_in_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A C.UTF-8 locale's stdin lets undecodable bytes through as surrogates: the bytes are decoded here.
    raw = io.BytesIO(b'{"content": "caf\xe9"}\n')
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape"))
    assert run("validate", "-") == (2, summary(0, 0, 1))
    assert capsys.readouterr().err == "lionmsg: cannot read -: not UTF-8 text (invalid continuation byte at byte 16)\n"


def test_validate_a_directory_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("validate", tmp_path) == (2, summary(0, 0, 1))
    assert capsys.readouterr().err == f"lionmsg: cannot read {tmp_path}: Is a directory\n"


def test_validate_non_utf8_bytes_are_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"content": "caf\xe9"}')
    assert run("validate", path) == (2, summary(0, 0, 1))
    assert (
        capsys.readouterr().err
        == f"lionmsg: cannot read {path}: not UTF-8 text (invalid continuation byte at byte 16)\n"
    )


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_validate_utf16_is_unreadable_and_a_utf8_bom_is_invalid_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    record = VALID[0].read_text(encoding="utf-8").strip() if suffix == ".json" else '{"content": {}}'
    utf16 = tmp_path / f"utf16{suffix}"
    utf16.write_bytes(record.encode("utf-16"))  # with its byte-order mark
    assert run("validate", utf16) == (2, summary(0, 0, 1))
    assert capsys.readouterr().err == f"lionmsg: cannot read {utf16}: not UTF-8 text (invalid start byte at byte 0)\n"
    bom = tmp_path / f"bom{suffix}"
    bom.write_bytes(b"\xef\xbb\xbf" + record.encode())  # decodes: U+FEFF, then the record
    status, out = run("validate", bom)
    assert (status, out) == (
        1,
        f"{bom}:1: not valid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) (column 1)\n{summary(1, 1, 0)}",
    )


def test_validate_an_unreadable_file_wins_over_an_invalid_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(BAD), encoding="utf-8")
    status, out = run("validate", bad, tmp_path / "missing.jsonl")
    assert status == 2
    assert out.endswith(summary(1, 1, 1))
    assert capsys.readouterr().err.startswith("lionmsg: cannot read ")


def test_validate_needs_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        run("validate")
    assert raised.value.code == 2
    assert "the following arguments are required: FILE" in capsys.readouterr().err


# -- fuzz -----------------------------------------------------------------------------------------


def test_fuzz_emits_valid_records_of_the_kind_reproducibly(tmp_path: Path) -> None:
    status, out = run("fuzz", "--count", "5", "--kind", "instruction", "--seed", "3")
    assert status == 0
    lines = lines_of(out)
    assert len(lines) == 5
    records = [loads_json(line) for line in lines]
    assert all(VALIDATOR.kind_of(record) == "instruction" for record in records)
    path = tmp_path / "fuzzed.jsonl"
    path.write_text(out, encoding="utf-8")
    assert run("validate", path) == (0, summary(5, 0))
    assert run("fuzz", "--count", "5", "--kind", "instruction", "--seed", "3") == (0, out)
    assert run("fuzz", "--count", "5", "--kind", "Instruction", "--seed", "3") == (0, out)  # the class name works too


def test_fuzz_without_a_kind_emits_records_of_any_kind() -> None:
    status, out = run("fuzz", "--count", "12", "--seed", "1")
    assert status == 0
    records = [loads_json(line) for line in lines_of(out)]  # json.loads refuses its long integers
    assert len(records) == 12
    assert all(VALIDATOR.is_valid(record) for record in records)


def test_fuzz_gives_every_record_its_own_id() -> None:
    # Hypothesis favours simple values (the all-zero UUID came 15 times in 200 records): records meant for
    # histories and stores, where a repeated id replaces a message, get a fresh id instead of a repeat.
    status, out = run("fuzz", "--count", "120", "--kind", "system", "--seed", "1")
    assert status == 0
    ids = [UUID(loads_json(line)["id"]) for line in lines_of(out)]
    assert len(ids) == len(set(ids)) == 120
    assert run("fuzz", "--count", "120", "--kind", "system", "--seed", "1") == (status, out)  # still reproducible


def test_fuzz_count_zero_emits_nothing() -> None:
    assert run("fuzz", "--count", "0", "--kind", "system") == (0, "")


def test_fuzz_unknown_kind_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("fuzz", "--kind", "nope") == (2, "")
    assert capsys.readouterr().err == f"lionmsg: unknown kind 'nope'; choose from {', '.join(KINDS)}\n"


@pytest.mark.parametrize(("count", "message"), [("-1", "must not be negative: -1"), ("x", "not a whole number: 'x'")])
def test_fuzz_bad_count_is_an_argparse_error(count: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        run("fuzz", "--count", count)
    assert raised.value.code == 2
    assert f"lionmsg fuzz: error: argument --count: {message}" in capsys.readouterr().err


# -- show: standard input, unrenderable content, escaping ------------------------------------------

RECORD_ID = "00000000-0000-4000-8000-000000000001"
# Schema-valid, and its content a lone surrogate (JSON may escape one): no output encoding can hold it.
SURROGATE_RECORD = f'{{"id": "{RECORD_ID}", "created_at": 1.0, "content": "x \\ud800"}}\n'
SURROGATE_REPLY = json.dumps(
    {
        "id": RECORD_ID,
        "created_at": 1.0,
        "metadata": {"lion_class": "AssistantResponse"},
        "content": {"assistant_response": "x \ud800"},
        "sender": "bob\udcff",
    }
)


def _deep_request() -> dict[str, Any]:
    """An ActionRequest record, schema-valid, whose arguments are nested too deeply to render."""
    arguments: Any = 1
    for _ in range(600):
        arguments = {"a": arguments}
    return {
        "id": RECORD_ID,
        "created_at": 1.0,
        "metadata": {"lion_class": "ActionRequest"},
        "content": {"function": "f", "arguments": arguments},
    }


def _history() -> MessageManager:
    manager = MessageManager()
    manager.add_message(instruction="Add 2 and 2.", sender="user")
    manager.add_message(assistant_response="4")
    return manager


@pytest.mark.parametrize("form", ["json lines", "array", "pretty array"])
def test_show_reads_records_from_stdin(monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    manager = _history()
    records = [message.to_dict() for message in manager]
    text = {
        "json lines": "".join(json.dumps(record) + "\n" for record in records),
        "array": json.dumps(records),
        "pretty array": json.dumps(records, indent=2),
    }[form]
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert run("show", "-") == (0, f"-\n{conversation_table(manager)}\n\n")


def test_show_refuses_a_store_or_a_snapshot_on_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lionmsg.store import SQLiteStore, save_snapshot

    database, snapshot = tmp_path / "h.db", tmp_path / "snap.json"
    with SQLiteStore(database) as store:
        store.attach(_history(), "first")
    save_snapshot(_history(), snapshot)
    for path, what in [(database, "a SQLite store"), (snapshot, "a snapshot")]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes()), encoding="utf-8"))
        assert run("show", "-") == (2, "")
        assert capsys.readouterr().err == f"lionmsg: show -: {what} cannot be read from standard input; name its file\n"


def test_show_closed_stdin_is_an_unreadable_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    assert run("show", "-") == (2, "")
    assert capsys.readouterr().err == "lionmsg: cannot read -: standard input is closed\n"


def test_show_chat_marks_a_message_that_cannot_render_as_the_table_does(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(_deep_request()) + "\n", encoding="utf-8")
    marker = "<cannot render: ValueError: cannot render a value nested this deeply>"
    rule = "-  ------  -------------  -------------  " + "-" * len(marker)
    table = (
        f"#  role    class          from → to      content\n{rule}\n0  action  ActionRequest  unset → unset  {marker}\n"
    )
    assert run("show", path) == (0, f"{path}\n{table}\n")
    chat = json.dumps([{"role": "action", "content": marker}], indent=2)
    assert run("show", path, "--chat") == (0, f"{path}\n{table}{chat}\n\n")


def test_show_escapes_what_a_terminal_would_act_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    record = {
        "id": RECORD_ID,
        "created_at": 1.0,
        "metadata": {"lion_class": "AssistantResponse"},
        "content": {"assistant_response": "a\x1b[2Jb\u202ec\x85d\ud800"},
        "sender": "bo\nb\x1b[31m",
        "recipient": "café",
    }
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(record) + "\n"))
    assert run("show", "-", "--chat") == (
        0,
        "-\n"
        "#  role       class              from → to                 content\n"
        "-  ---------  -----------------  ------------------------  --------------------------\n"
        '0  assistant  AssistantResponse  "bo\\nb\\u001b[31m" → café  a\\u001b[2Jb\\u202ec d\\ud800\n'
        "[\n"
        "  {\n"
        '    "role": "assistant",\n'
        '    "content": "a\\u001b[2Jb\\u202ec\\u0085d\\ud800"\n'
        "  }\n"
        "]\n\n",
    )  # U+0085 is a line break: folded to a space in the table, escaped (as JSON reads it back) in the chat
    assert capsys.readouterr().err == ""


def test_address_labels_quote_names_that_are_not_printable() -> None:
    assert address_label("bo\nb") == '"bo\\nb"'
    assert address_label("\x1b[31mred") == '"\\u001b[31mred"'
    assert address_label("café") == "café"
    assert address_label(UUID(RECORD_ID), {UUID(RECORD_ID): "a\tb"}) == '"a\\tb"'


def test_a_branch_name_that_is_not_printable_is_quoted(tmp_path: Path) -> None:
    from lionmsg.store import SQLiteStore

    database = tmp_path / "h.db"
    with SQLiteStore(database) as store:
        store.attach(_history(), "x\x1b[2Jy")
    status, out = run("show", database)
    assert status == 0
    assert lines_of(out)[0] == 'branch "x\\u001b[2Jy" (2 messages)'


def test_a_store_another_client_holds_locked_is_unreadable_not_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from lionmsg.store import SQLiteStore

    database = tmp_path / "h.db"
    with SQLiteStore(database) as store:
        store.attach(_history(), "b")
    monkeypatch.setitem(SQLiteStore.__init__.__kwdefaults__, "timeout", 0.05)  # not show's 5 s wait
    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        assert run("show", database) == (2, "")
    finally:
        holder.close()
    assert capsys.readouterr().err == f"lionmsg: cannot open store {str(database)!r}: database is locked\n"
    assert run("show", database)[0] == 0


def test_show_reads_a_json_lines_file_named_in_capitals_as_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "LOG.JSONL"
    path.write_text(_lines(GOOD, GOOD), encoding="utf-8")
    status, out = run("show", path)
    assert status == 0
    assert lines_of(out)[0] == f"{path}"


# -- the installed console script -----------------------------------------------------------------


def _script(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = None if env is None else {**os.environ, **env}
    return subprocess.run(
        [SCRIPT, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
        env=environment,
    )


def test_python_dash_m_lionmsg_is_the_command_with_its_exit_status() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "lionmsg", "schema", "--list"], capture_output=True, text=True, timeout=120, check=False
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == _script("schema", "--list").stdout
    missing = subprocess.run(
        [sys.executable, "-m", "lionmsg", "validate", "no-such-file.json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert missing.returncode == 2
    assert "no-such-file.json" in missing.stderr


def test_console_script_validates_the_corpus() -> None:
    done = _script("validate", *map(rel, VALID))
    assert (done.returncode, done.stdout, done.stderr) == (0, summary(len(VALID), 0), "")
    done = _script("validate", *map(rel, INVALID))
    assert done.returncode == 1
    assert sorted(_reports(done.stdout)) == sorted(map(rel, INVALID))


def test_console_script_prints_the_schema_list() -> None:
    done = _script("schema", "--list")
    assert (done.returncode, done.stderr) == (0, "")
    assert lines_of(done.stdout) == [*schema_names(), "bundle.json"]


def test_console_script_pipes_fuzz_into_validate() -> None:
    fuzzed = _script("fuzz", "--count", "3", "--kind", "action_response", "--seed", "7")
    assert (fuzzed.returncode, fuzzed.stderr) == (0, "")
    done = _script("validate", "-", stdin=fuzzed.stdout)
    assert (done.returncode, done.stdout, done.stderr) == (0, summary(3, 0), "")


def test_console_script_pipes_fuzz_into_show() -> None:
    fuzzed = _script("fuzz", "--count", "3", "--kind", "system", "--seed", "7")
    assert (fuzzed.returncode, fuzzed.stderr) == (0, "")
    done = _script("show", "-", stdin=fuzzed.stdout)
    assert (done.returncode, done.stderr) == (0, "")
    lines = lines_of(done.stdout)
    assert lines[0] == "-"
    assert lines[1].startswith("#  role    class   from → to ")
    assert [line.split()[:3] for line in lines[3:6]] == [[str(i), "system", "System"] for i in range(3)]
    assert lines[6:] == [""]


@pytest.mark.parametrize(
    ("args", "stdin", "status"),
    [
        (["validate", "tests/cases/missing.json"], "", 2),
        (["validate", "tests/cases"], "", 2),
        (["validate", "-"], "\x00\x01 not json\n", 1),
        (["validate", "-"], '{"id": "x", "created_at": 1' + "0" * 400 + "}\n", 1),
        (["validate", "-"], '[{"id": []}, 3, null]\n', 1),
        (["validate", "-"], '{"metadata": {"lion_class": {"nested": 1}}}\n', 1),
        (["validate", "-"], SURROGATE_RECORD, 0),
        (["validate", "-"], "[" * 100_000, 1),
        (["show", "tests/cases/missing.json"], "", 2),
        (["show", "tests/cases"], "", 2),
        (["show", "-"], SURROGATE_RECORD, 0),
        (["show", "-", "--chat"], SURROGATE_REPLY, 0),
        (["show", "-", "--chat"], json.dumps(_deep_request()) + "\n", 0),
        (["show", "-"], '{"id": 3}\n', 1),
        (["show", "-"], "\x00\x01 not json\n", 1),
        (["show", "-"], "[" * 100_000, 1),
        (["show", "-", "--branch", "x"], SURROGATE_RECORD, 2),
        (["show", "-", "--branch", ""], SURROGATE_RECORD, 2),
        (["validate", "-"], '{"id": "x", "created_at": ' + "9" * 5000 + "}\n", 1),
        (["validate", "-"], f'{{"id": "{RECORD_ID}", "created_at": 1, "content": {"9" * 5000}}}\n', 0),
        (["show", "-"], '{"format": "lionmsg-snapshot", "version": 1, "kind": "manager", "data": {}}', 2),
        (["schema", "bundle.json", "--list"], "", 2),
        (["schema", "../../etc/passwd"], "", 2),
        (["fuzz", "--kind", "nope"], "", 2),
        (["fuzz", "--count", "-1"], "", 2),
        (["fuzz", "--seed", "abc"], "", 2),
        (["frobnicate"], "", 2),
        ([], "", 2),
    ],
)
def test_bad_input_never_prints_a_traceback(args: list[str], stdin: str, status: int) -> None:
    for env in ({}, {"PYTHONIOENCODING": "ascii"}):  # also where the output can hold no non-ASCII character
        done = _script(*args, stdin=stdin, env=env)
        assert done.returncode == status, done.stderr
        assert "Traceback" not in done.stdout + done.stderr
        if status == 2:
            assert done.stderr.startswith(("lionmsg: ", "usage: lionmsg")), done.stderr


@pytest.mark.parametrize("command", ["validate", "show"])
def test_closed_stdin_is_an_unreadable_input_not_a_traceback(command: str) -> None:
    done = subprocess.run(
        f"{shlex.quote(str(SCRIPT))} {command} - <&-", shell=True, capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode == 2
    assert done.stdout == ("" if command == "show" else summary(0, 0, 1))
    assert done.stderr == "lionmsg: cannot read -: standard input is closed\n"


@pytest.mark.parametrize(("records", "status"), [([GOOD] * 2000, 0), ([GOOD] * 1999 + [BAD], 1)])
def test_validate_keeps_its_verdict_when_the_reader_leaves(
    tmp_path: Path, records: list[dict[str, Any]], status: int
) -> None:
    # `lionmsg validate ... | head`: the report is cut short, every record is still checked, and the exit
    # status (what `set -o pipefail` reports) is the verdict on all of them; no BrokenPipeError anywhere.
    source = tmp_path / "records.jsonl"
    source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    process = subprocess.Popen(
        [SCRIPT, "validate", str(source)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line is written
    errors = process.stderr.read()
    assert (process.wait(timeout=120), errors) == (status, b"")


def test_text_the_output_cannot_encode_is_escaped() -> None:
    shown = _script("show", "-", stdin=SURROGATE_RECORD)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert lines_of(shown.stdout)[3] == "0  unset  Message  unset → unset  x \\ud800"
    shown = _script("show", "-", stdin=SURROGATE_RECORD, env={"PYTHONIOENCODING": "ascii"})
    assert (shown.returncode, shown.stderr) == (0, "")
    assert lines_of(shown.stdout) == [  # drawn in ASCII, so that it stays aligned (review aw F8)
        "-",
        "#  role   class    from -> to      content",
        "-  -----  -------  --------------  --------",
        "0  unset  Message  unset -> unset  x \\ud800",
        "",
    ]
    ultra = {**BAD, "content": {"image_detail": "ültra"}}
    checked = _script("validate", "-", stdin=json.dumps(ultra, ensure_ascii=False), env={"PYTHONIOENCODING": "ascii"})
    assert (checked.returncode, checked.stderr) == (1, "")
    assert lines_of(checked.stdout)[1] == (
        "    $.content.image_detail: '\\xfcltra' is not one of ['low', 'high', 'auto', None]"
        " (schema: content/instruction.schema.json#/properties/image_detail/enum)"
    )


def test_a_file_name_that_is_not_utf8_is_escaped(tmp_path: Path) -> None:
    path = tmp_path / os.fsdecode(b"x\xff.json")  # its name reaches Python as "x\udcff.json"
    shown_name = f'"{tmp_path}/x\\udcff.json"'  # quoted as JSON, as every name holding what a terminal cannot print
    strict = {"PYTHONIOENCODING": "utf-8:strict"}
    path.write_text(json.dumps(BAD), encoding="utf-8")
    checked = _script("validate", str(path), env=strict)
    assert (checked.returncode, checked.stdout, checked.stderr) == (
        1,
        f"{shown_name}: {BAD_REPORT[0]}\n{BAD_REPORT[1]}\n" + summary(1, 1),
        "",
    )
    missing = _script("validate", str(tmp_path / os.fsdecode(b"y\xff.json")), env=strict)
    assert (missing.returncode, missing.stderr) == (
        2,
        f'lionmsg: cannot read "{tmp_path}/y\\udcff.json": No such file or directory\n',
    )
    path.write_text(json.dumps(GOOD), encoding="utf-8")
    shown = _script("show", str(path), env=strict)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert lines_of(shown.stdout)[0] == shown_name


def test_fuzz_on_an_ascii_terminal_still_writes_json() -> None:
    unicode = _script("fuzz", "--count", "20", "--seed", "5")
    ascii_only = _script("fuzz", "--count", "20", "--seed", "5", env={"PYTHONIOENCODING": "ascii"})
    assert (ascii_only.returncode, ascii_only.stderr) == (0, "")
    assert ascii_only.stdout.isascii()
    # Read exactly: the stream draws integers past json.loads' digit limit and lone surrogates.
    written = [loads_json(line) for line in lines_of(unicode.stdout)]
    assert [loads_json(line) for line in lines_of(ascii_only.stdout)] == written
    assert not unicode.stdout.isascii()  # the seed gives non-ASCII text: the case is exercised


def test_fuzz_writes_the_values_json_dumps_refuses_or_no_utf_8_output_holds() -> None:
    # An integer past Python's int-to-text digit limit (json.dumps refuses it) and a lone surrogate
    # (raw, no UTF-8 output can encode it): written as lionmsg writes records (review at F5).
    done = _script("fuzz", "--count", "120", "--seed", "2")
    assert (done.returncode, done.stderr) == (0, "")
    edges = [
        record["metadata"][EDGE_KEY]
        for record in map(loads_json, lines_of(done.stdout))
        if EDGE_KEY in (record.get("metadata") or {})
    ]
    kinds = {kind for edge in edges for kind in edge}
    assert {"integer", "text"} <= kinds, kinds
    checked = _script("validate", "-", stdin=done.stdout)
    assert (checked.returncode, checked.stdout.splitlines()[-1]) == (0, summary(120, 0).strip())


def test_a_file_name_a_terminal_would_act_on_is_quoted_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = tmp_path / "x\x1b[2J\x1b]0;pwned\x07\nfake.jsonl"
    records.write_text(json.dumps(GOOD) + "\n" + json.dumps(BAD) + "\n", encoding="utf-8")
    shown = f'"{tmp_path}/x\\u001b[2J\\u001b]0;pwned\\u0007\\nfake.jsonl"'
    assert run("validate", records) == (1, f"{shown}:2: {BAD_REPORT[0]}\n{BAD_REPORT[1]}\n" + summary(2, 1))
    assert run("show", records) == (1, "")
    error = capsys.readouterr().err
    assert error.startswith(f"lionmsg: {shown}:2: not a message record: 1 validation error for Instruction\\n")
    assert error.count("\n") == 1  # pydantic's message is several lines: one line here
    good = tmp_path / "y\u202e.json"
    good.write_text(json.dumps(GOOD), encoding="utf-8")
    status, out = run("show", good)
    assert (status, lines_of(out)[0]) == (0, f'"{tmp_path}/y\\u202e.json"')
    missing = tmp_path / "z\x1b[1m.json"
    assert run("validate", missing) == (2, summary(0, 0, 1))
    assert capsys.readouterr().err == f'lionmsg: cannot read "{tmp_path}/z\\u001b[1m.json": No such file or directory\n'
    assert run("show", missing) == (2, "")
    assert capsys.readouterr().err == f'lionmsg: cannot read "{tmp_path}/z\\u001b[1m.json": No such file or directory\n'


def test_validate_escapes_what_a_terminal_would_act_on_in_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No schema rule sits under an arbitrary key today, but a path in a record or a loader's message may
    # quote one: the report escapes whatever reaches it.
    from lionmsg.schema.validator import RecordError

    found = [RecordError("$.content['a\x1b[2J']", "envelope.schema.json#/", "bad\u202e\nvalue")]
    monkeypatch.setattr(RecordValidator, "errors", lambda self, record: found)
    path = tmp_path / "record.json"
    path.write_text(json.dumps(GOOD), encoding="utf-8")
    assert run("validate", path) == (
        1,
        f"{path}: invalid Message record {GOOD['id']}\n"
        "    $.content['a\\u001b[2J']: bad\\u202e\\nvalue (schema: envelope.schema.json#/)\n" + summary(1, 1),
    )


# -- the output: no standard output, a reader who left, a full disk --------------------------------

OUTPUT_CASES = [
    (["validate", rel(VALID[0])], 0, ""),
    (["validate", rel(INVALID[0])], 1, ""),
    (
        ["validate", "tests/cases/missing.json", rel(INVALID[0])],
        2,
        "lionmsg: cannot read tests/cases/missing.json: No such file or directory\n",
    ),
    (["schema", "--bundle"], 0, ""),
    (["fuzz", "--count", "3", "--seed", "1"], 0, ""),
    (["show", rel(VALID[0])], 0, ""),
    (["show", rel(VALID[0]), "--branch", "x"], 2, "lionmsg: --branch applies to a SQLite store only\n"),
    (["--help"], 0, ""),  # help is a command's output too (argparse ignores a failed write of it)
    (["fuzz", "--help"], 0, ""),
]


def _shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=True, capture_output=True, text=True, cwd=REPO, timeout=120, check=False)


@pytest.mark.parametrize(("args", "status", "errors"), OUTPUT_CASES)
def test_a_closed_stdout_is_a_reader_that_left_before_the_first_line(args: list[str], status: int, errors: str) -> None:
    # `lionmsg ... >&-`: Python leaves sys.stdout None. validate checks everything and its status is the
    # verdict; the other commands stop with status 0, as when a reader leaves (usage errors stay errors).
    done = _shell(f"{shlex.quote(str(SCRIPT))} {shlex.join(args)} >&-")
    assert (done.returncode, done.stdout, done.stderr) == (status, "", errors)


def test_no_stdout_in_process_keeps_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["validate", rel(VALID[0])]) == 0
    assert main(["validate", rel(INVALID[0]), rel(VALID[0])]) == 1
    assert main(["fuzz", "--count", "2"]) == 0


@pytest.mark.parametrize(("args", "status", "errors"), OUTPUT_CASES)
def test_an_output_that_cannot_be_written_is_one_line_and_status_2(args: list[str], status: int, errors: str) -> None:
    # /dev/full refuses every write with ENOSPC, as a full disk does: the command stops there.
    done = _shell(f"{shlex.quote(str(SCRIPT))} {shlex.join(args)} >/dev/full")
    full = "lionmsg: cannot write the output: No space left on device\n"
    written_nothing = status == 2 and args[0] == "show"  # a usage error before anything is written
    assert (done.returncode, done.stdout, done.stderr) == (2, "", errors if written_nothing else errors + full)


class _FullStream(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_write_error_of_the_given_stream_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--list"], out=_FullStream()) == 2
    assert capsys.readouterr().err == "lionmsg: cannot write the output: No space left on device\n"


@pytest.mark.parametrize(
    "args", [["fuzz", "--count", "50"], ["schema", "--bundle"], ["show", rel(VALID[0])], ["--help"]]
)
def test_the_other_commands_stop_with_status_0_when_the_reader_leaves(args: list[str]) -> None:
    process = subprocess.Popen([SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()
    errors = process.stderr.read()
    assert (process.wait(timeout=120), errors) == (0, b"")


@pytest.mark.parametrize("args", [["--help"], ["show", "-h"]])
def test_help_goes_to_the_given_stream(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    with pytest.raises(SystemExit) as raised:
        main(args, out=out)
    assert raised.value.code == 0
    prog = " ".join(["lionmsg", *args[:-1]])
    assert out.getvalue().startswith(f"usage: {prog} [-h]")
    assert capsys.readouterr() == ("", "")


def test_help_ends_in_system_exit_whatever_becomes_of_its_output(capsys: pytest.CaptureFixture[str]) -> None:
    # As argparse's help does; the status says what became of it: a full disk is 2, a reader who left 0.
    with pytest.raises(SystemExit) as raised:
        main(["--help"], out=_FullStream())
    assert raised.value.code == 2
    assert capsys.readouterr() == ("", "lionmsg: cannot write the output: No space left on device\n")
    closed = io.StringIO()
    closed.close()
    with pytest.raises(SystemExit) as raised:
        main(["schema", "--help"], out=closed)
    assert raised.value.code == 0
    assert capsys.readouterr() == ("", "")


def test_a_usage_error_with_standard_error_closed_writes_nothing_to_the_output() -> None:
    # argparse writes its usage line to standard output when there is no standard error.
    done = _shell(f"{shlex.quote(str(SCRIPT))} fuzz --count x 2>&-")
    assert (done.returncode, done.stdout) == (2, "")


def _nested(levels: int) -> Any:
    deep: Any = []
    for _ in range(levels):
        deep = [deep]
    return deep


def _deep_in_the_stack(levels: int, call: Callable[[], bool]) -> bool:
    return _deep_in_the_stack(levels - 1, call) if levels else call()


def test_a_valid_record_however_deep_its_free_content_is_valid_also_from_deep_in_the_stack() -> None:
    """No rule constrains a generic message's content, and the verdict never spells a value (jsonschema's
    error messages do, with repr, which runs out of recursion hundreds of levels down)."""
    for levels in (960, 100_000):
        record = {"id": "00000000-0000-4000-8000-000000000001", "created_at": 1.0, "content": _nested(levels)}
        assert _deep_in_the_stack(50, functools.partial(VALIDATOR.is_valid, record))
        assert VALIDATOR.errors(record) == []


def test_an_invalid_record_too_deep_for_jsonschema_to_spell_is_one_error_not_a_traceback() -> None:
    """jsonschema recurses per level and spells a failing value with repr: an invalid record nested too
    deeply for that is reported with one error (`validate` reports it as an invalid record)."""
    record = {
        "id": "00000000-0000-4000-8000-000000000001",
        "created_at": 1.0,
        "metadata": {"lion_class": "Instruction"},
        "content": _nested(100_000),  # too deep on every supported Python (3.13 validated 5,000 levels)
    }
    assert not VALIDATOR.is_valid(record)
    assert [str(error) for error in VALIDATOR.errors(record)] == [
        "$: nested too deeply to validate (jsonschema recurses per level) (schema: )"
    ]


def test_a_file_and_standard_input_holding_the_same_bytes_get_the_same_verdict(tmp_path: Path) -> None:
    # JSON Lines end at "\n" only: a lone CR is white space inside a line, from a file as from stdin.
    text = json.dumps(GOOD) + "\r" + json.dumps(GOOD) + "\r"
    path = tmp_path / "cr.jsonl"
    path.write_bytes(text.encode())
    status, out = run("validate", path)
    from_stdin = _script("validate", "-", stdin=text)
    assert (status, from_stdin.returncode) == (1, 1)
    reported = [line.split(":", 1)[1] for line in out.splitlines() if "not valid JSON" in line]
    assert reported == [line.split(":", 1)[1] for line in from_stdin.stdout.splitlines() if "not valid JSON" in line]
    assert reported == [f"1: not valid JSON: Extra data (column {len(json.dumps(GOOD)) + 2})"]


def test_show_reads_a_file_once_so_a_pipe_works_too(tmp_path: Path) -> None:
    # /dev/stdin names the pipe the test writes: readable once, as a FIFO or `<(...)` is.
    from lionmsg.store import save_snapshot

    records = _script("show", "/dev/stdin", stdin=json.dumps(GOOD))
    assert (records.returncode, records.stderr) == (0, "")
    assert "Message" in records.stdout
    snapshot = tmp_path / "history.json"
    save_snapshot(MessageManager(messages=[Message.from_dict(GOOD)]), snapshot)
    shown = _script("show", "/dev/stdin", stdin=snapshot.read_text())
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout.startswith("history (1 message)")


def test_an_unrecognized_argument_is_escaped_in_the_usage_error() -> None:
    done = _script("fuzz", "\x1b]0;title\x07")
    assert done.returncode == 2
    assert "\x1b" not in done.stderr
    assert "\x07" not in done.stderr
    assert done.stderr.endswith("lionmsg: error: unrecognized arguments: \\u001b]0;title\\u0007\n")


def test_the_bundle_on_an_ascii_output_is_still_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Review bh F4: it was copied through as it is, and the output's backslash escapes are no JSON's.
    from lionmsg import cli
    from lionmsg.schema.files import load_bundle

    bundle = load_bundle()
    bundle["description"] = "Café → naïve 😀"
    (tmp_path / "bundle.json").write_text(json.dumps(bundle, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(cli, "schema_dir", lambda: tmp_path)
    raw = io.BytesIO()
    ascii_out = io.TextIOWrapper(raw, encoding="ascii", errors="backslashreplace")
    assert main(["schema", "--bundle"], out=ascii_out) == 0
    ascii_out.flush()
    written = raw.getvalue().decode("ascii")
    assert "\\u00e9" in written
    assert json.loads(written) == bundle
