"""Reading and writing records: schema patterns and field errors (which the generated loaders call),
strict JSON reading, and checked JSON writing."""

from __future__ import annotations

import _thread
import dataclasses
import json
import math
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from functools import cache
from typing import Any, cast

from pydantic_core import PydanticSerializationError, to_jsonable_python
from pydantic_core import to_json as _write_json

__all__ = [
    "CANONICAL_UUID",
    "UNWRITABLE_DEPTH",
    "KeyCollisionError",
    "RecordFieldError",
    "check_finite",
    "check_mode",
    "finite_parts_noted",
    "loads_json",
    "new_threads_have_enough_stack",
    "matches",
    "note_finite",
    "on_fresh_stack",
    "refuse_colliding_keys",
    "sorted_names",
    "start_with_enough_stack",
    "write_json",
]

UNWRITABLE_DEPTH = "cannot write the record: a value in it refers to itself or is nested too deeply"
"""The ValueError of a record writer that ran out of recursion (a cycle, or thousands of levels)."""

WRITTEN_NESTING = 990
"""The deepest JSON text `write_json` writes (arrays and objects, the record itself being 1): what every
supported interpreter reads. Python 3.10 and 3.11 read about 993 levels at the default recursion limit,
3.12 about 1,495, 3.13 about 9,996 (their JSON decoder's own limit): text a 3.13 process wrote 995 levels
deep would not load on 3.10. Reading is not limited here: a newer interpreter reads deeper than it writes."""


CANONICAL_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
"""The schema's UUID form (envelope `$defs/uuid`), for `fullmatch`: what records must use."""


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def matches(pattern: str, text: str) -> bool:
    """Whether `text` matches a schema `pattern` anchored at both ends.

    `fullmatch` keeps ECMA-262 semantics (what ajv and jsonschema-rs apply): Python's `$` alone would
    also accept a trailing newline.
    """
    return _compiled(pattern).fullmatch(text) is not None


class RecordFieldError(ValueError):
    """A content field that breaks its schema; `field` names it, `value` is what was given."""

    def __init__(self, field: str, message: str, value: Any) -> None:
        super().__init__(message)
        self.field = field
        self.value = value

    @classmethod
    def unknown(cls, owner: str, names: Iterable[str], record: Any) -> RecordFieldError:
        first, *rest = sorted_names(names)
        others = f" (and {', '.join(map(repr, rest))})" if rest else ""
        return cls(first, f"{owner} has no field {first!r}{others}", record)


def sorted_names(names: Iterable[Any]) -> list[Any]:
    """Field names in order for an error message; keys of mixed types (`{1: "a", "b": 2}`) by their
    repr, since they do not compare."""
    listed = list(names)
    try:
        return sorted(listed)
    except TypeError:
        return sorted(listed, key=repr)


def loads_json(text: str | bytes) -> Any:
    """Strict JSON: `NaN`/`Infinity` and numbers with a fraction or exponent beyond a double (`1e400`)
    are errors (Python's json module would turn them into floats no record can hold), and so is a
    document nested deeper than the interpreter's recursion limit lets the decoder go. Every error of a
    text is a `json.JSONDecodeError` (a ValueError) with its place, as a syntax error's is; bytes that are
    not UTF-8 are a UnicodeDecodeError. An integer literal is read exactly, however long (JavaScript's
    JSON.parse would round it; the schemas bound the numbers a record holds)."""
    if type(text) is str:
        # The usual document: a value from its first character to its last. The scanner alone skips
        # decode()'s two whitespace matches and the raw_decode frame (~1 µs of ~4 for a message record);
        # anything else (leading or trailing whitespace, a BOM, an error of any kind) is read again below,
        # which gives every error its own type and message.
        try:
            value, end = _scan_strict(text, 0)
        except (StopIteration, ValueError, RecursionError):
            end = -1  # not read here: the full decoder below reads it again and raises the error itself
        if end == len(text):
            return value
    # Bytes are UTF-8 (RFC 8259 for JSON between systems, and what the CLI reads): strictly, so bytes
    # that other readers would decode differently (UTF-16, an encoded lone surrogate) are refused, as
    # is a BOM, in bytes or text.
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    elif not isinstance(text, str):
        # json.loads's own wording; without it a memoryview reached the decoder's regex as "cannot use a
        # string pattern on a bytes-like object".
        raise TypeError(f"the JSON object must be str, bytes or bytearray, not {type(text).__name__}")
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _decode(text)


