"""TLS settings and SSL contexts of the remoting layer (RocketMQ's TlsSystemConfig/TlsHelper).

Owns: ``TlsConfig`` (RocketMQ 4.9.8's ``tls.*`` keys under their Java names, as
aliases, so ``tls.server.mode=enforcing`` works in a broker or name-server
properties file and in the ``tls.config.file`` file), reading that file
(``tls_file_properties``), and building the server's and the client's
``ssl.SSLContext`` (``build_server_context``, ``build_client_context``), with a
self-signed certificate made on the fly in test mode.

Must not: touch sockets (``tls_listener.py`` accepts; ``client.py`` connects),
or read the environment.

Defaults and where we differ from Java, on purpose:

* ``tls.server.mode`` defaults to ``disabled`` here (Java: ``permissive``). Java's
  default serves TLS with a throw-away self-signed certificate that no client
  verifies: it costs a key generation at every start and a peek per accepted
  connection, and protects against nothing but a passive listener. Stock clients
  speak plaintext unless told otherwise (``tls.enable`` defaults to false), so the
  plaintext fast path stays the default; set ``permissive`` (Java's behaviour:
  TLS and plaintext on one port) or ``enforcing`` to turn TLS on. A TLS client
  that reaches a ``disabled`` server is refused, as Java's: its ClientHello does
  not parse as a frame and the connection closes.
* ``tls.test.mode.enable`` (default true, as Java) only supplies what is missing:
  a self-signed server certificate when ``tls.server.certPath`` is unset. Java's
  test mode also ignores a configured certificate, ``tls.client.authServer`` and
  the client certificate; we never silently drop an explicit setting.
* Python's ``ssl`` cannot request a client certificate and then accept it
  unverified (Java's ``tls.server.authClient=false`` with ``need.client.auth``
  ``optional``/``require``): asking for client certificates therefore needs
  ``tls.server.trustCertPath``, and they are always verified against it.
* A bad ``tls.server.mode`` or ``tls.server.need.client.auth`` value is an error
  naming the key (Java falls back to permissive / none without a word).
* Host names are not checked against server certificates (Netty's client
  context does not either; RocketMQ addresses are IPs); chains are, when
  ``tls.client.authServer=true``.
* aiorocketmq keys: ``tls.handshake.timeout.millis`` (how long an accepted
  connection may take to send its first byte, and then to finish the TLS
  handshake; Netty's SslHandler default, 10 s) and ``tls.ha.enable`` (whether
  the broker's HA listener and the slave's HA client follow these settings;
  RocketMQ 4.9.8 never encrypts HA, so set it false next to a Java master or slave
  whose HA peer is in enforcing mode).
"""

from __future__ import annotations

import datetime
import enum
import logging
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aiorocketmq.common.properties_file import parse_properties_bytes
from aiorocketmq.common.settings import ConfigError, validate_settings

__all__ = [
    "DEFAULT_TLS_CONFIG_FILE",
    "TLS_KEYS",
    "ClientAuth",
    "TlsConfig",
    "TlsConfigError",
    "TlsMode",
    "build_client_context",
    "build_server_context",
    "tls_config_from_properties",
    "tls_file_properties",
]

log = logging.getLogger(__name__)

DEFAULT_TLS_CONFIG_FILE: Final = "/etc/rocketmq/tls.properties"
"""Java's ``tls.config.file`` default; read only when it exists."""

TLS_HANDSHAKE_MAGIC: Final = 0x16
"""First byte of a TLS record carrying a handshake (a ClientHello opens with it)."""


class TlsConfigError(ConfigError):
    """TLS settings that cannot make an SSL context (missing or unreadable files...)."""


class TlsMode(enum.StrEnum):
    """``tls.server.mode``: what a listener accepts."""

    DISABLED = "disabled"  # plaintext only; a TLS ClientHello closes the connection
    PERMISSIVE = "permissive"  # both, told apart by the first byte (0x16 = TLS)
    ENFORCING = "enforcing"  # TLS only; a plaintext client is closed


