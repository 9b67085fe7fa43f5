"""The schemas mean the same thing in JavaScript: ajv agrees with the Python validator.

ajv (2020-12 mode, strict) runs in `clients/typescript/scripts/validate.mjs` over the golden corpus in
`tests/cases/`, over records that lionmsg writes, and over records that the TypeScript client (built
against types generated from the schemas) writes. Each verdict must equal `RecordValidator`'s and, for
the corpus, what the file's place says: `valid/<kind>/*.json` valid, `invalid/<kind>/*.json` invalid.

Where JavaScript reads JSON differently, the script must not hide it: bytes that are not UTF-8 are not
JSON to it either, only JSON white space makes a JSON Lines line blank, and integers a double cannot hold
are listed (`inexact`) while the verdict stays the schema's.

Needs Node.js and the client's pinned packages: `make ts-check` installs them (`npm ci`) and compiles
the client. Without them these tests fail rather than skip, so CI cannot pass without running them.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from lionmsg import LION_CLASSES, ActionRequest, ActionResponse, Instruction, Message
from lionmsg.cli import main as lionmsg_main
from lionmsg.runtime.wire import WRITTEN_NESTING, loads_json
from lionmsg.schema.files import KINDS
from lionmsg.schema.validator import RecordValidator
from tests.samples import failed_action_response, rich_messages

REPO = Path(__file__).resolve().parent.parent
CLIENT = REPO / "clients" / "typescript"
CASES = REPO / "tests" / "cases"
EXPECTED = {"valid": True, "invalid": False}
CORPUS = sorted(path.relative_to(REPO).as_posix() for path in CASES.rglob("*.json")) if CASES.is_dir() else []
SETUP = "run `make ts-check` (npm ci in clients/typescript, then the type check that builds the client)"


def _node(script: str, *args: str, stdin: str | bytes | None = None) -> list[dict[str, Any]]:
    """Run a script of the TypeScript client; its output is one JSON object per line. Text on stdin is
    sent as UTF-8; bytes as they are (input that is not UTF-8)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"Node.js is not on PATH: the cross-language checks need it; {SETUP}")
    if not (CLIENT / "node_modules" / ".package-lock.json").is_file():
        pytest.fail(f"clients/typescript/node_modules is missing: {SETUP}")
    done = subprocess.run(
        [node, str(CLIENT / "scripts" / script), *args],
        input=stdin.encode("utf-8") if isinstance(stdin, str) else stdin,
        capture_output=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"node {script} exited {done.returncode}:\n{done.stderr.decode('utf-8', 'replace')}")
    # Lines end at "\n" only: a parse error quotes the input, which may hold U+2028 raw (splitlines cuts).
    return [json.loads(line) for line in done.stdout.decode("utf-8").split("\n") if line.strip()]


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
    """The Python validator's verdict on a file; a file that is not JSON is invalid. Read as `lionmsg
    validate` reads it: json.loads would take a BOM and decode an encoded lone surrogate."""
    try:
        record = loads_json(path.read_bytes())
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


def test_the_corpus_holds_no_number_javascript_reads_inexactly(ajv_corpus: dict[str, dict[str, Any]]) -> None:
    assert {name: line["inexact"] for name, line in ajv_corpus.items() if line["inexact"]} == {}


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


@pytest.mark.parametrize("content", [{}, {"system_datetime": "2025-01-01T00:00"}, None], ids=["empty", "time", "none"])
def test_the_typescript_client_reads_an_absent_system_prompt_as_the_schemas_default_as_python_does(
    content: dict[str, Any] | None,
) -> None:
    # Review ak F2: the client described such a record as an empty prompt; Python sends the default one.
    record: dict[str, Any] = {"id": _UUID, "created_at": 1.0, "metadata": {"lion_class": "System"}}
    if content is not None:
        record["content"] = content
    assert _validator().is_valid(record)
    (line,) = _node("client-records.mjs", "--describe", stdin=json.dumps(record) + "\n")
    prompt = Message.from_dict(record).content.system_message  # type: ignore[union-attr]
    assert prompt == "You are a helpful AI assistant. Let's think step by step."
    assert (line["kind"], line["describe"]) == ("System", f"system prompt {json.dumps(prompt)}")


