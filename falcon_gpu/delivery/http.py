"""The HTTP transport the HTTP sinks share: one keep-alive session per sink, TLS,
auth, extra headers, and the classification of an HTTP answer.

- TLS: ``ca_file`` verifies the server against that CA, ``cert_file``/``key_file``
  present a client certificate, ``insecure_skip_verify`` turns verification
  off (warned once at start).
- Auth: ``bearer_token_file`` or ``basic_auth_user`` + ``basic_auth_password_file``,
  re-read when the file is rotated; or user info in the URL. Secrets go only into
  request headers and never into a log line, a metric or an error message: every
  URL in a message goes through :func:`~.secrets.redact_url`, and a server's answer
  or an exception text through :func:`~.secrets.scrub` with the secrets that request
  carried (a server may echo the ``Authorization`` header back). A token that
  cannot be sent as a header is a secret-file error naming the file (retried: the
  next rotation may fix it), never an exception that shows the token.
- ``timeout`` bounds the whole request, connect to last byte (:mod:`.deadline`).
- A TLS file that disappeared after start (the settings loaded it) is retried like
  a missing secret file: the batch is kept.
- Classification (:func:`classify`): 2xx ok; 429 and 5xx retryable (with the
  ``Retry-After`` they carry); other 4xx permanent, and so are redirects (not
  followed: fix the URL); connection errors, timeouts and an answer cut off
  mid-body (the server went away while replying) retryable.

The session is used from the sink's sender thread only.
"""

from __future__ import annotations

import base64
import email.utils
import logging
import time
from collections.abc import Mapping

import requests

from falcon_gpu.delivery import deadline
from falcon_gpu.delivery import headers as header_rules
from falcon_gpu.delivery.outcome import DeliveryError, PermanentError, RetryableError, truncate
from falcon_gpu.delivery.secrets import (
    SecretError,
    SecretFile,
    header_secrets,
    redact_url,
    scrub,
    url_secrets,
)
from falcon_gpu.delivery.settings import HttpSettings

log = logging.getLogger("falcon_gpu.delivery")


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date; None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def answer_text(response: requests.Response) -> str:
    """The server's answer, safe to log: the secrets the request carried (a server may echo
    its headers or URL: ``Authorization``, an ``X-Api-Key``, a ``?api_key=``) replaced by
    ``<redacted>``."""
    request = response.request
    return scrub(response.text, header_secrets(request.headers) + url_secrets(request.url or ""))


def classify(response: requests.Response, what: str) -> None:
    """Raise for a non-2xx answer: RetryableError for 429/5xx, PermanentError otherwise."""
    status = response.status_code
    if 200 <= status < 300:
        return
    message = f"{redact_url(what)} answered HTTP {status}: {truncate(answer_text(response))}"
    if status == 429 or status >= 500:
        raise RetryableError(message, parse_retry_after(response.headers.get("Retry-After")))
    raise PermanentError(message)


