"""The golden corpus (`tests/cases/`, see its README): the schemas and `Message.from_dict` give the same
verdict on every hand-written valid and invalid record."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from lionmsg import LION_CLASSES, Message
from lionmsg.schema.files import KINDS, kind_of_class
from lionmsg.schema.validator import RecordValidator
from tests.conftest import fields_of

CASES = Path(__file__).resolve().parent / "cases"
VALID = sorted(CASES.glob("valid/*/*.json"))
INVALID = sorted(CASES.glob("invalid/*/*.json"))
VALIDATOR = RecordValidator()
KEBAB_CASE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\.json")


def _case_id(path: Path) -> str:
    return path.relative_to(CASES).as_posix()


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _class_of_directory(path: Path) -> type[Message]:
    return LION_CLASSES[KINDS[path.parent.name]]


def _without_role(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != "role"}


def _is_role_rule(path: Path) -> bool:
    return path.name.startswith("role-")


# -- layout ---------------------------------------------------------------------------------------


def test_every_kind_has_valid_and_invalid_cases() -> None:
    for kind in KINDS:
        assert len(list((CASES / "valid" / kind).glob("*.json"))) >= 1, kind
        assert len(list((CASES / "invalid" / kind).glob("*.json"))) >= 3, kind


def test_the_corpus_holds_only_kind_directories_of_json_files() -> None:
    assert sorted(path.name for path in CASES.iterdir()) == ["README.md", "invalid", "valid"]
    for top in ("valid", "invalid"):
        assert sorted(path.name for path in (CASES / top).iterdir()) == sorted(KINDS)
        for kind in KINDS:
            for path in (CASES / top / kind).iterdir():
                assert path.is_file(), path
                assert KEBAB_CASE.fullmatch(path.name), f"{_case_id(path)}: not a kebab-case .json name"


@pytest.mark.parametrize("path", VALID + INVALID, ids=_case_id)
def test_each_file_is_one_pretty_printed_record(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    record = json.loads(text)
    assert isinstance(record, dict)
    assert text == json.dumps(record, indent=2, ensure_ascii=False) + "\n"


# -- valid records --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", VALID, ids=_case_id)
def test_a_valid_case_is_valid_and_round_trips(path: Path) -> None:
    record = _load(path)
    cls = _class_of_directory(path)
    assert VALIDATOR.errors(record) == []
    assert VALIDATOR.is_valid(record)
    assert VALIDATOR.kind_of(record) == path.parent.name

    loaded = Message.from_dict(record)
    assert type(loaded) is cls
    assert type(cls.from_dict(record)) is cls
    assert str(loaded.id) == record["id"].lower()
    assert loaded.created_at == record["created_at"]
    user_metadata = {k: v for k, v in record.get("metadata", {}).items() if k != "lion_class"}
    assert loaded.metadata == user_metadata

    written = loaded.to_dict()
    assert VALIDATOR.errors(written) == []
    assert written["role"] == cls._role.value
    assert written["metadata"] == {**user_metadata, "lion_class": cls.__name__}
    again = Message.from_dict(written)
    assert type(again) is cls
    assert again.to_dict() == written
    assert fields_of(again) == fields_of(loaded)


# -- invalid records ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", INVALID, ids=_case_id)
def test_an_invalid_case_is_rejected_by_the_schema_with_errors(path: Path) -> None:
    record = _load(path)
    assert not VALIDATOR.is_valid(record)
    errors = VALIDATOR.errors(record)
    assert errors, "an invalid record must come with at least one error"
    for error in errors:
        assert error.location.startswith("$")
        assert ".schema.json#/" in error.schema_path
        assert error.message


@pytest.mark.parametrize("path", [p for p in INVALID if not _is_role_rule(p)], ids=_case_id)
def test_an_invalid_case_is_rejected_by_from_dict(path: Path) -> None:
    record = _load(path)
    # The broken rule is not the role: the record stays invalid without it.
    if isinstance(record, dict):
        assert not VALIDATOR.is_valid(_without_role(record))
    with pytest.raises((ValueError, TypeError)):  # pydantic's ValidationError is a ValueError
        Message.from_dict(record)


@pytest.mark.parametrize("path", [p for p in INVALID if _is_role_rule(p)], ids=_case_id)
def test_a_role_case_loads_because_role_is_output_only(path: Path) -> None:
    """ADR-0006 D1: the class decides the role and a supplied one is ignored on input, while the schema
    pins `role` per kind. So the schema rejects a forged role and `from_dict` loads the record anyway,
    with the role of the class its `lion_class` names (a generic Message when it names none)."""
    record = _load(path)
    cls = LION_CLASSES[KINDS[kind_of_class(record.get("metadata", {}).get("lion_class"))]]
    assert "role" in record
    assert record["role"] != cls._role.value, "a role-* case must carry a role its class does not have"
    assert VALIDATOR.is_valid(_without_role(record)), "a role-* case must break only the role rule"

    loaded = Message.from_dict(record)
    assert type(loaded) is cls
    assert loaded.role is cls._role
    written = loaded.to_dict()
    assert written["role"] == cls._role.value
    assert VALIDATOR.errors(written) == []