def _decode(text: str, on_fresh_stack: bool = False) -> Any:
    decoder = _STRICT_DECODER
    try:
        try:
            return decoder.decode(text)
        except ValueError as error:
            # int() refuses literals past sys.get_int_max_str_digits() (4300 by default): read them
            # exactly, as records write them, with the decoder that converts them in pieces.
            if "integer string conversion" not in str(error):
                raise
            decoder = _LONG_INT_DECODER
            return decoder.decode(text)
    except json.JSONDecodeError:
        raise  # a syntax error, placed by the decoder
    except ValueError as error:  # a hook refused a literal (`NaN`, `1e400`); hooks are given no place
        raise json.JSONDecodeError(str(error), text, _refused_literal_at(text)) from None
    except RecursionError:  # the C scanner recurses per level: too deep a document is bad input too
        if not on_fresh_stack and fresh_stack_available():
            # The frames under this call count against the scanner's depth, so a record written near the
            # limit would read at one stack depth and not at a deeper one (a store's row, a snapshot): it is
            # read again where the stack is empty, in a thread of its own, and refused only if it fails there.
            return _on_fresh_stack(_decode, text, True)
        # How deep the decoder reads is measured from this frame, where it just gave up (the stack under
        # it counts against the limit), so the place named is the very bracket it gave up at.
        # Doubling, then halving: the text past that bracket is never scanned (it need not be JSON at all).
        readable, unreadable = 0, None
        while unreadable is None or unreadable - readable > 1:
            depth = 2 * readable + 1 if unreadable is None else (readable + unreadable) // 2
            try:
                decoder.decode("[" * depth + "]" * depth)
                readable = depth
            except RecursionError:
                unreadable = depth
        raise json.JSONDecodeError(_TOO_DEEP, text, _opening_at_depth(text, unreadable)) from None


def on_fresh_stack(function: Callable[..., Any], *arguments: Any) -> Any:
    """`function(*arguments)` again where the stack is empty, in a copy of this context (the finiteness
    notes stay visible): for a writer or a copy that recursed once per level of a value and ran out of
    stack, so that what it can do does not depend on how deep its caller is (as for reading). Only for
    work that runs no code of the caller's and takes no lock: the caller waits for it, holding whatever
    it holds. RecursionError, as the caller's, where no fresh stack would help (see
    `fresh_stack_available`)."""
    if not fresh_stack_available():
        raise RecursionError("no fresh stack to run on")
    return _on_fresh_stack(copy_context().run, function, *arguments)


# Below this a new thread's stack may not hold as many frames as the recursion limit allows (Python 3.10
# spends C stack on every Python call, and `threading.stack_size()` may have been set small): a retry
# there could crash the process where the caller's RecursionError is an error it can handle.
_ENOUGH_STACK = 4 * 1024 * 1024
_FRESH = threading.local()  # `on` in a thread `_on_fresh_stack` started: no retry inside a retry


def fresh_stack_available() -> bool:
    """Whether `on_fresh_stack` would run (see `_ENOUGH_STACK`)."""
    return new_threads_have_enough_stack() and not getattr(_FRESH, "on", False)


def new_threads_have_enough_stack() -> bool:
    """Whether a thread started now gets a stack that holds as many frames as the recursion limit
    allows (see `_ENOUGH_STACK`: the program may have set `threading.stack_size()` small)."""
    size = _program_stack_size()
    return size == 0 or size >= _ENOUGH_STACK