class ClientAuth(enum.StrEnum):
    """``tls.server.need.client.auth``: whether a server asks for client certificates."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


class TlsConfig(BaseModel):
    """TLS settings of one process, server and client side (Java's ``TlsSystemConfig``).

    Field aliases are Java's property names (``tls.server.mode``...); see the module
    docstring for defaults and deliberate differences.
    """

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    server_mode: TlsMode = Field(
        TlsMode.DISABLED,
        alias="tls.server.mode",
        description="disabled | permissive | enforcing (Java's default: permissive).",
    )
    enable: bool | None = Field(
        None,
        alias="tls.enable",
        description=(
            "Client side: connect with TLS. Unset: a broker uses TLS for its own calls "
            "(name servers, master, HA) when tls.server.mode=enforcing, as BrokerStartup."
        ),
    )
    test_mode_enable: bool = Field(
        True,
        alias="tls.test.mode.enable",
        description="Generate a self-signed server certificate when tls.server.certPath is unset.",
    )
    config_file: str = Field(
        DEFAULT_TLS_CONFIG_FILE,
        alias="tls.config.file",
        description="Properties file with tls.* keys; its values win. Read only if it exists.",
    )
    server_need_client_auth: ClientAuth = Field(
        ClientAuth.NONE, alias="tls.server.need.client.auth", description="none|optional|require"
    )
    server_key_path: str | None = Field(None, alias="tls.server.keyPath")
    server_key_password: str | None = Field(None, alias="tls.server.keyPassword", repr=False)
    server_cert_path: str | None = Field(None, alias="tls.server.certPath")
    server_auth_client: bool = Field(
        False,
        alias="tls.server.authClient",
        description="Accepted for compatibility: client certificates are always verified.",
    )
    server_trust_cert_path: str | None = Field(None, alias="tls.server.trustCertPath")
    client_key_path: str | None = Field(None, alias="tls.client.keyPath")
    client_key_password: str | None = Field(None, alias="tls.client.keyPassword", repr=False)
    client_cert_path: str | None = Field(None, alias="tls.client.certPath")
    client_auth_server: bool = Field(
        False, alias="tls.client.authServer", description="Verify the server's certificate chain."
    )
    client_trust_cert_path: str | None = Field(
        None,
        alias="tls.client.trustCertPath",
        description="CA file for tls.client.authServer; unset: the system's CAs.",
    )
    handshake_timeout_millis: int = Field(
        10_000,
        ge=1,
        alias="tls.handshake.timeout.millis",
        description="aiorocketmq: first byte, then TLS handshake, each within this (ms).",
    )
    ha_enable: bool = Field(
        True,
        alias="tls.ha.enable",
        description="aiorocketmq: the HA listener and HA client follow these settings.",
    )

    @field_validator("server_mode", "server_need_client_auth", mode="before")
    @classmethod
    def _lower_enum(cls, value: Any) -> Any:
        # Java's TlsMode.parse wants lower case; we accept any case, and reject typos.
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def server_enabled(self) -> bool:
        """Whether a listener takes the TLS-aware accept path."""
        return self.server_mode is not TlsMode.DISABLED

    @property
    def handshake_timeout_s(self) -> float:
        """``handshake_timeout_millis`` in seconds."""
        return self.handshake_timeout_millis / 1000

    def client_enabled(self) -> bool:
        """``tls.enable``, or when unset, what BrokerStartup derives: mode is enforcing."""
        if self.enable is not None:
            return self.enable
        return self.server_mode is TlsMode.ENFORCING


TLS_KEYS: Final = frozenset(f.alias for f in TlsConfig.model_fields.values() if f.alias)
"""The ``tls.*`` property names a properties file may carry."""


def tls_config_from_properties(properties: Mapping[str, str]) -> TlsConfig:
    """``TlsConfig`` from the ``tls.*`` keys of ``properties`` (others are ignored).

    Raises:
        ConfigError: a value does not fit its key (the message names it).
    """
    return validate_settings(TlsConfig, {k: v for k, v in properties.items() if k in TLS_KEYS})


def tls_file_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` with the ``tls.config.file`` file's ``tls.*`` keys laid over them.

    Java's TlsHelper reads the file (default ``/etc/rocketmq/tls.properties``) and
    lets its values win; a missing file is skipped (logged at INFO when it was named
    explicitly). Unlike Java, the file may also carry ``tls.server.mode`` and
    ``tls.enable``. Called by the CLIs, which own file reading.

    Raises:
        ConfigError: the file exists but cannot be read or parsed.
    """
    path = Path(properties.get("tls.config.file", DEFAULT_TLS_CONFIG_FILE)).expanduser()
    if not path.is_file():
        if "tls.config.file" in properties:
            log.info("tls.config.file %s does not exist; skipped", path)
        return dict(properties)
    try:
        extra = parse_properties_bytes(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read tls.config.file {path}: {exc}") from None
    merged = dict(properties)
    merged.update({k: v for k, v in extra.items() if k in TLS_KEYS})
    return merged


# -- SSL contexts (blocking: they read files; call them from a thread) --------------------


def build_server_context(config: TlsConfig) -> ssl.SSLContext:
    """The listener's context: its certificate, and client verification if asked for.

    Raises:
        TlsConfigError: no certificate and test mode off, unreadable files, a bad key
            password, or client certificates asked for without a trust file.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if config.server_cert_path:
        _load_chain(
            ctx,
            "tls.server",
            config.server_cert_path,
            config.server_key_path,
            config.server_key_password,
        )
    elif config.test_mode_enable:
        _load_self_signed(ctx)
    else:
        raise TlsConfigError("tls.server.certPath is required when tls.test.mode.enable=false")
    if config.server_need_client_auth is not ClientAuth.NONE:
        if not config.server_trust_cert_path:
            raise TlsConfigError(
                f"tls.server.need.client.auth={config.server_need_client_auth.value} needs "
                "tls.server.trustCertPath (client certificates are always verified)"
            )
        _load_trust(ctx, "tls.server.trustCertPath", config.server_trust_cert_path)
        required = config.server_need_client_auth is ClientAuth.REQUIRE
        ctx.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL
    return ctx


def build_client_context(config: TlsConfig) -> ssl.SSLContext:
    """The client's context: server verification if ``tls.client.authServer``, own cert.

    Raises:
        TlsConfigError: unreadable files or a bad key password.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # Netty's client SslContext checks no host name; RocketMQ addresses are IPs.
    ctx.check_hostname = False
    if config.client_auth_server:
        ctx.verify_mode = ssl.CERT_REQUIRED
        if config.client_trust_cert_path:
            _load_trust(ctx, "tls.client.trustCertPath", config.client_trust_cert_path)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.verify_mode = ssl.CERT_NONE  # Java: InsecureTrustManagerFactory
    if config.client_cert_path:
        _load_chain(
            ctx,
            "tls.client",
            config.client_cert_path,
            config.client_key_path,
            config.client_key_password,
        )
    return ctx


def _load_chain(
    ctx: ssl.SSLContext, prefix: str, cert: str, key: str | None, password: str | None
) -> None:
    try:
        ctx.load_cert_chain(
            Path(cert).expanduser(), Path(key).expanduser() if key else None, password
        )
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"cannot load {prefix}.certPath={cert} / {prefix}.keyPath={key}: {exc}"
        ) from None


def _load_trust(ctx: ssl.SSLContext, key: str, path: str) -> None:
    try:
        ctx.load_verify_locations(cafile=Path(path).expanduser())
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load {key}={path}: {exc}") from None


def _load_self_signed(ctx: ssl.SSLContext) -> None:
    """Java's test mode (Netty's SelfSignedCertificate): a throw-away certificate."""
    cert_pem, key_pem = self_signed_pem()
    # ssl loads certificates only from files: write them to a private temporary dir.
    with tempfile.TemporaryDirectory(prefix="aiorocketmq-tls-") as tmp:
        cert_file, key_file = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
        cert_file.write_bytes(cert_pem)
        key_file.write_bytes(key_pem)
        ctx.load_cert_chain(cert_file, key_file)
    log.info("TLS test mode: serving a self-signed certificate (tls.test.mode.enable=true)")


def self_signed_pem(common_name: str = "localhost") -> tuple[bytes, bytes]:
    """A self-signed certificate and its key (EC P-256), both PEM.

    Raises:
        TlsConfigError: the ``cryptography`` package is not installed.
    """
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise TlsConfigError(
            "tls.test.mode.enable needs the cryptography package (pip install "
            "'aiorocketmq[tls]'), or set tls.server.certPath and tls.server.keyPath"
        ) from None
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
