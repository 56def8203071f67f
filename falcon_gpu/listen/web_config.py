"""The ``web_config_file`` of ``listen``: exporter-toolkit's YAML format, with its meaning.

dcgm-exporter, nvidia_gpu_exporter and node_exporter take the same file (``--web.config.file``),
so one file and one Secret serve every exporter on a node. Read here: ``tls_server_config``
(``cert_file``, ``key_file``, ``client_auth_type``, ``client_ca_file``, ``min_version``,
``max_version``, ``prefer_server_cipher_suites``), ``http_server_config`` (``headers``, ``http2``)
and ``basic_auth_users`` (bcrypt hashes). Relative paths are relative to the file's directory, as
in exporter-toolkit. Keys the toolkit has and this server cannot honour (inline ``cert``/``key``/
``client_ca``, ``cipher_suites``, ``curve_preferences``, ``client_allowed_sans``, ``rate_limit``)
are refused by name rather than ignored: a security setting silently dropped is worse than a
start that fails. Every problem is a :class:`WebConfigError` whose message starts with the key.
"""

from __future__ import annotations

import re
import ssl
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
ClientAuth = Literal[
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "RequireClientCert",  # exporter-toolkit keeps it as an old name of RequireAnyClientCert
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
]
VERIFY_MODES: dict[str, ssl.VerifyMode] = {
    "NoClientCert": ssl.CERT_NONE,
    # Go asks for a certificate and never checks it, so it grants nothing; Python's ssl cannot ask
    # without checking what comes, so no certificate is asked for at all
    "RequestClientCert": ssl.CERT_NONE,
    # Python's ssl checks every certificate it receives: "any" certificate must chain to the CAs here
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "RequireClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
HEADERS: dict[str, tuple[str, ...]] = {  # exporter-toolkit's list; () = any value
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}
UNSUPPORTED = {
    "tls_server_config.cert": "give the certificate as cert_file",
    "tls_server_config.key": "give the key as key_file",
    "tls_server_config.client_ca": "give the CA certificates as client_ca_file",
    "tls_server_config.cipher_suites": "OpenSSL's defaults are used (remove the key)",
    "tls_server_config.curve_preferences": "OpenSSL's defaults are used (remove the key)",
    "tls_server_config.client_allowed_sans": "restrict clients by the CA in client_ca_file instead",
    "rate_limit": "the connection limit is listen_max_connections",
}
BCRYPT_HASH = re.compile(r"\$2[abxy]?\$\d{2}\$[./A-Za-z0-9]{53}")


class WebConfigError(ValueError):
    """A web configuration that cannot be used; the message starts with the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _TlsModel(_Strict):
    cert_file: str = ""
    key_file: str = ""
    client_auth_type: ClientAuth = "NoClientCert"
    client_ca_file: str = ""
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"
    max_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS13"
    prefer_server_cipher_suites: bool = True


class _HttpModel(_Strict):
    http2: bool = True  # accepted for the same file's sake: this server speaks HTTP/1.1 only
    headers: dict[str, str] = {}


class _FileModel(_Strict):
    tls_server_config: _TlsModel | None = None
    http_server_config: _HttpModel = _HttpModel()
    basic_auth_users: dict[str, str] | None = None


@dataclass(frozen=True)
class TlsSettings:
    cert_file: Path
    key_file: Path
    client_auth_type: str
    client_ca_file: Path | None
    min_version: ssl.TLSVersion
    max_version: ssl.TLSVersion
    prefer_server_cipher_suites: bool


@dataclass(frozen=True)
class WebConfig:
    tls: TlsSettings | None
    users: dict[str, bytes]
    """user → bcrypt hash; empty: no basic authentication."""
    headers: tuple[tuple[str, str], ...]

    @property
    def files(self) -> tuple[Path, ...]:
        """The certificate files whose change takes effect like a change of the file itself."""
        if self.tls is None:
            return ()
        ca = (self.tls.client_ca_file,) if self.tls.client_ca_file else ()
        return (self.tls.cert_file, self.tls.key_file, *ca)


def _unsupported(raw: dict[str, Any]) -> None:
    tls = raw.get("tls_server_config")
    for key, instead in UNSUPPORTED.items():
        section, _, name = key.partition(".")
        holder = tls if name else raw
        if isinstance(holder, dict) and (name or section) in holder:
            raise WebConfigError(f"{key}: not supported by falcon-gpu; {instead}")


def _validation_message(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        return f"{loc}: unknown key"
    if first["type"] == "literal_error":
        return f"{loc}: {first['msg']} (got {first.get('input')!r})"
    if loc.startswith("basic_auth_users."):  # never echo what may be a password
        return f"{loc}: must be a bcrypt hash (a string)"
    return f"{loc}: {first['msg']} (got {first.get('input')!r})"


def _headers(given: dict[str, str]) -> tuple[tuple[str, str], ...]:
    out = []
    for name, value in given.items():
        allowed = HEADERS.get(name)
        if allowed is None:
            raise WebConfigError(
                f"http_server_config.headers.{name}: this header can not be configured "
                f"(one of: {', '.join(HEADERS)})"
            )
        if allowed and value not in allowed:
            raise WebConfigError(
                f"http_server_config.headers.{name}: must be one of {', '.join(allowed)} (got {value!r})"
            )
        if value:  # blank: unset, as in exporter-toolkit
            out.append((name, value))
    return tuple(out)


def _users(given: dict[str, str] | None) -> dict[str, bytes]:
    users = {}
    for user, hashed in (given or {}).items():
        if not BCRYPT_HASH.fullmatch(hashed):
            raise WebConfigError(
                f"basic_auth_users.{user}: is not a bcrypt hash (a plain-text password?); "
                "hash it, e.g. `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
            )
        users[user] = hashed.encode()
    return users


def _tls(model: _TlsModel | None, directory: Path) -> TlsSettings | None:
    if model is None or model == _TlsModel():
        return None  # exporter-toolkit: nothing set in tls_server_config means plain HTTP
    for key in ("cert_file", "key_file"):
        if not getattr(model, key):
            raise WebConfigError(f"tls_server_config.{key}: missing (TLS needs a certificate and its key)")
    if model.client_ca_file and model.client_auth_type == "NoClientCert":
        raise WebConfigError(
            "tls_server_config.client_ca_file: given without a client_auth_type that asks for a "
            "certificate (e.g. RequireAndVerifyClientCert)"
        )
    if TLS_VERSIONS[model.min_version] > TLS_VERSIONS[model.max_version]:
        raise WebConfigError(f"tls_server_config.min_version: {model.min_version} is above max_version")
    return TlsSettings(
        cert_file=directory / model.cert_file,
        key_file=directory / model.key_file,
        client_auth_type=model.client_auth_type,
        client_ca_file=directory / model.client_ca_file if model.client_ca_file else None,
        min_version=TLS_VERSIONS[model.min_version],
        max_version=TLS_VERSIONS[model.max_version],
        prefer_server_cipher_suites=model.prefer_server_cipher_suites,
    )


def load_web_config(path: Path) -> WebConfig:
    """Parse and check ``path`` (certificates included: :func:`tls_context` is tried)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WebConfigError(f"cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WebConfigError(f"not valid YAML: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise WebConfigError(f"must be a YAML mapping of keys, got a {type(raw).__name__}")
    _unsupported(raw)
    try:
        model = _FileModel.model_validate(raw)
    except ValidationError as exc:
        raise WebConfigError(_validation_message(exc)) from None
    config = WebConfig(
        tls=_tls(model.tls_server_config, path.parent),
        users=_users(model.basic_auth_users),
        headers=_headers(model.http_server_config.headers),
    )
    if config.tls is not None:
        tls_context(config.tls)
    return config


def _readable(key: str, path: Path) -> None:
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise WebConfigError(f"tls_server_config.{key}: cannot read {str(path)!r}: {exc.strerror}") from None


def tls_context(tls: TlsSettings) -> ssl.SSLContext:
    """A server context for ``tls``; WebConfigError naming the key when a file does not load."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if tls.min_version < ssl.TLSVersion.TLSv1_2:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # OpenSSL 3 refuses TLS 1.0/1.1 at its default level
    with warnings.catch_warnings():  # TLS 1.0/1.1 are deprecated: the user asked for them by name
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version, ctx.maximum_version = tls.min_version, tls.max_version
    if tls.prefer_server_cipher_suites:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.set_alpn_protocols(["http/1.1"])
    _readable("cert_file", tls.cert_file)
    _readable("key_file", tls.key_file)
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except ssl.SSLError as exc:
        raise WebConfigError(
            f"tls_server_config.cert_file: {str(tls.cert_file)!r} and key_file {str(tls.key_file)!r} "
            f"are not a PEM certificate and its key: {exc.reason or exc}"
        ) from None
    ctx.verify_mode = VERIFY_MODES[tls.client_auth_type]
    if ctx.verify_mode != ssl.CERT_NONE:
        if tls.client_ca_file is None:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # Go verifies against the system's roots
        else:
            _readable("client_ca_file", tls.client_ca_file)
            try:
                ctx.load_verify_locations(cafile=tls.client_ca_file)
            except ssl.SSLError as exc:
                raise WebConfigError(
                    f"tls_server_config.client_ca_file: {str(tls.client_ca_file)!r} holds no PEM "
                    f"certificate: {exc.reason or exc}"
                ) from None
    return ctx
