"""Secrets read from files (Kubernetes secret mounts), re-read when the file changes.

Kubernetes rotates a mounted secret by swapping a symlink, so the file's
identity (inode, mtime, size) changes; :class:`SecretFile` checks it with one
``stat`` per use and re-reads only then. The value never appears in ``repr``,
``str`` or error messages. :func:`redact_url` hides the password a URL may carry
(``https://user:pass@host/...``, which requests sends as basic auth) before the
URL goes into a message.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"


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


class SecretError(Exception):
    """The secret file cannot be read; the message names the file, never its content."""


class SecretFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._value = ""

    def value(self) -> str:
        """The current secret, surrounding whitespace stripped. Raises SecretError."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise SecretError(f"cannot read secret file {self.path}: {exc.strerror}") from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._value = self.path.read_text().strip()
                except OSError as exc:
                    raise SecretError(f"cannot read secret file {self.path}: {exc.strerror}") from None
                self._stamp = stamp
            return self._value

    def __repr__(self) -> str:
        return f"SecretFile({str(self.path)!r}, {REDACTED})"

    __str__ = __repr__