def test_describe_reads_stdin_strictly_and_reports_a_bad_line_without_a_trace() -> None:
    # Review bh F6: stdin was decoded leniently (bad bytes became U+FFFD), trim() dropped a BOM line, and a
    # bad line ended the script with a stack trace.
    record = {"id": _UUID, "created_at": 1.0, "metadata": {"lion_class": "Instruction"}}
    stdin = json.dumps(record).encode() + b"\n\xef\xbb\xbf{}\ncaf\xe9\n \t\n[1,\n"
    done = subprocess.run(
        ["node", str(CLIENT / "scripts" / "client-records.mjs"), "--describe"],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert (done.returncode, done.stderr) == (1, b"")
    lines = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    assert lines[0]["kind"] == "Instruction"
    assert [(line["line"], line["error"].split(":")[0]) for line in lines[1:3]] == [
        (2, "Unexpected UTF-8 BOM"),
        (3, "not UTF-8 text"),
    ]
    assert lines[3]["line"] == 5  # JSON.parse's own message, which differs between Node.js versions
    assert len(lines) == 4


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


# -- what JavaScript reads differently: bytes, blank lines, big integers --------------------------------


def _record_bytes(text: bytes) -> bytes:
    """A valid record as UTF-8 JSON, with `text` spliced raw into its content string."""
    return json.dumps({"id": _UUID, "created_at": 1.0, "content": "@@"}).encode("utf-8").replace(b"@@", text)


# A decoder that replaces what is not UTF-8 with U+FFFD makes the bad ones valid records.
FILE_BYTES: dict[str, tuple[bytes, bool]] = {
    "utf-8": (_record_bytes("caf\u00e9".encode()), True),
    "latin-1-byte": (_record_bytes(b"caf\xe9"), False),
    "encoded-lone-surrogate": (_record_bytes(b"\xed\xa0\x80"), False),
    "truncated-sequence": (_record_bytes(b"\xe2\x82"), False),
    "bom": (b"\xef\xbb\xbf" + _record_bytes(b"x"), False),  # refused by both, as before
}


@pytest.mark.parametrize("name", list(FILE_BYTES))
def test_a_file_that_is_not_utf8_is_a_parse_error_as_in_lionmsg(name: str, tmp_path: Path) -> None:
    data, expected = FILE_BYTES[name]
    path = tmp_path / f"{name}.json"
    path.write_bytes(data)
    [ajv] = _node("validate.mjs", str(path))
    assert ajv["valid"] is expected, ajv["errors"]
    assert _python_verdict(path) is expected
    if not expected:
        assert [error["keyword"] for error in ajv["errors"]] == ["parse"]


def test_a_stdin_line_that_is_not_utf8_is_that_lines_parse_error() -> None:
    good = _record_bytes("caf\u00e9".encode())
    lines = [good, _record_bytes(b"caf\xe9"), _record_bytes(b"\xed\xa0\x80"), good]
    verdicts = _node("validate.mjs", "--stdin", stdin=b"\n".join(lines) + b"\n")
    assert [(line["file"], line["valid"]) for line in verdicts] == [
        ("<stdin>:1", True),
        ("<stdin>:2", False),
        ("<stdin>:3", False),
        ("<stdin>:4", True),
    ]
    assert [error["keyword"] for line in verdicts[1:3] for error in line["errors"]] == ["parse", "parse"]


# Blank means JSON white space only (RFC 8259 `ws`). JavaScript's trim() also drops a BOM, NBSP, U+2028
# and \v; Python's str.strip() drops \x1c, NBSP, U+2028 and \v but not a BOM.
BLANK_OR_NOT = b"\n".join(
    [
        b"\xef\xbb\xbf",  # 1: a BOM
        b"\x1c",  # 2
        b" \t\r",  # 3: blank
        b"",  # 4: blank
        _record_bytes(b"x"),  # 5: a valid record
        "\u00a0".encode(),  # 6
        "\u2028".encode(),  # 7
        b"\x0b",  # 8
        b"",  # the end of the last line
    ]
)
NOT_BLANK = [1, 2, 6, 7, 8]


def test_only_json_white_space_makes_a_stdin_line_blank() -> None:
    verdicts = _node("validate.mjs", "--stdin", stdin=BLANK_OR_NOT)
    assert [line["file"] for line in verdicts] == [f"<stdin>:{number}" for number in [1, 2, 5, 6, 7, 8]]
    assert [line["valid"] for line in verdicts] == [False, False, True, False, False, False]
    assert {error["keyword"] for line in verdicts if not line["valid"] for error in line["errors"]} == {"parse"}


def test_lionmsg_validate_skips_the_same_blank_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BLANK_OR_NOT), encoding="utf-8"))
    out = io.StringIO()
    lionmsg_main(["validate", "-"], out=out)
    reported = [int(number) for number in re.findall(r"^-:(\d+): ", out.getvalue(), re.MULTILINE)]
    assert reported == NOT_BLANK, out.getvalue()


_BIG = 2**60 + 1  # a 64-bit id: JSON.parse reads 2**60


