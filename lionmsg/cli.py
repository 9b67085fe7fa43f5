"""The `lionmsg` command: print the schemas, validate records, generate records.

    lionmsg schema [NAME | --bundle | --list]
    lionmsg validate FILE...            JSON (one record or an array) or JSON Lines; `-` reads stdin
    lionmsg fuzz [--count N] [--kind K] [--seed S]
    lionmsg show FILE [--branch ID] [--chat]   a SQLite store, a JSON snapshot, or JSON/JSON Lines records

Standard input (`-`) holding exactly one JSON value (a record or an array, on one line or pretty-printed)
is read as a `.json` file is; anything else as JSON Lines. `show -` reads records only: a SQLite store or
a snapshot must be named as a file.

Exit status: 0 when everything is valid, 1 when a record (or a JSON line) is invalid, 2 for a usage
error, an unreadable file, an output that cannot be written (a full disk) or a missing optional
dependency. Bad input never produces a traceback: text the output cannot encode (a lone surrogate, any
non-ASCII character on an ASCII terminal) is written as a backslash escape, and untrusted text holding
a character a terminal would act on (ESC, a line break, a bidi control) or an undecodable byte is
escaped as JSON: a name (a file, a branch, an inbox, a record's id) quoted whole, any other text (an
error message quoting a record) character by character. A closed standard output (`>&-`) is a reader
that left before the first line.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from lionmsg.runtime.wire import loads_json, write_json
from lionmsg.runtime.wording import counted
from lionmsg.schema.files import BUNDLE_NAME, KINDS, kind_named, load_schema, schema_dir, schema_names

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = ["main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
_JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


def _json_lines_named(path: str) -> bool:
    """Whether a file's name says JSON Lines, in any case (`LOG.JSONL` as `log.jsonl`)."""
    return path.lower().endswith(_JSON_LINES_SUFFIXES)


class UsageError(Exception):
    """Reported as `lionmsg: <message>` with exit status 2."""


class _UnwritableOutput(Exception):
    """The output refused a write for another reason than a reader who left (a full disk, an I/O
    error): reported as `lionmsg: cannot write the output: <why>` with exit status 2."""