_STACK_SIZE_LOCK = threading.Lock()  # the library's reads and changes of the process's setting, one at a time


def _program_stack_size() -> int:
    """The program's `threading.stack_size()` setting (0: the platform's default), left as it is: called
    without a size, `stack_size` also sets the default, so what it read is put back at once (review bx:
    reading it this way reset a program's setting, a small stack for many threads or a deep one)."""
    with _STACK_SIZE_LOCK:
        size = _thread.stack_size()
        if size:
            _thread.stack_size(size)
    return size


def start_with_enough_stack(thread: threading.Thread) -> None:
    """`thread.start()`, with a stack of at least `_ENOUGH_STACK` even where the program set
    `threading.stack_size()` smaller: the setting is the process's, so it is raised for this start only
    and put back (kept as the program set it, if it did meanwhile). Where the platform lets no program
    set it, the thread starts with the default."""
    with _STACK_SIZE_LOCK:
        try:
            previous = _thread.stack_size(_ENOUGH_STACK)  # setting it returns the program's setting
        except (ValueError, RuntimeError):  # no setting to be made here: the platform's default stands
            thread.start()
            return
        if previous == 0 or previous >= _ENOUGH_STACK:  # deep enough as the program has it
            _thread.stack_size(previous)
            thread.start()
            return
        try:
            thread.start()
        finally:
            meanwhile = _thread.stack_size(previous)
            if meanwhile != _ENOUGH_STACK:  # the program set its own while this thread started: kept
                _thread.stack_size(meanwhile)


def _on_fresh_stack(function: Callable[..., Any], *arguments: Any) -> Any:
    """`function(*arguments)` run in a new thread (an almost empty stack), its result or its exception.
    A bare thread, one frame under `function`: threading.Thread's own frames would cost the scanner
    levels, and a record a writer made near the limit from a shallow stack could then be read nowhere."""
    outcome: dict[str, Any] = {}
    finished = _thread.allocate_lock()
    finished.acquire()

    def run() -> None:
        _FRESH.on = True
        try:
            outcome["value"] = function(*arguments)
        except BaseException as error:  # handed to the caller, whatever it is
            outcome["error"] = error
        finally:
            finished.release()

    _thread.start_new_thread(run, ())
    finished.acquire()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def check_mode(mode: Any) -> None:
    """A record writer's `mode`: "json" or "python" (LionAGI's "db" mode and others are not records)."""
    if mode != "json" and mode != "python":
        raise ValueError(f"unsupported mode {mode!r}: records are written in mode 'json' or 'python'")


# The records built, within one container's record, of finite numbers only (by id, each kept alive with
# its id until the check ran): see note_finite. None outside `finite_parts_noted`.
_FINITE_PARTS: ContextVar[dict[int, Any] | None] = ContextVar("lionmsg_finite_parts", default=None)


@contextmanager
def finite_parts_noted() -> Iterator[dict[int, Any]]:
    """While a record is built: the parts `note_finite` marks (by id), for `check_finite` to skip. Per
    thread and task (a context variable); a nested use notes into its own."""
    noted: dict[int, Any] = {}
    token = _FINITE_PARTS.set(noted)
    try:
        yield noted
    finally:
        _FINITE_PARTS.reset(token)


def note_finite(record: dict[str, Any]) -> None:
    """Mark a record, just built and holding finite numbers only (a message's one-pass record, whose
    copy refuses the rest), so the check of the container record it goes into does not walk it again."""
    noted = _FINITE_PARTS.get()
    if noted is not None:
        noted[id(record)] = record


