"""Edits of the plain ACL files, as RocketMQ 4.9's PlainPermissionManager makes them for
``mqadmin updateAclConfig`` / ``deleteAclConfig`` / ``updateGlobalWhiteAddr``.

An update merges into the account's entry the fields given (Java's
``createAclAccessConfigMap``: an absent field keeps its value), or appends a new
entry; every edit bumps the file's ``dataVersion`` (``[{counter, timestamp}]``).
The edited document is parsed before it is written, so a bad value never reaches
the file; the file is replaced atomically (written beside, then renamed).

Owns: reading, editing and writing one file. Blocking: callers run these in a thread.

Must not: decide which file an account lives in (``AclService`` does).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from aiorocketmq.broker.acl.addresses import AclConfigError
from aiorocketmq.broker.acl.plain import parse_acl_document

__all__ = ["data_version", "delete_account", "update_account", "update_global_white"]

#: Header field -> YAML key of an account (the header uses the same names).
ACCOUNT_KEYS = (
    "accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
    "defaultGroupPerm", "topicPerms", "groupPerms",
)  # fmt: skip


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise AclConfigError(f"{path}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AclConfigError(f"{path}: the top level must be a mapping")
    return data


def _save(path: Path, doc: dict[str, Any]) -> None:
    parse_acl_document(doc, str(path))  # refuse to write what would not load
    versions = doc.get("dataVersion")
    previous = versions[0] if isinstance(versions, list) and versions else {}
    counter = previous.get("counter", 0) if isinstance(previous, dict) else 0
    doc["dataVersion"] = [{"counter": int(counter) + 1, "timestamp": int(time.time() * 1000)}]
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), "utf-8")
    os.replace(partial, path)


def update_account(path: Path, fields: Mapping[str, Any]) -> None:
    """Create or update the account ``fields["accessKey"]`` in ``path``.

    Raises:
        AclConfigError: a key is too short, a permission or address is malformed,
            or the file cannot be read.
    """
    access_key = str(fields.get("accessKey") or "")
    if len(access_key) <= 6:
        raise AclConfigError(
            f"The accessKey={access_key} cannot be null and length should longer than 6"
        )
    doc = _load(path)
    accounts = doc.get("accounts")
    if not isinstance(accounts, list):
        accounts = doc["accounts"] = []
    entry = next(
        (a for a in accounts if isinstance(a, dict) and str(a.get("accessKey")) == access_key),
        None,
    )
    if entry is None:
        if not fields.get("secretKey"):
            raise AclConfigError(f"a new account needs a secretKey: {access_key}")
        entry = {}
        accounts.append(entry)
    entry.update({k: fields[k] for k in ACCOUNT_KEYS if fields.get(k) is not None})
    _save(path, doc)


def delete_account(path: Path, access_key: str) -> bool:
    """Remove ``access_key``'s entry; False when ``path`` has none."""
    doc = _load(path)
    accounts = doc.get("accounts")
    if not isinstance(accounts, list):
        return False
    kept = [a for a in accounts if not (isinstance(a, dict) and a.get("accessKey") == access_key)]
    if len(kept) == len(accounts):
        return False
    doc["accounts"] = kept
    _save(path, doc)
    return True


def update_global_white(path: Path, addresses: Sequence[str]) -> None:
    """Replace ``globalWhiteRemoteAddresses`` of ``path``.

    Raises:
        AclConfigError: a pattern is malformed.
    """
    doc = _load(path)
    doc["globalWhiteRemoteAddresses"] = [a.strip() for a in addresses if a.strip()]
    _save(path, doc)


def data_version(path: Path) -> dict[str, int]:
    """The file's ``dataVersion`` (counter 0, timestamp 0 when it has none)."""
    try:
        versions = _load(path).get("dataVersion")
    except AclConfigError:
        versions = None
    first = versions[0] if isinstance(versions, list) and versions else {}
    if not isinstance(first, dict):
        first = {}
    return {
        "counter": int(first.get("counter", 0) or 0),
        "timestamp": int(first.get("timestamp", 0) or 0),
    }