class _Output:
    """What a command writes to: standard output, or the stream main() was given.

    A reader who left (BrokenPipeError) makes the rest of the output go nowhere, and the write raises
    BrokenPipeError once more: `validate` ignores it and checks on, the other commands stop (`_main`).
    No stream at all (started with `>&-`: Python leaves sys.stdout None) is a reader who left before
    the first line. Any other OSError of a write is an _UnwritableOutput."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = None if stream is None or getattr(stream, "closed", False) else stream

    @property
    def encoding(self) -> Any:
        return getattr(self._stream, "encoding", None)

    def write(self, text: str) -> None:
        if self._stream is None:
            raise BrokenPipeError(errno.EPIPE, "the output's reader left")
        self._guarded(self._stream.write, text)

    def flush(self) -> None:
        if self._stream is not None:
            self._guarded(self._stream.flush)

    def _guarded(self, operation: Callable[..., object], *args: str) -> None:
        assert self._stream is not None
        try:
            operation(*args)
        except BrokenPipeError:
            self.drop()
            raise
        except OSError as error:
            self.drop()
            raise _UnwritableOutput(f"cannot write the output: {error.strerror or error}") from None

    def drop(self) -> None:
        """Write nothing more. What the stream still buffers goes to the null device when it is flushed
        (at the latest when the interpreter exits) instead of failing once more there, which Python
        would report as an ignored exception and exit status 120."""
        stream, self._stream = self._stream, None
        if stream is None:
            return
        try:
            descriptor = stream.fileno()
        except (AttributeError, OSError, ValueError):  # an in-memory stream: nothing is flushed to a pipe
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, descriptor)
        finally:
            os.close(null)


def _complain(message: str) -> None:
    """`lionmsg: <message>` on standard error, with what a terminal would act on escaped (a message may
    quote a file name or a record)."""
    _to_stderr(f"lionmsg: {_escaped(message)}\n")


def _to_stderr(text: str) -> None:
    """Nothing when there is no standard error, or it cannot be written: there is nowhere to say so."""
    if sys.stderr is None:
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text)
        sys.stderr.flush()


def _escaped(text: str, keep: str = "") -> str:
    from lionmsg.runtime.render.table import escape_unprintable

    return escape_unprintable(text, keep)


def _quoted(text: str) -> str:
    """A name (a file, a branch, a record id) as given, unless it holds a character that would break a
    one-line report or that a terminal would act on (a newline, ESC): then quoted whole as JSON."""
    return text if text.isprintable() else json.dumps(text)


def _names_quoted(message: str, *names: str | None) -> str:
    """A library error's message (a store's quotes the names it was given with repr) with each of these
    names that `_quoted` would quote quoted as JSON, as every other name the commands print."""
    for name in names:
        if name is not None and not name.isprintable():
            message = message.replace(repr(name), json.dumps(name))
    return message


# -- schema ----------------------------------------------------------------------------------------


def _schema(args: argparse.Namespace, out: _Output) -> int:
    if args.list:
        out.write("\n".join([*schema_names(), BUNDLE_NAME]) + "\n")
        return EXIT_OK
    if args.bundle or args.name in (BUNDLE_NAME, BUNDLE_NAME.removesuffix(".json")):  # as --list names it
        bundle = (schema_dir() / BUNDLE_NAME).read_text(encoding="utf-8")
        out.write(_escaped_non_ascii(bundle) if _ascii_only(out) else bundle)  # JSON still, on any output
        return EXIT_OK
    try:
        schema = load_schema("record" if args.name is None else args.name)
    except KeyError as error:
        raise UsageError(error.args[0]) from None
    out.write(json.dumps(schema, indent=2, ensure_ascii=_ascii_only(out)) + "\n")
    return EXIT_OK


# -- validate --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    """One record of an input file, or the reason a part of the file is not a record."""

    where: str
    record: Any = None
    syntax_error: str | None = None


def _read(path: str, stdin: TextIO | None) -> str:
    if path == "-":
        return _decode(path, _stdin_bytes(stdin))
    try:
        raw = Path(path).read_bytes()  # decoded as standard input is: a lone CR is no line end in either
    except OSError as error:
        raise UsageError(f"cannot read {_quoted(path)}: {error.strerror or error}") from None
    return _decode(path, raw)


def _not_utf8(path: str, error: UnicodeDecodeError) -> UsageError:
    return UsageError(f"cannot read {_quoted(path)}: not UTF-8 text ({error.reason} at byte {error.start})")


def _stdin_bytes(stdin: TextIO | None) -> bytes:
    if stdin is None:  # started with standard input closed (`<&-`): Python leaves sys.stdin None
        raise UsageError("cannot read -: standard input is closed")
    try:
        # The bytes, decoded as a file's are: the locale's text layer may be another encoding, or let
        # undecodable bytes through as surrogates (C.UTF-8 does).
        buffer = getattr(stdin, "buffer", None)
        return stdin.read().encode("utf-8", "surrogateescape") if buffer is None else bytes(buffer.read())
    except OSError as error:
        raise UsageError(f"cannot read -: {error.strerror or error}") from None
    except ValueError as error:  # closed by the program that handed it over, or text no bytes spell
        raise UsageError(f"cannot read -: {error}") from None


def _decode(path: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _not_utf8(path, error) from None


_NOT_ONE_VALUE: Any = object()


def _one_value(text: str) -> Any:
    """The JSON value `text` holds, or _NOT_ONE_VALUE (not JSON, several values, too deep to read)."""
    try:
        return loads_json(text)
    except ValueError:
        return _NOT_ONE_VALUE


def _entries(path: str, text: str) -> Iterator[_Entry]:
    """JSON Lines for `.jsonl`/`.ndjson`; otherwise one JSON document (a record or a list of them). Stdin
    (`-`) is one document when the whole text is one JSON value, a broken one when its first line is a
    bare `{` or `[` (pretty-printed), otherwise JSON Lines (a record on one line reads the same either way).
    Places name the file as `_quoted` shows it."""
    label = _quoted(path)
    if path == "-":
        document = _one_value(text)
        if document is not _NOT_ONE_VALUE:
            yield from _document_entries(label, document)
            return
        if not _pretty_printed(text):
            yield from _json_lines(label, text)  # records on lines of their own, some of them broken
            return
        # A pretty-printed document (a record or several: `jq`'s output) that is not one value: its own
        # error at its place (a missing comma; "Extra data" where a second one starts), as the same text in
        # a .json file gets, not an error for each of its lines.
        try:
            loads_json(text)
        except json.JSONDecodeError as error:
            yield _Entry(f"{label}:{error.lineno}", syntax_error=f"not valid JSON: {error.msg} (column {error.colno})")
        return
    if _json_lines_named(path):
        yield from _json_lines(label, text)
        return
    try:
        document = loads_json(text)
    except json.JSONDecodeError as error:
        yield _Entry(f"{label}:{error.lineno}", syntax_error=f"not valid JSON: {error.msg} (column {error.colno})")
        return
    yield from _document_entries(label, document)


def _pretty_printed(text: str) -> bool:
    """Whether text that is not one JSON value reads as a pretty-printed document rather than JSON Lines:
    its first line is a bare `{` or `[`, and no line holds a record (an object) by itself (a torn first
    line in a log of records is JSON Lines still)."""
    lines = [line for line in text.split("\n") if line.strip(" \t\r")]
    if not lines or lines[0].strip(" \t\r") not in ("{", "["):
        return False
    return not any(isinstance(_one_value(line), dict) for line in lines[1:])


def _json_lines(label: str, text: str) -> Iterator[_Entry]:
    # Lines end at "\n" only: str.splitlines() also breaks at U+2028, U+0085, \x1c..., which JSON
    # strings may hold raw (and `fuzz` writes them so), cutting a record in two.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip(" \t\r\n"):  # JSON's white space only (str.strip also takes \x1c, NBSP, U+2028...)
            continue
        try:
            yield _Entry(f"{label}:{number}", loads_json(line))
        except json.JSONDecodeError as error:
            yield _Entry(f"{label}:{number}", syntax_error=f"not valid JSON: {error.msg} (column {error.colno})")


def _document_entries(label: str, document: Any) -> Iterator[_Entry]:
    if isinstance(document, list):
        for index, record in enumerate(document):
            yield _Entry(f"{label}[{index}]", record)
    else:
        yield _Entry(label, document)


def _validate(args: argparse.Namespace, out: _Output) -> int:
    from lionmsg.generated.messages import Message

    validator = _record_validator()
    report = _Verdicts(out)
    checked = invalid = unreadable = 0
    for path in args.files:
        try:
            text = _read(path, sys.stdin)
        except UsageError as error:
            _complain(str(error))
            unreadable += 1
            continue
        for entry in _entries(path, text):
            checked += 1
            if entry.syntax_error is not None:
                invalid += 1
                report.line(f"{entry.where}: {entry.syntax_error}")
                continue
            errors = validator.errors(entry.record)
            if errors:
                invalid += 1
                kind = KINDS[validator.kind_of(entry.record)]
                report.line(f"{entry.where}: invalid {kind} record{_id_of(entry.record)}")
                for rule in errors:
                    report.line(f"    {rule}")
                continue
            try:
                Message.from_dict(entry.record)
            except (ValueError, TypeError) as error:  # the schema and the loader must agree: say so loudly
                invalid += 1
                report.line(f"{entry.where}: valid against the schemas but rejected by lionmsg: {error}")
    report.line(f"{checked} record(s) checked, {invalid} invalid, {unreadable} file(s) unreadable")
    report.flush()
    if unreadable:
        return EXIT_USAGE
    return EXIT_INVALID if invalid else EXIT_OK


class _Verdicts:
    """validate's report. When its reader leaves (`lionmsg validate ... | head`, or no standard output
    at all), the rest of the report is dropped but every record is still checked, so the exit status
    stays the verdict on all of them (what `set -o pipefail` sees); the other commands just stop
    (`_main`'s BrokenPipeError). A line never holds a character a terminal would act on, nor a line
    break: a path inside a record (`$.content['\x1b']`) or a loader's message may quote one."""

    def __init__(self, out: _Output) -> None:
        self._out = out

    def line(self, text: str) -> None:
        with contextlib.suppress(BrokenPipeError):  # _Output drops the rest
            self._out.write(_escaped(text) + "\n")

    def flush(self) -> None:
        with contextlib.suppress(BrokenPipeError):
            self._out.flush()


def _id_of(record: Any) -> str:
    ident = record.get("id") if isinstance(record, dict) else None
    return f" {_quoted(ident)}" if isinstance(ident, str) else ""


def _missing_extra(command: str, extra: str, error: ImportError) -> str:
    return f"{command} needs the `{extra}` extra ({error.name} is missing): pip install 'lionmsg[{extra}]'"


def _record_validator() -> Any:
    try:
        from lionmsg.schema.validator import RecordValidator
    except ImportError as error:
        raise UsageError(_missing_extra("validate", "cli", error)) from None
    return RecordValidator()


# -- fuzz ------------------------------------------------------------------------------------------


def _fuzz(args: argparse.Namespace, out: _Output) -> int:
    try:
        from lionmsg.schema.fuzz import generate_records
    except ImportError as error:
        raise UsageError(_missing_extra("fuzz", "fuzz", error)) from None
    kind = _kind_name(args.kind)
    ascii_only = _ascii_only(out)
    for record in generate_records(args.count, kind, args.seed):
        # As lionmsg writes records: json.dumps refuses the integers past Python's digit limit that the
        # stream draws, and leaves lone surrogates raw, which no UTF-8 output can encode.
        text = write_json(record)
        out.write((_escaped_non_ascii(text) if ascii_only else text) + "\n")
    return EXIT_OK


def _escaped_non_ascii(text: str) -> str:
    """JSON text with every non-ASCII character as a \\u escape (a pair beyond U+FFFF): the same JSON,
    since outside strings JSON text is ASCII."""
    return _NON_ASCII.sub(_utf16_escapes, text)


def _utf16_escapes(found: re.Match[str]) -> str:
    units = found.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[at]:02x}{units[at + 1]:02x}" for at in range(0, len(units), 2))


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _kind_name(value: str | None) -> str | None:
    if value is None:
        return None
    kind = kind_named(value)
    if kind is None:
        raise UsageError(f"unknown kind {value!r}; choose from {', '.join(KINDS)}")
    return kind


