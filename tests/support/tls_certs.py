"""Certificates for TLS tests, made with the ``openssl`` command line under a temp dir.

Owns: ``make_certs`` (a test CA, a server and a client certificate signed by it, an
encrypted copy of the server key, and a second, unrelated CA) and ``Certs``.

Must not: write outside the directory it is given, or reuse keys between calls.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KEY_PASSWORD", "Certs", "make_certs"]

KEY_PASSWORD = "s3cret"
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class Certs:
    """PEM files; ``*_key`` unencrypted except ``server_key_encrypted`` (KEY_PASSWORD)."""

    ca: Path
    other_ca: Path
    server_cert: Path
    server_key: Path
    server_key_encrypted: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=30)


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl(
        "req", "-x509", *_EC, "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}"
    )
    return cert, key


def _leaf(directory: Path, name: str, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    cert, key, csr = (directory / f"{name}{ext}" for ext in (".pem", ".key", ".csr"))
    _openssl("req", *_EC, "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
        "-out", cert, "-days", "2",
    )  # fmt: skip
    return cert, key


def make_certs(directory: Path) -> Certs:
    """A CA, server and client certificates signed by it, and an unrelated CA."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "test-ca")
    other_ca, _ = _ca(directory, "other-ca")
    server_cert, server_key = _leaf(directory, "server", ca)
    client_cert, client_key = _leaf(directory, "client", ca)
    encrypted = directory / "server-encrypted.key"
    _openssl(
        "pkey", "-in", server_key, "-aes256", "-passout", f"pass:{KEY_PASSWORD}", "-out", encrypted
    )
    return Certs(ca[0], other_ca, server_cert, server_key, encrypted, client_cert, client_key)