def check_finite(data: Any, finite_parts: dict[int, Any] | None = None) -> None:
    """Raise ValueError at the first NaN or infinity in JSON-mode data (dicts, lists, scalars), naming
    where it is: JSON has no spelling for them, and writing `null` instead would lose the value. The
    dicts `finite_parts` holds (noted while the data was built) are known finite and not walked."""
    pending = [data]
    while pending:  # one pass without paths: the common case finds nothing
        value = pending.pop()
        kind = type(value)
        if kind is dict:
            if finite_parts and id(value) in finite_parts:
                continue
            pending.extend(value.values())
        elif kind is list:
            pending.extend(value)
        elif kind is float and not math.isfinite(value):
            raise ValueError(f"cannot write {value!r} as JSON (at {_path_to_non_finite(data, '$')})")


def write_json(record: Any) -> str:
    """A checked JSON-mode record as compact JSON text (pydantic-core's writer, the same bytes
    `model_dump_json` writes), or the standard library's where pydantic-core refuses: a lone
    surrogate (JSON holds it as an escape, and records read with one load) or nesting deeper than
    ~255 levels. Anything neither can write is pydantic-core's error."""
    try:
        return _write_json(record).decode()
    except PydanticSerializationError as error:
        _refuse_surrogate_pairs(record)  # pydantic-core refuses every surrogate: only this road meets them
        try:
            try:
                text = _dumps(record)
            except RecursionError:  # as for reading: the frames under this call count, so again on a fresh stack
                text = cast(str, on_fresh_stack(_dumps, record))
        except RecursionError:
            raise ValueError(UNWRITABLE_DEPTH) from None
        except (TypeError, ValueError):
            raise error from None
        # Only this road meets deep text: pydantic-core refuses anything deeper than ~255 levels.
        if _nesting(text) > WRITTEN_NESTING:
            raise ValueError(UNWRITABLE_DEPTH) from None
        return text


# A string as one unrolled run (a character at a time cost ~100x more on long text), or a bracket.
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _nesting(text: str) -> int:
    """How deep the arrays and objects of compact JSON text nest (brackets inside strings skipped); a
    text with too few brackets to reach WRITTEN_NESTING is not scanned."""
    if text.count("[") + text.count("{") <= WRITTEN_NESTING:
        return 0
    depth = deepest = 0
    for token in _STRUCTURE.finditer(text):
        mark = token.group()[0]  # a string starts with its quote
        if mark == "[" or mark == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif mark == "]" or mark == "}":
            depth -= 1
    return deepest


def _dumps(record: Any) -> str:
    try:
        return json.dumps(record, separators=(",", ":"), allow_nan=False)
    except ValueError as refusal:
        # int() spells no more than sys.get_int_max_str_digits() digits: write such integers in pieces,
        # as records read them (a lone surrogate beside one brought us here).
        if "integer string conversion" not in str(refusal):
            raise
        return "".join(_json_pieces(record, []))


def _json_pieces(value: Any, pieces: list[str]) -> list[str]:
    """`json.dumps(value, separators=(",", ":"), allow_nan=False)` as pieces of text, integers of any
    length written exactly (for JSON-mode data: dicts with string keys, lists, scalars)."""
    kind = type(value)
    if kind is dict:
        pieces.append("{")
        for number, (key, item) in enumerate(value.items()):
            if type(key) is not str:
                raise TypeError(f"a record's keys are strings, not {type(key).__name__}")
            pieces.append(f"{',' if number else ''}{json.dumps(key)}:")
            _json_pieces(item, pieces)
        pieces.append("}")
    elif kind is list:
        pieces.append("[")
        for number, item in enumerate(value):
            if number:
                pieces.append(",")
            _json_pieces(item, pieces)
        pieces.append("]")
    elif kind is int:
        pieces.append(_exact_text(value))
    else:  # text, a float, a bool, None (or what the writer refuses, as it refuses it)
        pieces.append(json.dumps(value, allow_nan=False))
    return pieces


