"""``basic_auth_users``: bcrypt-checked credentials, in the time a bcrypt check takes, always.

As in exporter-toolkit: a user that does not exist is checked against a fixed hash of the same
cost, so the answer's timing tells nothing about which user names exist; bcrypt's own comparison
is constant-time; one check runs at a time (each is ~70 ms of CPU at cost 10, and a flood of
wrong passwords must not take every core); the outcome of a (user, hash, password) is cached so a
scraper pays the cost once, not every scrape. The cache is bounded and keyed by a SHA-256 of the
three, so no password is kept in memory in the clear.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections import OrderedDict

import bcrypt

NO_SUCH_USER_HASH = b"$2b$10$ke/lnnAz./K8xn2TMDihau8hL3VfAEZF23B531CW2IWIo91v0uGZe"
"""bcrypt (cost 10) of a string nobody sends: what an unknown user's password is checked against."""
CACHE_ENTRIES = 256


def credentials(authorization: str) -> tuple[bytes, bytes] | None:
    """(user, password) from an ``Authorization: Basic …`` header; None when it is not one."""
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


class BasicAuth:
    """Checks credentials against the users of the web configuration in force."""

    def __init__(self) -> None:
        self._bcrypt_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._cache: OrderedDict[bytes, bool] = OrderedDict()

    def allows(self, users: dict[str, bytes], authorization: str) -> bool:
        given = credentials(authorization)
        if given is None:
            return False
        user, password = given
        hashed = users.get(user.decode("utf-8", "surrogateescape"))
        known = hashed is not None
        if hashed is None:
            hashed = NO_SUCH_USER_HASH
        key = hashlib.sha256(b"\0".join((user, hashed, password))).digest()
        with self._cache_lock:
            matched = self._cache.get(key)
            if matched is not None:
                self._cache.move_to_end(key)
        if matched is None:
            with self._bcrypt_lock:
                try:
                    matched = bcrypt.checkpw(password, hashed)
                except ValueError:  # a password bcrypt refuses (e.g. a NUL byte): no match
                    matched = False
            with self._cache_lock:
                self._cache[key] = matched
                while len(self._cache) > CACHE_ENTRIES:
                    self._cache.popitem(last=False)
        return known and matched
