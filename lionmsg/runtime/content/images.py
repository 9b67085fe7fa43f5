"""The image reference contract of instructions (design.md §6.7): a format contract, nothing is fetched.

An image is an http(s) URL with a host (and a port from 0 to 65535, when given), a
`data:image/{png,jpeg,gif,webp};base64,` URI with a non-empty, correctly padded payload, or raw base64
(sent as a JPEG data URI). The authoritative patterns live in
`schemas/content/instruction.schema.json` and run as the generated field check; this module adds the
Python conversions and error messages that say what is wrong.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["image_problem", "image_url"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# ECMA-262's white space, as the schema spells it out (Python's str.isspace differs at the edges).
_WHITE_SPACE = re.compile("[\t\n\x0b\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]")
# The schema's authority (white space is refused before): optional user information, a host name or
# address, or a bracketed IPv6 literal, and an optional port within 0-65535.
_PORT = r"(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
_AUTHORITY = re.compile(rf"[A-Za-z]+://(?:[^/?#@]*@)?(?:[^/?#@:\[\]]+|\[[^/?#@\[\]]+\])(?::{_PORT})?(?:[/?#]|$)")
# The schema's base64: groups of four, correctly padded (b64decode also takes `AAAA====`).
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})")
_DATA_IMAGE = re.compile(r"data:image/(png|jpe?g|gif|webp);base64,(.*)", re.DOTALL)


def _base64_problem(payload: str) -> str | None:
    if not payload:
        return "its base64 payload is empty"
    return None if _BASE64.fullmatch(payload) else "its payload is not valid base64"


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
        return None if _AUTHORITY.match(ref) else "an image URL must name a host (and a port from 0 to 65535, if any)"
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