# What lionmsg writes (to_json) and the paths where JavaScript holds another number than the text wrote.
INEXACT: dict[str, tuple[Message, list[str]]] = {
    "metadata-2**60+1": (
        Instruction(content={"instruction": "x"}, metadata={"trace_id": _BIG}),
        ["/metadata/trace_id"],
    ),
    "metadata-without": (Instruction(content={"instruction": "x"}, metadata={"trace_id": 7}), []),
    "largest-safe-integer": (Message(metadata={"n": [2**53 - 1, -(2**53) + 1]}), []),
    "2**53-either-sign": (Message(metadata={"n": [2**53, -(2**53)]}), ["/metadata/n/0", "/metadata/n/1"]),
    "float-1e16": (Message(metadata={"score": 1e16, "big": 1.5e300}), []),  # written 1e+16: a double in Python too
    "key-escaped": (Message(metadata={"a/b~c": _BIG}), ["/metadata/a~1b~0c"]),
    "tool-arguments": (
        ActionRequest(content={"function": "get", "arguments": {"ids": [1, 2**63 - 1]}}),
        ["/content/arguments/ids/1"],
    ),
    "output-10**400": (
        ActionResponse(content={"function": "f", "arguments": {}, "output": 10**400}),
        ["/content/output"],
    ),
    "prompt-context": (
        Instruction(content={"prompt_context": [{"id": -(2**64)}, 3]}),
        ["/content/prompt_context/0/id"],
    ),
    "generic-content": (Message(content={"ids": {"x": _BIG}}), ["/content/ids/x"]),
}


@pytest.fixture(scope="module")
def ajv_inexact() -> dict[str, dict[str, Any]]:
    lines = "".join(message.to_json() + "\n" for message, _ in INEXACT.values())
    verdicts = _node("validate.mjs", "--stdin", stdin=lines)
    return dict(zip(INEXACT, verdicts, strict=True))


@pytest.mark.parametrize("name", list(INEXACT))
def test_integers_javascript_cannot_hold_are_flagged_without_changing_the_verdict(
    name: str, ajv_inexact: dict[str, dict[str, Any]]
) -> None:
    message, paths = INEXACT[name]
    ajv = ajv_inexact[name]
    assert ajv["inexact"] == paths
    assert ajv["valid"], ajv["errors"]  # the schemas leave these values free: valid before and after
    assert _validator().is_valid(loads_json(message.to_json()))


def test_a_float_literal_or_a_duplicate_key_is_judged_by_the_literal_json_parse_keeps() -> None:
    head = f'{{"id": "{_UUID}", "created_at": 1.0, "content": '
    lines = [
        head + '{"a": 9007199254740993, "a": 1}}',  # the last of duplicate keys is the value
        head + '{"a": 1, "a": 9007199254740993}}',
        head + "[1e400, 2e0, 9007199254740993.0, -0, 12345678901234567890123]}",
    ]
    verdicts = _node("validate.mjs", "--stdin", stdin="\n".join(lines))
    assert [line["inexact"] for line in verdicts] == [[], ["/content/a"], ["/content/0", "/content/4"]]