class HttpTransport:
    def __init__(self, config: HttpSettings, *, sink: str) -> None:
        self._timeout = config.timeout
        self._sink = sink
        self._session = requests.Session()
        self._session.trust_env = False  # never route through a proxy from the environment
        deadline.mount(self._session)
        if config.insecure_skip_verify:
            log.warning("sink %s: insecure_skip_verify is on: the server's certificate is NOT checked", sink)
            self._session.verify = False
            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        elif config.ca_file:
            self._session.verify = str(config.ca_file)
        if config.cert_file and config.key_file:
            self._session.cert = (str(config.cert_file), str(config.key_file))
        self._headers = dict(config.headers)
        self._bearer = SecretFile(config.bearer_token_file) if config.bearer_token_file else None
        self._basic_user = config.basic_auth_user
        self._basic_pw = (
            SecretFile(config.basic_auth_password_file) if config.basic_auth_password_file else None
        )

    def _auth_headers(self) -> dict[str, str]:
        if self._bearer is not None:
            token = self._bearer.value()
            if not header_rules.credential_ok(token):
                raise SecretError(
                    f"secret file {self._bearer.path} holds characters that cannot be sent in an "
                    "HTTP header (spaces, control or non-ASCII characters)"
                )
            return {"Authorization": f"Bearer {token}"}
        if self._basic_pw is not None and self._basic_user:
            raw = f"{self._basic_user}:{self._basic_pw.value()}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
        return {}

    def request(
        self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> requests.Response:
        """One request. Raises RetryableError for connection errors, timeouts and an
        unreadable secret file (it may appear on the next rotation); the answer is
        returned whatever its status (see :func:`classify`)."""
        shown = redact_url(url)
        try:
            all_headers = {**self._headers, **(headers or {}), **self._auth_headers()}
        except SecretError as exc:
            raise RetryableError(str(exc)) from None
        hidden = header_secrets(all_headers) + url_secrets(url)
        with deadline.deadline(self._timeout) as limit:
            try:
                # no redirects: requests would turn a redirected POST into a GET and report success
                response = self._session.request(
                    method, url, data=body, headers=all_headers, timeout=self._timeout, allow_redirects=False
                )
            except Exception as exc:
                if limit.expired or isinstance(exc, requests.exceptions.Timeout):
                    raise RetryableError(f"{shown} did not answer within {self._timeout} s") from None
                raise _classified(exc, shown, hidden) from None
            # a cut-off answer can parse as a complete one (headers end at EOF): never a success
            if limit.expired:
                raise RetryableError(f"{shown} did not answer within {self._timeout} s")
            return response

    def probe(
        self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> tuple[bool, str]:
        """For ``doctor``: one request on the sink's write path that changes nothing (each
        sink says which), with its TLS and auth. Only a 2xx passes; anything else fails
        with what to fix. Never shows a secret."""
        shown = redact_url(url)
        try:
            response = self.request(method, url, body, headers)
        except DeliveryError as exc:
            return False, str(exc)
        status = response.status_code
        if 200 <= status < 300:
            return True, f"{shown} accepts writes (HTTP {status} to {method} of nothing)"
        if status in (401, 403):
            fix = "credentials refused: check bearer_token_file or basic_auth_user/basic_auth_password_file"
        elif 300 <= status < 400:
            where = redact_url(response.headers.get("Location", "?"))
            fix = f"redirects to {where}: set url to the final address"
        elif status in (404, 405):
            fix = "wrong path: check url (see docs/SINKS.md for each sink's path)"
        else:
            fix = truncate(answer_text(response))
        return False, f"{shown} answered HTTP {status} to {method}: {fix}"

    def close(self) -> None:
        self._session.close()


def _classified(exc: Exception, shown: str, hidden: list[str]) -> DeliveryError:
    """A failed request as a DeliveryError whose text is safe to log."""
    reason = scrub(_reason(exc), hidden)
    if isinstance(exc, requests.exceptions.SSLError):
        return RetryableError(f"TLS error talking to {shown}: {reason}")
    if isinstance(exc, requests.exceptions.ConnectionError):
        return RetryableError(f"cannot connect to {shown}: {reason}")
    if isinstance(exc, requests.exceptions.ChunkedEncodingError):  # connection lost mid-answer
        return RetryableError(f"{shown} broke off its answer: {reason}")
    if isinstance(exc, requests.exceptions.RequestException):
        return PermanentError(f"invalid request to {shown}: {type(exc).__name__}")
    if isinstance(exc, OSError):  # a TLS file gone since start (requests checks the paths)
        return RetryableError(f"cannot send to {shown}: {reason}")
    return PermanentError(f"cannot send to {shown}: {type(exc).__name__}: {reason}")


def _reason(exc: Exception) -> str:
    """The innermost cause of a requests error, short (no headers are ever part of it)."""
    inner: BaseException = exc
    while inner.__cause__ is not None or (inner.args and isinstance(inner.args[0], BaseException)):
        nxt = inner.__cause__ or inner.args[0]
        if not isinstance(nxt, BaseException):
            break
        inner = nxt
    return truncate(str(inner), 160)
