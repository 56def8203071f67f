"""Secrets read from files (Kubernetes secret mounts), re-read when the file changes.

Kubernetes rotates a mounted secret by swapping a symlink, so the file's
identity (inode, mtime, size) changes; :class:`SecretFile` checks it with one
``stat`` per use and re-reads only then. The value never appears in ``repr``,
``str`` or error messages. :func:`redact_url` hides the password a URL may carry
(``https://user:pass@host/...``, which requests sends as basic auth) before the
URL goes into a message, and :func:`scrub` removes the secrets a request carried
(:func:`url_secrets`, :func:`header_secrets`) from a server's answer or an exception
text (a server may echo them back). :mod:`.redactor` does the same for every log line.

A secret file is read as UTF-8 with a byte-order mark (editors on Windows add
one) and surrounding whitespace (the newline ``echo`` adds) stripped: neither is
ever part of a token.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

REDACTED = "<redacted>"
MIN_LENGTH = 4
"""A header or query value shorter than this is not hidden: it would blank out unrelated text in
every answer and log line (``X-Tenant: a``, ``?job=gpu``) and hides nothing worth a name. Tokens,
passwords and user info are hidden whatever their length."""


def redact_url(url: str) -> str:
    """``url`` safe to log: the password of its user info and every query value replaced by
    ``<redacted>`` (some receivers take a token as ``?token=...``/``?api_key=...``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:{REDACTED}@{host}")
    if parts.query:
        pairs = (p.partition("=") for p in parts.query.split("&"))
        parts = parts._replace(query="&".join(f"{k}={REDACTED}" if eq else k for k, eq, _ in pairs))
    return urlunsplit(parts)


PROTOCOL_HEADERS = frozenset(
    ("accept", "accept-encoding", "connection", "content-encoding", "content-length", "content-type",
     "user-agent", "x-prometheus-remote-write-version")
)  # fmt: skip
"""Headers the agent or requests set for the protocol: their values are never secrets (and
hiding ``gzip`` or ``application/x-protobuf`` would blank out a server's useful answer)."""


def url_secrets(url: str) -> list[str]:
    """What a URL carries that only the user knows: every query value (raw and decoded: a
    server may echo either), the user info's password, ``user:password`` and its base64 (requests
    sends it as basic auth)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return [url]
    found = []
    for pair in parts.query.split("&"):
        value = pair.partition("=")[2]
        found += [v for v in (value, unquote_plus(value)) if len(v) >= MIN_LENGTH]
    if password:
        pair = f"{unquote(parts.username or '')}:{unquote(password)}"
        found += [password, unquote(password), pair, base64.b64encode(pair.encode()).decode()]
    return [f for f in found if f]


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """Every value of a header the user configured (an ``X-Api-Key``, a tenant token), and what
    :func:`secrets_of` finds in ``Authorization``; protocol headers' values are left alone."""
    found = [v for k, v in headers.items() if k.lower() not in PROTOCOL_HEADERS and len(v) >= MIN_LENGTH]
    return found + secrets_of(headers)


def secrets_of(headers: Mapping[str, str]) -> list[str]:
    """The secret strings a request's ``Authorization`` header reveals: the whole value,
    its credentials, and for basic auth the decoded ``user:password`` and the password."""
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    if not value:
        return []
    found = [value]
    scheme, _, credentials = value.partition(" ")
    if credentials:
        found.append(credentials)
    if scheme.lower() == "basic" and credentials:
        try:
            pair = base64.b64decode(credentials, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            pair = ""
        if pair:
            found.append(pair)
            password = pair.partition(":")[2]
            if password:
                found.append(password)
    return found


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by ``<redacted>``
    (the longest first, so a token inside its own header value goes as one)."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, REDACTED)
    return text


class SecretError(Exception):
    """The secret file cannot be read; the message names the file, never its content."""


class SecretFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._value = ""

    def value(self) -> str:
        """The current secret, a UTF-8 BOM and surrounding whitespace stripped. Raises
        SecretError when the file cannot be read, is not UTF-8 or is empty."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise SecretError(f"cannot read secret file {self.path}: {exc.strerror}") from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                try:
                    value = self.path.read_text(encoding="utf-8-sig").strip()
                except OSError as exc:
                    raise SecretError(f"cannot read secret file {self.path}: {exc.strerror}") from None
                except UnicodeDecodeError:
                    raise SecretError(f"secret file {self.path} is not UTF-8 text") from None
                if not value:
                    raise SecretError(f"secret file {self.path} is empty")
                self._value, self._stamp = value, stamp
            return self._value

    def __repr__(self) -> str:
        return f"SecretFile({str(self.path)!r}, {REDACTED})"

    __str__ = __repr__