def _branch_id(value: str) -> str:
    if not value:  # a store never holds one: a usage error, as an unknown branch is
        raise argparse.ArgumentTypeError("a branch id cannot be empty")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a byte of the command line that is not UTF-8 (a lone surrogate here)
            raise argparse.ArgumentTypeError(f"a branch id is UTF-8 text, not {_quoted(value)}") from None
    return value


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {number}")
    return number


# -- show ------------------------------------------------------------------------------------------


def _show(args: argparse.Namespace, out: _Output) -> int:
    from lionmsg.runtime.render.table import conversation_table, escape_unprintable
    from lionmsg.store import StoreError

    try:
        shown = 0
        for title, messages in _histories(args.file, args.branch):
            shown += 1
            out.write(f"{title}\n{conversation_table(messages, ascii_only=_ascii_only(out))}\n")
            if args.chat:
                chat = [_chat_message(m) for m in messages if m.role.value != "unset"]
                # Only the layout's newlines stay raw: JSON strings may hold controls, separators and
                # format characters raw, which a terminal would act on; escaped, the JSON is the same.
                text = json.dumps(chat, indent=2, ensure_ascii=_ascii_only(out))
                out.write(escape_unprintable(text, keep="\n") + "\n")
            out.write("\n")
        if not shown:  # read, and empty: said, so that it is not taken for nothing read
            out.write("nothing to show: no branch, history or mail\n")
    except (StoreError, _BadRecord) as error:
        _complain(_names_quoted(str(error), args.file, args.branch))
        return EXIT_USAGE if _unreadable(error) else EXIT_INVALID
    return EXIT_OK