class KeyCollisionError(ValueError):
    """A dict key that is no string whose JSON text another key of its dict has (`refuse_colliding_keys`).
    Raised where a part's record is made, its place named from that part's top (`$`): a container that
    holds the part names it from its own with `inside`, so the caller reads the place in the record it
    asked for. The parts are kept as `args`, so the error pickles and copies as any exception."""

    def __init__(self, key: str, place: str, clash: str) -> None:
        super().__init__(key, place, clash)

    @property
    def place(self) -> str:
        """Where the dict is, as a JSONPath from the top of the record being written."""
        return str(self.args[1])

    def inside(self, prefix: str) -> None:
        """Name the place from a record that holds this part's record at `prefix` (`$.messages`)."""
        key, place, clash = self.args
        self.args = (key, prefix + place[1:], clash)

    def __str__(self) -> str:
        key, place, clash = self.args
        return f"cannot write {key} as a JSON key (at {place}): {clash} (a JSON object keeps one value per key)"


def refuse_colliding_keys(value: Any, path: str) -> None:
    """ValueError where a dict in `value` (free-form data: dicts, arrays and dataclasses holding them;
    not inside a pydantic model, which its own serializer writes) has a key that is no string whose
    JSON text, by pydantic's rule, is another key's too (`1` and `"1"`, `None` and `"None"`): the JSON
    record would keep one of the two values, silently (review bt; LionAGI's writer refuses every such
    key). `path` names `value` in the record."""
    pending = [(value, path)]
    seen: set[int] = set()  # each container once: data that holds itself is the writers' to refuse
    while pending:
        value, path = pending.pop()
        kind = type(value)
        if kind in _SCALARS or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):  # an OrderedDict, a defaultdict too
            if not all(type(key) is str for key in value):
                _refuse_a_second_text(value, path)
            pending.extend((item, _entry_path(path, key)) for key, item in value.items())
        elif isinstance(value, (list, tuple, set, frozenset, deque)):  # what pydantic writes as arrays
            pending.extend((item, f"{path}[{index}]") for index, item in enumerate(value))
        elif (  # a content object, any plain dataclass (a pydantic one has its serializer, as a model)
            dataclasses.is_dataclass(value)
            and not isinstance(value, type)
            and not hasattr(value, "__pydantic_serializer__")
        ):
            fields = [field.name for field in dataclasses.fields(value)]
            pending.extend((getattr(value, name, None), f"{path}.{name}") for name in fields)
        # A pydantic model is written by its own serializer (which may rename or leave out what it holds):
        # pydantic's rule holds inside it, as in any model of the caller's.


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _refuse_a_second_text(mapping: dict[Any, Any], path: str) -> None:
    texts: dict[str, Any] = {}
    for key in mapping:
        try:
            text = key if type(key) is str else next(iter(to_jsonable_python({key: None})))
        except Exception:  # a key JSON has no text for: the writer's own error says so
            continue
        if text in texts:
            first, second = (texts[text], key) if type(key) is str else (key, texts[text])
            raise KeyCollisionError(repr(first), path, f"it would be {text!r}, which the key {second!r} is too")
        texts[text] = key


def _entry_path(path: str, key: Any) -> str:
    if type(key) is not str:
        return f"{path}[{key!r}]"
    return f"{path}.{key}" if key.isprintable() else f"{path}[{key!r}]"  # a key that would not print


def _path_to_non_finite(value: Any, path: str) -> str | None:
    return _path_to(value, path, lambda found: type(found) is float and not math.isfinite(found))


def _path_to(value: Any, path: str, wanted: Callable[[Any], bool]) -> str | None:
    """Where in JSON-mode data the first `wanted` value or key is (a key: the path of its entry)."""
    if wanted(value):
        return path
    items = value.items() if type(value) is dict else enumerate(value) if type(value) is list else ()
    for key, item in items:
        where = f"{path}[{key}]" if type(key) is int else _entry_path(path, key)
        found = where if wanted(key) else _path_to(item, where, wanted)
        if found is not None:
            return found
    return None