def test_what_javascript_writes_back_for_an_integer_it_cannot_hold_is_what_the_readmes_say() -> None:
    # Review bh F5: the READMEs said 2^60 + 1 came back as 2^60; JSON.stringify writes the shortest text.
    script = "process.stdout.write(JSON.stringify(JSON.parse(process.argv[1])))"
    done = subprocess.run(
        ["node", "-e", script, "[1152921504606846977, 9007199254740992]"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [2**60 + 24, 2**53]
    assert "`1152921504606847000`" in (CLIENT / "README.md").read_text(encoding="utf-8")
    assert "`1152921504606847000`" in (REPO / "README.md").read_text(encoding="utf-8")


# -- the README's commands ----------------------------------------------------------------------------

README = CLIENT / "README.md"
_FROM = {"# from the repository root": REPO, "# from clients/typescript": CLIENT}


def _readme_commands() -> list[tuple[Path, str]]:
    """The `node` commands of the README's sh blocks, with the directory each block says it runs in."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", README.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL):
        lines = block.splitlines()
        assert lines[0] in _FROM, f"an sh block of {README.name} must start with one of {list(_FROM)}"
        commands += [(_FROM[lines[0]], line.split("  #")[0].strip()) for line in lines[1:] if "node " in line]
    return commands


def test_the_readme_commands_work_where_it_runs_them() -> None:
    """Paths are resolved against the current directory: each command works in its block's directory,
    and every `node ...` the text names is one of them."""
    commands = _readme_commands()
    named = re.findall(r"`(node [^`]+)`", README.read_text(encoding="utf-8"))
    assert set(named) <= {command for _, command in commands}
    assert commands
    # The README's `.venv` is the default one; `make test VENV=...` runs these tests from another.
    here = f"{Path(sys.executable).parent}/"
    for cwd, command in commands:
        run = re.sub(r"(?<![\w./])\.venv/bin/", here, command)  # the one at the start of a word
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", run], cwd=cwd, capture_output=True, timeout=300, check=False
        )
        assert done.returncode == 0, f"{command} (in {cwd}): {done.stderr.decode()}"
        assert done.stdout, f"{command} (in {cwd}) printed nothing"


def _nested_record(depth: int) -> str:
    """A valid record nested `depth` levels of arrays and objects deep (the record itself is 1), as text."""
    return '{"id":"00000000-0000-4000-8000-000000000001","created_at":1,"metadata":{"d":' + (
        "[" * (depth - 2) + "]" * (depth - 2) + "}}"
    )


def test_a_record_nested_deeper_than_python_reads_is_flagged_without_changing_the_verdict() -> None:
    # Review cl 1: ajv validates any depth; Python's decoder stops at about 993 levels on 3.10 and 3.11,
    # so a JavaScript writer could make a record ajv calls valid and lionmsg cannot read. (20,000 is past
    # every supported interpreter: 3.13 reads about 9,996.)
    lines = "".join(_nested_record(depth) + "\n" for depth in (WRITTEN_NESTING, WRITTEN_NESTING + 1, 20_000))
    shallow, flagged, unreadable = _node("validate.mjs", "--stdin", stdin=lines)
    assert (shallow["valid"], "nesting" in shallow) == (True, False)
    assert (flagged["valid"], flagged["nesting"], unreadable["valid"], unreadable["nesting"]) == (
        True,
        WRITTEN_NESTING + 1,
        True,
        20_000,
    )
    assert _validator().is_valid(loads_json(_nested_record(WRITTEN_NESTING)))
    with pytest.raises(ValueError, match="arrays and objects nested too deeply to read"):
        loads_json(_nested_record(20_000))


def test_a_record_with_a_huge_array_gets_its_verdict() -> None:
    # Review cl 2: the scan for inexact numbers spread a container's children into one call's arguments,
    # which overflowed the stack from some 120,000 entries (exit 1, and no verdict for any input).
    record = {"id": "00000000-0000-4000-8000-000000000001", "created_at": 1, "embedding": [0.5] * 200_000}
    [verdict] = _ajv_lines([record])
    assert (verdict["valid"], verdict["inexact"]) == (True, [])


def _run_validate(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    node = shutil.which("node")
    assert node is not None, SETUP
    return subprocess.run(
        [node, str(CLIENT / "scripts" / "validate.mjs"), *args],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )


def test_validate_mjs_says_what_is_bad_usage_and_help_is_no_error() -> None:
    # Review cl 4: an unknown option or --stdin beside a path was read as a path (a stack trace, exit 1).
    helped = _run_validate("--help")
    assert (helped.returncode, helped.stdout, helped.stderr) == (
        0,
        b"usage: validate.mjs [--] PATH... | --stdin\n",
        b"",
    )
    for args in (["--bogus"], ["--stdin", "tests/cases"], []):
        refused = _run_validate(*args)
        assert refused.returncode == 2, args
        assert refused.stderr.startswith(b"usage: validate.mjs [--] PATH... | --stdin"), args
    dashed = _run_validate("--", "tests/cases/valid/system")  # paths after `--`, which may start with "-"
    assert dashed.returncode == 0
    assert dashed.stdout.count(b'"valid":true') == len(list((CASES / "valid" / "system").glob("*.json")))
    missing = _run_validate("no-such-file.json")
    assert missing.returncode == 1
    assert missing.stderr.decode().splitlines() == [
        f"validate.mjs: ENOENT: no such file or directory, stat '{REPO / 'no-such-file.json'}'"
    ]


def test_validate_mjs_stops_quietly_when_its_reader_leaves() -> None:
    # Review cl 5: `validate.mjs ... | head` died with an unhandled EPIPE (exit 1, a stack trace).
    node = shutil.which("node")
    assert node is not None, SETUP
    record = json.dumps({"id": "00000000-0000-4000-8000-000000000001", "created_at": 1})
    process = subprocess.Popen(
        [node, str(CLIENT / "scripts" / "validate.mjs"), "--stdin"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdin.write((record + "\n").encode() * 20_000)  # verdicts far beyond a pipe's buffer
    process.stdin.close()
    assert json.loads(process.stdout.readline())["valid"] is True
    process.stdout.close()
    assert process.wait(timeout=300) == 0
    assert process.stderr.read() == b""
