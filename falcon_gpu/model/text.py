"""Names every wire can carry: text read from the host, decoded with replacement at the boundary.

Linux names are bytes: a pod log directory, a symlink target, a process name, a
container runtime's JSON file may hold bytes that are not UTF-8. Python hands such
bytes back as lone surrogates (``os.listdir`` decodes with ``surrogateescape``), and a
JSON ``"\\udcff"`` escape gives one too. No UTF-8 encoder takes a lone surrogate: the
text format of ``/metrics`` and the Pushgateway, the remote-write protobuf and a log
line would all raise ``UnicodeEncodeError`` for the whole scrape or batch, every cycle.

So what the agent reads from the host goes through :func:`host_name` (a file name or
link target: its bytes decoded as UTF-8, U+FFFD for what is not) or :func:`utf8_text`
(a string from anywhere else: each lone surrogate becomes U+FFFD) before it reaches the
model, and the encoders apply :func:`utf8_text` once per new label set as a last guard.
Both are pure and cheap on the usual ASCII name (one ``isascii`` check).
"""

from __future__ import annotations

import os
import re

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """``text`` with every lone surrogate (which UTF-8 cannot carry) replaced by U+FFFD."""
    if text.isascii():
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def host_name(name: str) -> str:
    """A name the file system gave (``os.listdir``, ``os.readlink``) as UTF-8 text: its original
    bytes decoded with replacement, as ``os.fsencode(name).decode("utf-8", "replace")``."""
    if name.isascii():
        return name
    try:
        return os.fsencode(name).decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte: not from the file system
        return utf8_text(name)


def host_bytes(data: bytes) -> str:
    """A file's bytes (a runtime's JSON, a ``/proc`` file) as UTF-8 text, U+FFFD for what is not."""
    return data.decode("utf-8", "replace")


def encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogate)."""
    return text.isascii() or _SURROGATE.search(text) is None