# A high surrogate followed by a low one: two code points in a Python str, written as two escapes, which
# every JSON reader (Python's too) reads as the one character they encode together.
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _holds_a_surrogate_pair(value: Any) -> bool:
    return type(value) is str and _SURROGATE_PAIR.search(value) is not None


def _refuse_surrogate_pairs(record: Any) -> None:
    """ValueError, naming the place, for text no JSON can hold: the record would read back changed."""
    pending = [record]
    while pending:  # one pass without paths: the common case finds nothing
        value = pending.pop()
        kind = type(value)
        if kind is dict:
            pending.extend(value)
            pending.extend(value.values())
        elif kind is list:
            pending.extend(value)
        elif _holds_a_surrogate_pair(value):
            raise ValueError(
                f"cannot write {value!r} as JSON (at {_path_to(record, '$', _holds_a_surrogate_pair)}): a high "
                "surrogate followed by a low one is read back as the one character they encode"
            )


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range for a JSON number")
    return number


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_TOO_DEEP = "arrays and objects nested too deeply to read"

# What a JSON text holds outside its strings, token by token, for placing the errors the decoder gives no
# place: a whole string (so nothing inside one counts), a bracket, or a number or constant literal. In a
# text the decoder read up to an error, the tokens before the error are in step with its reading.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{\]}]|NaN|-?Infinity|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?')


def _refused_literal_at(text: str) -> int:
    """Where the first literal the strict hooks refuse starts: `NaN`, `Infinity`, `-Infinity`, or a
    number with a fraction or exponent beyond a double."""
    for token in _TOKENS.finditer(text):
        literal = token.group()
        if literal in ("NaN", "Infinity", "-Infinity"):
            return token.start()
        if literal[0] in "-0123456789" and not literal.lstrip("-").isdigit() and math.isinf(float(literal)):
            return token.start()
    return 0  # unreachable for a text a hook refused; the document's start is still a true place


def _opening_at_depth(text: str, wanted: int) -> int:
    """Where the first array or object `wanted` levels deep opens (the outermost is level 1)."""
    depth = 0
    for token in _TOKENS.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth == wanted:
                return token.start()
        elif bracket in ("]", "}"):
            depth -= 1
    return 0  # unreachable when the text nests that deep


def _exact_int(text: str) -> int:
    """`int(text)` for a JSON integer literal of any length: a long one is converted half by half, so
    no single conversion passes the interpreter's digit limit (a guard against slow conversions, which
    this keeps: the halves make it O(n log n) multiplications)."""
    digits = text.lstrip("-")
    if len(digits) <= _DIGITS_PER_PIECE:
        return int(text)
    split = len(digits) // 2
    value: int = _exact_int(digits[:-split]) * 10**split + _exact_int(digits[-split:])
    return -value if text.startswith("-") else value


def _exact_text(number: int) -> str:
    """`str(number)` for an integer of any length: `_exact_int`'s inverse, a long one spelled half by half."""
    if -_PIECE_BOUND < number < _PIECE_BOUND:
        return str(number)
    if number < 0:
        return "-" + _exact_text(-number)
    split = (number.bit_length() * 3 // 10) // 2  # about half its digits (log10(2) > 0.3)
    high, low = divmod(number, 10**split)
    return _exact_text(high) + _exact_text(low).zfill(split)


_DIGITS_PER_PIECE = 640  # the smallest limit sys.set_int_max_str_digits takes (the default is 4300)

_PIECE_BOUND = 10**_DIGITS_PER_PIECE

# One decoder for every call: json.loads with hooks builds a new decoder (and scanner) each time.
_STRICT_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_not_json)
_LONG_INT_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_not_json, parse_int=_exact_int)
# The decoder's scanner: (value, end) of the value starting at an index, StopIteration when none does
# (an attribute every JSONDecoder sets, which typeshed does not declare).
_scan_strict: Callable[[str, int], tuple[Any, int]] = _STRICT_DECODER.scan_once  # type: ignore[attr-defined]