def _unreadable(error: Exception) -> bool:
    """A store SQLite could not read (locked past the timeout, an I/O error): not an invalid store. A
    damaged file is a CorruptStoreError; a database that is no lionmsg store a plain StoreError of its own."""
    import sqlite3

    from lionmsg.store import StoreError

    return type(error) is StoreError and isinstance(error.__cause__, sqlite3.Error)


def _chat_message(message: Any) -> dict[str, Any]:
    """The provider chat message; for one that cannot render, the table's marker as its content."""
    from lionmsg.runtime.render.table import cannot_render

    try:
        content = message.rendered
    except Exception as error:  # as the table does: the rest of the history still prints
        content = cannot_render(error)
    return {"role": message.role.value, "content": content}


class _BadRecord(Exception):
    """A record of a shown file that does not load."""


def _histories(path: str, branch: str | None) -> Iterator[tuple[str, list[Any]]]:
    """(title, messages) for each history the file (or standard input, `-`) holds; a title never holds
    a character a terminal would act on (names holding one are quoted, as `_quoted` does)."""
    from lionmsg.store.schema import SQLITE_HEADER

    stdin = path == "-"
    if stdin:
        raw = _stdin_bytes(sys.stdin)
        head = raw[: len(SQLITE_HEADER)]
    else:  # opened once: a pipe or a FIFO cannot be read again
        try:
            with open(path, "rb") as file:
                head = file.read(len(SQLITE_HEADER))
                raw = b"" if head == SQLITE_HEADER else head + file.read()  # a store: SQLite reads it
        except OSError as error:
            raise UsageError(f"cannot read {_quoted(path)}: {error.strerror or error}") from None
    if head == SQLITE_HEADER:
        if stdin:
            raise UsageError("show -: a SQLite store cannot be read from standard input; name its file")
        yield from _store_histories(path, branch)
        return
    if branch is not None:
        raise UsageError("--branch applies to a SQLite store only")
    text = _decode(path, raw)
    if not _json_lines_named(path):
        document = _one_value(text)  # not JSON (or too deep to read): the entries below report it
        if isinstance(document, dict) and document.get("format") == "lionmsg-snapshot":
            if stdin:
                raise UsageError("show -: a snapshot cannot be read from standard input; name its file")
            yield from _snapshot_histories(path, raw)
            return
    yield _quoted(path), [_load_record(entry) for entry in _entries(path, text)]


