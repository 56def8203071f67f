"""The TLS files of a sink, loaded once at start so that a bad one exits 2.

requests only opens ``ca_file``, ``cert_file`` and ``key_file`` when it sends,
and a missing file then surfaces as a bare OSError on every batch. Loading
them here with :mod:`ssl`, exactly as the request would, turns a wrong path, a
file that is not PEM, or a key that does not match its certificate into a
setting error. If a file disappears later (a rotated Kubernetes secret), the
transport retries the batch instead (see :mod:`.http`).
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path


def _no_password() -> bytes:
    # never let OpenSSL prompt on the terminal for a key's pass phrase
    raise ValueError("the key is encrypted (requests cannot use a key with a pass phrase)")


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def check_ca_file(path: Path) -> None:
    """Raises ValueError naming ``ca_file`` unless ``path`` is a readable CA bundle (or, as
    requests also takes, a directory of hashed CA certificates)."""
    try:
        if path.is_dir():
            os.listdir(path)  # OpenSSL reads such a directory lazily: only check it can be read
        else:
            ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ValueError(f"ca_file {str(path)!r} cannot be loaded as a PEM CA bundle: {_why(exc)}") from None


def check_client_cert(cert: Path, key: Path) -> None:
    """Raises ValueError naming ``cert_file``/``key_file`` unless they load as a pair."""
    for setting, path in (("cert_file", cert), ("key_file", key)):
        if not path.is_file():
            raise ValueError(f"{setting} {str(path)!r} does not exist or is not a file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_cert_chain(str(cert), str(key), password=_no_password)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ValueError(
            f"cert_file {str(cert)!r} and key_file {str(key)!r} cannot be loaded as a PEM "
            f"certificate and its key: {_why(exc)}"
        ) from None
