"""The image reference contract of instructions (design.md §6.7): a format contract, nothing is fetched.

An image is an http(s) URL with a host, a `data:image/{png,jpeg,gif,webp};base64,` URI with a
non-empty, valid payload, or raw base64 (sent as a JPEG data URI). The authoritative patterns live in
`schemas/content/instruction.schema.json` and run as the generated field check; this module adds the
Python conversions and error messages that say what is wrong.
"""

from __future__ import annotations

import base64
import re
from typing import Any

__all__ = ["image_problem", "image_url"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# ECMA-262's white space, as the schema spells it out (Python's str.isspace differs at the edges).
_WHITE_SPACE = re.compile("[\t\n\x0b\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]")
_HOST = re.compile(r"[A-Za-z]+://[^/?#]")
_DATA_IMAGE = re.compile(r"data:image/(png|jpe?g|gif|webp);base64,(.*)", re.DOTALL)


def _base64_problem(payload: str) -> str | None:
    if not payload:
        return "its base64 payload is empty"
    try:
        # Padded base64 comes in groups of four; b64decode alone would take a bare "=" on Python 3.10.
        decoded = base64.b64decode(payload, validate=True) if len(payload) % 4 == 0 else b""
    except ValueError:  # binascii.Error, or non-ASCII text
        decoded = b""
    return None if decoded else "its payload is not valid base64"


def image_problem(ref: Any) -> str | None:
    """Why `ref` breaks the image contract, or None when it keeps it."""
    if not isinstance(ref, str):
        return f"an image must be a string, got {type(ref).__name__}"
    scheme = _SCHEME.match(ref)
    if scheme is None:
        problem = _base64_problem(ref)
        return None if problem is None else f"not an http(s) URL, a data:image URI or raw base64: {problem}"
    name = scheme.group(0)[:-1].lower()
    if name in ("http", "https"):
        if _WHITE_SPACE.search(ref):
            return "an image URL must not contain white space"
        # The schema's rule, not urlsplit's: it rejects hosts (bad IPv6 brackets, NFKC tricks) that the
        # schema accepts, and every client must agree on what is valid.
        return None if _HOST.match(ref) else "an image URL must name a host"
    if name == "data":
        data = _DATA_IMAGE.fullmatch(ref)
        if data is None:
            return "a data URI must be data:image/png, jpeg, gif or webp with ;base64,"
        problem = _base64_problem(data.group(2))
        return None if problem is None else f"a data:image URI whose {problem.removeprefix('its ')}"
    return f"image scheme {name!r} is not allowed: use http(s) URLs or data:image/...;base64 URIs"


def image_url(ref: str) -> str:
    """The URL a provider receives: raw base64 becomes a JPEG data URI, the rest is sent as is."""
    return ref if _SCHEME.match(ref) else f"data:image/jpeg;base64,{ref}"