def _store_histories(path: str, branch: str | None) -> Iterator[tuple[str, list[Any]]]:
    from lionmsg.store import SQLiteStore, UnknownBranchError

    with SQLiteStore(path, read_only=True) as store:  # showing a file never changes it
        branches = store.branches() if branch is None else [branch]
        for key in branches:
            try:
                manager = store.load(key)
            except UnknownBranchError as error:
                raise UsageError(_names_quoted(error.args[0], path, key)) from None
            yield f"branch {_quoted(key)} ({counted(len(manager), 'message')})", list(manager)


def _snapshot_histories(path: str, raw: bytes) -> Iterator[tuple[str, list[Any]]]:
    from lionmsg.runtime.branch import Branch
    from lionmsg.runtime.exchange import Exchange
    from lionmsg.store.snapshots import snapshot_from_bytes

    held = snapshot_from_bytes(path, raw)
    if isinstance(held, Exchange):
        for owner in held.owner_ids:
            flow = held.get(owner)
            assert flow is not None  # listed owners have a mailbox
            if len(flow.outbox):
                yield f"owner {owner}: outbox", [flow.items[ident] for ident in flow.outbox]
            for name, inbox in flow.inboxes():  # a snapshot's progression names are any text
                yield f"owner {owner}: {_quoted(name)}", [flow.items[ident] for ident in inbox]
    elif isinstance(held, Branch):
        yield f"branch {_quoted(str(held.id))} ({counted(len(held.messages), 'message')})", list(held.messages)
    else:
        yield f"history ({counted(len(held), 'message')})", list(held)


def _load_record(entry: _Entry) -> Any:
    from lionmsg.generated.messages import Message

    if entry.syntax_error is not None:
        raise _BadRecord(f"{entry.where}: {entry.syntax_error}")
    try:
        return Message.from_dict(entry.record)
    except (ValueError, TypeError) as error:
        raise _BadRecord(f"{entry.where}: not a message record: {error}") from None


