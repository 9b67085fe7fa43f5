"""The image contract of instructions (design.md §6.7): a format contract, checked when content is built."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from generate import SCHEMA_DIR
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from lionmsg import Instruction, InstructionContent, Message
from lionmsg.runtime.content.images import image_problem
from lionmsg.runtime.wire import matches
from lionmsg.schema.patterns import python_pattern
from tests.conftest import fields_of

VALID = [
    "https://example.com/a.png",
    "http://93.184.216.34/a.png",
    "HTTPS://8.8.8.8/a.png",
    "https://[2606:4700::1111]/a.png",
    "https://host.example:8443/p/a.png?size=2#frag",
    "https://localhost/a.png",
    "https://user:secret@host.example:65535/a.png",
    "http://h:0",
    "http://h:0080/a.png",  # four digits, leading zeros and all
    "https://a.example/%00.png",  # the path is not looked at (LionAGI refuses a percent-encoded NUL)
    "data:image/png;base64,iVBORw0KGgo=",
    "data:image/jpeg;base64,/9j/4AAQ",
    "data:image/jpg;base64,/9j/4AAQ",
    "data:image/gif;base64,R0lGODlh",
    "data:image/webp;base64,UklGRg==",
    "iVBORw0KGgo=",
    "AAAA",
]
INVALID = [
    ("file:///etc/passwd", "scheme 'file' is not allowed"),
    ("javascript:alert(1)", "scheme 'javascript' is not allowed"),
    ("ftp://example.com/a.png", "scheme 'ftp' is not allowed"),
    ("C:\\pictures\\a.png", "scheme 'c' is not allowed"),
    ("data:image/svg+xml;base64,PHN2Zz4=", "data:image/png, jpeg, gif or webp"),
    ("data:text/plain;base64,AAAA", "data:image/png, jpeg, gif or webp"),
    ("data:image/png,notbase64", "data:image/png, jpeg, gif or webp"),
    ("data:image/png;base64,", "payload is empty"),
    ("data:image/png;base64,AAA", "payload is not valid base64"),
    ("data:image/png;base64,!!!!", "payload is not valid base64"),
    ("not base64 at all!!", "not valid base64"),
    ("AAA", "not valid base64"),
    ("", "payload is empty"),
    ("https://", "must name a host"),
    ("https:///nohost.png", "must name a host"),
    ("https://exa mple.com/a.png", "must not contain white space"),
    ("http://:80/a.png", "must name a host"),
    ("http://@/a.png", "must name a host"),
    ("https://user@/x.png", "must name a host"),
    ("http://h:99999/a.png", r"must name a host \(and a port from 0 to 65535, if any\)"),
    ("http://h:abc/a.png", "must name a host"),
    ("http://h:08080/a.png", r"a port from 0 to 65535"),  # five digits only without a leading zero
    ("http://h:/a.png", r"a port from 0 to 65535"),  # an empty port
    ("https://a.example/x y.png", "must not contain white space"),  # LionAGI sends these as written
    ("https://a.example/p?q=a b", "must not contain white space"),
    ("http://[::1/a.png", "must name a host"),
    ("data:image/png;base64,AAAA====", "payload is not valid base64"),  # b64decode takes it; the schema not
    ("AAAA====", "not valid base64"),
]


@pytest.mark.parametrize("ref", VALID)
def test_valid_images_pass(ref: str) -> None:
    assert image_problem(ref) is None
    assert InstructionContent(images=[ref]).images == [ref]


@pytest.mark.parametrize(("ref", "reason"), INVALID)
def test_invalid_images_are_rejected_when_content_is_built(ref: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        InstructionContent(images=[ref])
    with pytest.raises(ValueError, match=reason):
        Instruction(content={"images": ["https://ok.example/a.png", ref]})


def test_a_single_image_is_wrapped_and_non_strings_are_rejected() -> None:
    assert InstructionContent.from_dict({"images": "AAAA"}).images == ["AAAA"]
    with pytest.raises(ValueError, match="an image must be a string"):
        InstructionContent(images=[5])  # type: ignore[list-item]


@pytest.mark.parametrize("detail", ["low", "high", "auto", None])
def test_image_detail_values(detail: Any) -> None:
    assert InstructionContent(images=["AAAA"], image_detail=detail).image_detail == detail


@pytest.mark.parametrize("bad", ["ultra", "LOW", "", 1])
def test_other_image_detail_values_are_rejected(bad: Any) -> None:
    with pytest.raises(ValueError, match="image_detail must be one of"):
        InstructionContent(image_detail=bad)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda content: content.images.append("file:///etc/passwd"), "scheme 'file' is not allowed"),
        (lambda content: setattr(content, "image_detail", "ultra"), "image_detail 'ultra' is not one of"),
    ],
)
def test_an_image_broken_in_place_after_building_is_never_sent(change: Any, reason: str) -> None:
    # Validation happens when content is built; a list changed in place afterwards is checked again
    # when it is rendered for a provider: a failed projection, not a file:// URL in a chat message.
    message = Instruction(content={"instruction": "look", "images": ["https://ok.example/a.png"]})
    change(message.content)
    with pytest.raises(ValueError, match=reason):
        _ = message.rendered
    assert message.chat_msg is None


def test_a_bad_image_or_detail_leaves_an_existing_message_unchanged() -> None:
    message = Instruction(content={"instruction": "look", "images": ["AAAA"]}, sender="alice")
    before, content = fields_of(message), message.content.to_dict()
    with pytest.raises(ValueError, match="scheme 'file' is not allowed"):
        message.update(images=["file:///etc/passwd"])
    with pytest.raises(ValueError, match="not valid base64"):
        message.update(sender="bob", images=["AAA"])
    with pytest.raises(ValueError, match="image_detail must be one of"):
        message.update(image_detail="ultra")
    assert fields_of(message) == before
    assert message.content.to_dict() == content


@pytest.mark.parametrize(("ref", "reason"), INVALID)
def test_an_invalid_image_never_enters_through_a_record_and_the_error_says_which_and_why(ref: str, reason: str) -> None:
    # As building the content says it (review at F4): not the schema's three patterns recited.
    record = Instruction(content={"images": ["AAAA"]}).to_dict()
    record["content"]["images"] = ["https://ok.example/a.png", ref]
    loaders = [Message.from_dict, Instruction.from_dict, lambda r: Message.from_json(json.dumps(r))]
    for load in loaders:
        with pytest.raises(ValidationError) as caught:
            load(record)
        (error,) = caught.value.errors()
        assert error["loc"] == ("content", "images")
        assert error["msg"].startswith("InstructionContent.images[1]: ")
        assert re.search(reason, error["msg"])
        assert error["input"] == ref


def test_images_that_are_no_list_in_a_record_are_named_in_words() -> None:
    """A record's `images` must be a list; the message says what its items are (`x-lionmsg-expected`)."""
    record = Instruction(content={"images": ["AAAA"]}).to_dict()
    record["content"]["images"] = "https://ok.example/a.png"
    with pytest.raises(ValidationError) as caught:
        Message.from_dict(record)
    (error,) = caught.value.errors()
    assert error["loc"] == ("content", "images")
    assert error["msg"] == (
        "InstructionContent.images must be an array of items that are each an image reference (an http(s) URL, "
        "a base64 data:image URI of a PNG, JPEG, GIF or WebP image, or raw base64)"
    )


PATTERNS = [
    definition["pattern"]
    for definition in json.loads((SCHEMA_DIR / "content" / "instruction.schema.json").read_text())["$defs"].values()
    if "pattern" in definition
]
REFS = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="ABCDabcd0189+/=", max_size=12),
    st.builds("".join, st.lists(st.sampled_from(["https://", "http:", "//", "data:image/png;base64,", "a", "=", " "]))),
    st.sampled_from(VALID),
    st.sampled_from([r for r, _ in INVALID]),
    # What each pattern accepts, drawn from the pattern itself: a schema loosened (a new media type, a
    # wider host) without the same change here fails (review am P2-2).
    *(st.from_regex(python_pattern(pattern), fullmatch=True) for pattern in PATTERNS),
)


@given(REFS)
def test_the_python_contract_agrees_with_the_schema_patterns(ref: str) -> None:
    # image_problem explains what is wrong; the schema's patterns decide. They must agree.
    assert len(PATTERNS) == 3
    schema_accepts = any(matches(pattern, ref) for pattern in PATTERNS)
    assert (image_problem(ref) is None) == schema_accepts
