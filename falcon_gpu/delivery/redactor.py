"""Every configured secret out of everything the agent logs, whoever logs it.

The transport keeps secrets out of its own messages (:mod:`.secrets`), but other code logs
too: urllib3 at DEBUG prints each request line with its query (``POST /w?api_key=…``), and a
server's answer or an exception can echo a header value. So the runtime puts one
:class:`LogRedactor` on the root logger's handlers, where every record ends up (third-party
loggers' included, at every level), built from the settings' secret values: header values, URL
query values and user info, basic-auth passwords and the contents of the secret files (read
again when a file is rotated). ``doctor`` passes its output through the same object.

A header or query value shorter than :data:`~.secrets.MIN_LENGTH` is not hidden (it would blank
out unrelated text in every line); a token, a password or a secret file's content always is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from falcon_gpu.delivery.secrets import SecretError, SecretFile, scrub


class LogRedactor(logging.Filter):
    """A filter for log handlers that replaces each secret by ``<redacted>`` in the message,
    its arguments, the traceback and the stack; also :meth:`scrub` for printed text."""

    def __init__(self, values: Iterable[str] = (), files: Iterable[Path] = ()) -> None:
        super().__init__()
        self._values = sorted({v for v in values if v})
        self._files = [SecretFile(f) for f in sorted(set(files))]
        self._handlers: list[logging.Handler] = []

    def __bool__(self) -> bool:
        return bool(self._values or self._files)

    def _secrets(self) -> list[str]:
        found = list(self._values)
        for secret in self._files:
            try:
                value = secret.value()
            except SecretError:  # the transport reports it; nothing of it can be in a line
                continue
            found.append(value)
        return found

    def scrub(self, text: str) -> str:
        return scrub(text, self._secrets()) if self else text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self:
            return True
        secrets = self._secrets()
        message = record.getMessage()
        shown = scrub(message, secrets)
        if shown != message or record.args:
            record.msg, record.args = shown, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text, secrets)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info, secrets)
        return True

    def install(self) -> None:
        """On every handler of the root logger (what ``basicConfig`` set up, pytest's capture)."""
        if not self:
            return
        for handler in logging.getLogger().handlers:
            if self not in handler.filters:
                handler.addFilter(self)
                self._handlers.append(handler)

    def uninstall(self) -> None:
        for handler in self._handlers:
            handler.removeFilter(self)
        self._handlers.clear()