# -- entry point -----------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse's parser, writing as the commands do. Help goes to the command's output and ends in
    SystemExit as argparse's does: 0 once written or when the reader left, 2 with `cannot write the
    output` on a full disk (argparse exits 0 having written nothing, or with a traceback on Python
    3.10). Usage errors go to standard error only (argparse writes their usage line to standard output
    when there is no standard error), their message escaped as every other message there is: argparse
    quotes some arguments it names (`invalid int value: '...'`) but writes unrecognized ones as given."""

    def __init__(self, *args: Any, output: _Output, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._output = output

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        if file is not None:
            super().print_help(file)
            return
        try:
            self._output.write(self.format_help())
            self._output.flush()  # before argparse exits, which would leave a failed write unreported
        except BrokenPipeError:  # the reader left: 0, as a command stops then
            sys.exit(EXIT_OK)
        except _UnwritableOutput as error:
            _complain(str(error))
            sys.exit(EXIT_USAGE)

    def error(self, message: str) -> NoReturn:
        _to_stderr(f"{self.format_usage()}{self.prog}: error: {_escaped(message)}\n")
        sys.exit(EXIT_USAGE)


def _parser(output: _Output) -> argparse.ArgumentParser:
    parser = _Parser(prog="lionmsg", description="Message records: schemas, validation, fuzzing.", output=output)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    schema = commands.add_parser("schema", output=output, help="print a schema (the record union by default)")
    schema.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help=f"a schema file as --list names it ({BUNDLE_NAME} is the bundle) or a kind (instruction, ...)",
    )
    shown = schema.add_mutually_exclusive_group()
    shown.add_argument("--bundle", action="store_true", help="print the bundled document (all schemas in one)")
    shown.add_argument("--list", action="store_true", help="list the schema files and the bundle")
    schema.set_defaults(run=_schema, parser=schema)

    validate = commands.add_parser(
        "validate", output=output, help="validate JSON or JSON Lines records against the schemas"
    )
    validate.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a .json file (a record or an array), a .jsonl or .ndjson file, or - for stdin"
        " (one JSON value, possibly pretty-printed, else JSON Lines)",
    )
    validate.set_defaults(run=_validate)

    fuzz = commands.add_parser("fuzz", output=output, help="emit schema-generated records as JSON Lines")
    fuzz.add_argument("--count", type=_count, default=10, help="how many records (default 10)")
    fuzz.add_argument("--kind", help=f"one kind: {', '.join(KINDS)} (default: all)")
    fuzz.add_argument(
        "--seed", type=int, default=None, help="make the output reproducible (with the same --count and --kind)"
    )
    fuzz.set_defaults(run=_fuzz)

    show = commands.add_parser("show", output=output, help="print a stored history as a conversation table")
    show.add_argument(
        "file",
        metavar="FILE",
        help="a SQLite store, a JSON snapshot, or JSON/JSON Lines records; - reads records from stdin as validate does",
    )
    show.add_argument("--branch", type=_branch_id, help="one branch of a SQLite store (default: every branch)")
    show.add_argument("--chat", action="store_true", help="also print the provider chat messages")
    show.set_defaults(run=_show)
    return parser


def _ascii_only(out: _Output) -> bool:
    """Whether JSON written to `out` must escape non-ASCII: its encoding is not a Unicode one (an ASCII
    terminal), where a backslash escape of the stream would not be JSON's."""
    encoding = getattr(out, "encoding", None)
    if not isinstance(encoding, str):  # io.StringIO: text all the way
        return False
    try:
        return not codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return True


def _escaping_unencodable(*streams: Any) -> Callable[[], None]:
    """Make each text stream write what its encoding cannot hold (a lone surrogate from a record or a
    file name, `→` on an ASCII terminal) as a backslash escape instead of raising; returns the undo."""
    changed: list[tuple[Any, str]] = []
    for stream in dict.fromkeys(streams):  # stdout may be stderr
        errors = getattr(stream, "errors", None)
        if not hasattr(stream, "reconfigure") or errors is None or errors == "backslashreplace":
            continue
        try:
            stream.reconfigure(errors="backslashreplace")
        except (OSError, ValueError):  # closed, or a reader already gone
            continue
        changed.append((stream, errors))

    def undo() -> None:
        for stream, errors in changed:
            with contextlib.suppress(OSError, ValueError):  # closed after a broken pipe: nothing to restore
                stream.reconfigure(errors=errors)

    return undo


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    stream = out if out is not None else sys.stdout
    # A CLI process could leave the streams changed; main() called in a process that goes on (a test
    # under pytest's capture) gets them back as they were.
    undo = _escaping_unencodable(stream, sys.stderr)
    try:
        return _main(argv, stream)
    finally:
        undo()


def _main(argv: Sequence[str] | None, stream: TextIO | None) -> int:
    output = _Output(stream)
    try:
        try:
            args = _parser(output).parse_args(argv)  # --help and usage errors end in SystemExit
            if args.command == "schema" and args.name is not None and (args.list or args.bundle):
                option = "--list" if args.list else "--bundle"
                args.parser.error(f"argument {option}: not allowed with argument NAME")
            status: int = args.run(args, output)
        except UsageError as error:
            _complain(str(error))
            status = EXIT_USAGE
        output.flush()  # a full disk is reported here, not met again when the interpreter exits
    except BrokenPipeError:  # `lionmsg fuzz | head`: the reader left; that is not an error
        return EXIT_OK
    except _UnwritableOutput as error:
        _complain(str(error))
        return EXIT_USAGE
    return status


if __name__ == "__main__":
    raise SystemExit(main())
