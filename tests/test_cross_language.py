"""The schemas mean the same thing in JavaScript: ajv agrees with the Python validator.

ajv (2020-12 mode, strict) runs in `clients/typescript/scripts/validate.mjs` over the golden corpus in
`tests/cases/`, over records that lionmsg writes, and over records that the TypeScript client (built
against types generated from the schemas) writes. Each verdict must equal `RecordValidator`'s and, for
the corpus, what the file's place says: `valid/<kind>/*.json` valid, `invalid/<kind>/*.json` invalid.

Needs Node.js and the client's pinned packages: `make ts-check` installs them (`npm ci`) and compiles
the client. Without them these tests fail rather than skip, so CI cannot pass without running them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from lionmsg import LION_CLASSES, Message
from lionmsg.schema.files import KINDS
from lionmsg.schema.validator import RecordValidator
from tests.samples import failed_action_response, rich_messages

REPO = Path(__file__).resolve().parent.parent
CLIENT = REPO / "clients" / "typescript"
CASES = REPO / "tests" / "cases"
EXPECTED = {"valid": True, "invalid": False}
CORPUS = sorted(path.relative_to(REPO).as_posix() for path in CASES.rglob("*.json")) if CASES.is_dir() else []
SETUP = "run `make ts-check` (npm ci in clients/typescript, then the type check that builds the client)"


def _node(script: str, *args: str, stdin: str | None = None) -> list[dict[str, Any]]:
    """Run a script of the TypeScript client; its output is one JSON object per line."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"Node.js is not on PATH: the cross-language checks need it; {SETUP}")
    if not (CLIENT / "node_modules" / ".package-lock.json").is_file():
        pytest.fail(f"clients/typescript/node_modules is missing: {SETUP}")
    done = subprocess.run(
        [node, str(CLIENT / "scripts" / script), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"node {script} exited {done.returncode}:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _ajv_lines(records: list[Any]) -> list[dict[str, Any]]:
    """ajv's verdicts on records given in memory, in order (as JSON Lines on the script's stdin)."""
    lines = "".join(json.dumps(record) + "\n" for record in records)
    verdicts = _node("validate.mjs", "--stdin", stdin=lines)
    assert len(verdicts) == len(records)
    return verdicts


@cache
def _validator() -> RecordValidator:
    return RecordValidator()


def _python_verdict(path: Path) -> bool:
    """The Python validator's verdict on a file; a file that is not JSON is invalid."""
    try:
        record = json.loads(path.read_bytes())
    except ValueError:
        return False
    return _validator().is_valid(record)


@pytest.fixture(scope="module")
def ajv_corpus() -> dict[str, dict[str, Any]]:
    """ajv's verdict on every corpus file, by path relative to the repository (one node run)."""
    return {line["file"]: line for line in _node("validate.mjs", str(CASES))} if CORPUS else {}


def test_corpus_is_there() -> None:
    """A cross-language check over nothing proves nothing: the corpus has valid and invalid records."""
    tops = {Path(name).parts[2] for name in CORPUS}
    assert {"valid", "invalid"} <= tops, f"expected tests/cases/valid/ and tests/cases/invalid/, found {tops}"


@pytest.mark.parametrize("name", CORPUS)
def test_ajv_agrees_with_python_on_the_corpus(name: str, ajv_corpus: dict[str, dict[str, Any]]) -> None:
    ajv = ajv_corpus[name]
    python = _python_verdict(REPO / name)
    assert ajv["valid"] == python, f"ajv says {ajv['valid']}, Python says {python}; ajv errors: {ajv['errors']}"
    parts = Path(name).parts  # tests, cases, valid|invalid, <kind>, <name>.json
    if parts[2] in EXPECTED:
        assert len(parts) == 5, f"{name}: expected tests/cases/{parts[2]}/<kind>/<name>.json"
        assert parts[3] in KINDS, f"{name}: {parts[3]!r} is not a kind ({', '.join(KINDS)})"
        assert python == EXPECTED[parts[2]], f"{name} is under {parts[2]}/ but both validators say {python}"


def test_every_corpus_file_was_checked_by_ajv(ajv_corpus: dict[str, dict[str, Any]]) -> None:
    assert sorted(ajv_corpus) == CORPUS


def test_records_lionmsg_writes_pass_ajv() -> None:
    messages = [*rich_messages(), failed_action_response(), *(cls() for cls in LION_CLASSES.values())]
    records = [message.to_dict() for message in messages]
    assert {type(message).__name__ for message in messages} == set(KINDS.values())
    for message, record, ajv in zip(messages, records, _ajv_lines(records), strict=True):
        assert ajv["valid"], f"{type(message).__name__}: {ajv['errors']}"
        assert _validator().is_valid(record)


def test_records_the_typescript_client_builds_load_in_python() -> None:
    """What the generated types let the client build is valid everywhere and loads as the kind it narrowed to."""
    if not (CLIENT / "build" / "client.js").is_file():
        pytest.fail(f"clients/typescript/build/client.js is missing: {SETUP}")
    built = _node("client-records.mjs")
    assert sorted(line["kind"] for line in built) == sorted(KINDS.values())
    for line, ajv in zip(built, _ajv_lines([line["record"] for line in built]), strict=True):
        record = line["record"]
        assert ajv["valid"], f"{line['kind']}: {ajv['errors']}"
        assert _validator().errors(record) == []
        assert type(Message.from_dict(record)).__name__ == line["kind"]


_UUID = "00000000-0000-4000-8000-000000000001"


def _with_image(image: str) -> dict[str, Any]:
    return {"id": _UUID, "created_at": 1.0, "metadata": {"lion_class": "Instruction"}, "content": {"images": [image]}}


# Anchors and white space are where regular expression dialects part (lionmsg.schema.patterns).
EDGES: dict[str, dict[str, Any]] = {
    "uuid-trailing-newline": {"id": _UUID + "\n", "created_at": 1.0},
    "lion-class-trailing-newline": {"id": _UUID, "created_at": 1.0, "metadata": {"lion_class": "Message\n"}},
    "base64-trailing-newline": _with_image("iVBORw0KGgo=\n"),
    "url-trailing-newline": _with_image("https://example.org/a.png\n"),
    "url-nbsp": _with_image("https://example.org/\u00a0.png"),
    "url-line-separator": _with_image("https://example.org/\u2028.png"),
    "url-ideographic-space": _with_image("https://example.org/\u3000.png"),
    "url-zero-width-space": _with_image("https://example.org/\u200b.png"),
    "url-astral": _with_image("https://\U0001f600.example/\U0001f600"),
    "url-x1c": _with_image("https://exa\x1cmple.org/a.png"),
    "url-x85": _with_image("https://example.org/\x85.png"),
    "url-ufeff": _with_image("https://example.org/\ufeff.png"),
    "created-at-infinite": {**_with_image("iVBORw0KGgo="), "created_at": float("inf")},
}
# `\s` differs between Python (str.isspace: U+001C..U+001F, U+0085) and ECMA-262 (U+FEFF instead); the
# image URL pattern spells ECMA's set out, so these three agree too.


@pytest.fixture(scope="module")
def ajv_edges() -> dict[str, dict[str, Any]]:
    return dict(zip(EDGES, _ajv_lines(list(EDGES.values())), strict=True))


@pytest.mark.parametrize("name", list(EDGES))
def test_ajv_agrees_with_python_on_edge_inputs(name: str, ajv_edges: dict[str, dict[str, Any]]) -> None:
    ajv = ajv_edges[name]
    assert ajv["valid"] == _validator().is_valid(EDGES[name]), ajv["errors"]
