"""What may go into an HTTP request header, checked before anything is sent.

requests and http.client refuse a header name that is not an RFC 9110 token
and a value with a line break, a leading space or a character outside
Latin-1, but only when the request is built: every batch would then be dropped
as "refused" although no server ever saw it. The same rules are applied here
at start (the ``headers`` setting) and to each bearer token read from its file.
"""

from __future__ import annotations

import re

# RFC 9110 section 5.6.2: token = 1*tchar
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# field-value: visible ASCII, with spaces and tabs only between visible characters
_VALUE = re.compile(r"(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?")
# a bearer token (RFC 6750 b64token, leniently): visible ASCII, no spaces
_CREDENTIAL = re.compile(r"[\x21-\x7e]+")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a header name, or None when it can."""
    if _TOKEN.fullmatch(name):
        return None
    return f"header name {name!r} is not a valid HTTP token (letters, digits and !#$%&'*+-.^_`|~)"


def value_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot be sent as header ``name``, or None when it can."""
    if _VALUE.fullmatch(value):
        return None
    return (
        f"the value of header {name!r} has a line break, a control or non-ASCII character, "
        "or leading/trailing whitespace"
    )


def credential_ok(token: str) -> bool:
    """Whether ``token`` can be sent as ``Authorization: Bearer <token>``."""
    return _CREDENTIAL.fullmatch(token) is not None
