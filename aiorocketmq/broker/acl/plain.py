"""Plain ACL accounts: ``plain_acl.yml`` as RocketMQ 4.9 reads it, and the checks.

A file (YAML) holds ``globalWhiteRemoteAddresses`` (addresses let in without
credentials) and ``accounts``, each with ``accessKey``, ``secretKey`` (both longer
than 6 characters), ``whiteRemoteAddress`` (let in without a signature),
``admin``, ``defaultTopicPerm``, ``defaultGroupPerm``, ``topicPerms`` and
``groupPerms`` (``name=PUB|SUB|PUB|SUB|DENY``). The files read are
``<rocketmqHome>/conf/acl/**/*.yml|yaml`` plus ``aclPlainFile`` (Java's
``-Drocketmq.acl.plain.file``, default ``conf/plain_acl.yml``); an accessKey
defined twice keeps its first definition.

The order of checks is PlainPermissionManager.validate's: global white list,
then accessKey known, the account's white address, the signature, and finally the
permissions (admin codes need ``admin: true``; a resource without its own
permission falls back to the account's default for topics or groups).

Owns: parsing and validating the documents (``AclConfigError`` names what is
wrong), the immutable ``AclAccounts`` snapshot, and ``check`` (the refusal text,
Java's, or None).

Must not: read requests' headers (``validator.py`` turns a request into the
resources it needs) or do I/O except ``load_acl_files``, which callers run in a
thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from aiorocketmq.broker.acl.addresses import AclConfigError, AddressMatcher, parse_address_pattern
from aiorocketmq.common.constants import RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_TRACE_TOPIC
from aiorocketmq.remoting.codes import RequestCode

__all__ = [
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "Account",
    "AclAccounts",
    "AclConfigError",
    "acl_files",
    "check_permission",
    "load_acl_files",
    "parse_acl_document",
    "parse_perm",
]

log = logging.getLogger(__name__)

DENY: Final = 1
ANY: Final = 1 << 1
PUB: Final = 1 << 2
SUB: Final = 1 << 3

#: Codes only admin accounts may send (Java's Permission.ADMIN_CODE, plus the
#: offset reset and the ACL edits, which Java leaves to anyone with a valid signature).
ADMIN_CODES: Final = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        # Java lets any signed account edit the ACL itself; here only admins may.
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    }
)

_PERMS: Final = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}
_MIN_KEY_LENGTH: Final = 6


def parse_perm(text: object) -> int:
    """``Permission.parsePermFromString``: anything unknown (or absent) is DENY."""
    if not isinstance(text, str):
        return DENY
    return _PERMS.get(text.strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def _resource_text(resource: str) -> str:
    """``PlainAccessResource.printStr``: groups are kept as their retry topic."""
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "group=" + resource[len(RETRY_GROUP_TOPIC_PREFIX) :]
    return "topic=" + resource


@dataclass(frozen=True, slots=True)
class Account:
    """One ``accounts`` entry, parsed (group names kept as their retry topics)."""

    access_key: str
    secret_key: str = field(repr=False)
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int]
    white_address: AddressMatcher = field(repr=False)

    def refusal(self, code: int, needed: Mapping[str, int]) -> str | None:
        """``checkPerm``: Java's text for the first missing permission, or None."""
        if code in ADMIN_CODES and not self.admin:
            return (
                f"Need admin permission for request code={code}, "
                f"but accessKey={self.access_key} is not"
            )
        if not needed or (not self.perms and self.admin):
            return None
        for resource, perm in needed.items():
            owned = self.perms.get(resource)
            if owned is None:
                is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
                owned = self.default_group_perm if is_group else self.default_topic_perm
            if not check_permission(perm, owned):
                return f"No default permission for {_resource_text(resource)}"
        return None


def _text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        # YAML reads `secretKey: 12345678` as a number; Java's binding makes it text.
        return str(value)
    raise AclConfigError(f"{what} must be text, got {type(value).__name__}")


def _list(value: object, what: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclConfigError(f"{what} must be a list")
    return value


def _resource_perms(entries: Iterable[object], *, topics: bool) -> dict[str, int]:
    out: dict[str, int] = {}
    for entry in entries:
        text = _text(entry, "a topicPerms/groupPerms entry") or ""
        name, sep, perm_text = text.partition("=")
        if not sep or not name.strip() or "=" in perm_text:
            kind = "topic" if topics else "group"
            raise AclConfigError(f"Parse resource permission failed for {kind}:{text}")
        key = name.strip() if topics else RETRY_GROUP_TOPIC_PREFIX + name.strip()
        out[key] = parse_perm(perm_text)
    return out


def _account(raw: object, source: str) -> Account:
    if not isinstance(raw, dict):
        raise AclConfigError(f"{source}: each accounts entry must be a mapping")
    access_key = _text(raw.get("accessKey"), "accessKey")
    secret_key = _text(raw.get("secretKey"), "secretKey")
    if (
        access_key is None
        or secret_key is None
        or len(access_key) <= _MIN_KEY_LENGTH
        or len(secret_key) <= _MIN_KEY_LENGTH
    ):
        raise AclConfigError(
            f"{source}: The accessKey={access_key} and secretKey=****** cannot be null "
            "and length should longer than 6"
        )
    admin = raw.get("admin", False)
    perms = _resource_perms(_list(raw.get("groupPerms"), "groupPerms"), topics=False)
    perms.update(_resource_perms(_list(raw.get("topicPerms"), "topicPerms"), topics=True))
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        admin=admin is True or str(admin).strip().lower() == "true",
        default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
        default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
        perms=perms,
        white_address=parse_address_pattern(_text(raw.get("whiteRemoteAddress"), "address")),
    )


def parse_acl_document(data: object, source: str) -> tuple[list[AddressMatcher], list[Account]]:
    """One file's global white list and accounts (an empty file has neither).

    Raises:
        AclConfigError: a value has the wrong shape, a key is too short, a
            pattern or permission entry is malformed.
    """
    if data is None:
        return [], []
    if not isinstance(data, dict):
        raise AclConfigError(f"{source}: the top level must be a mapping")
    white = [
        parse_address_pattern(_text(p, "globalWhiteRemoteAddresses entry"))
        for p in _list(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")
    ]
    accounts = [_account(a, source) for a in _list(data.get("accounts"), "accounts")]
    return white, accounts


@dataclass(frozen=True, slots=True)
class AclAccounts:
    """Everything the ACL files said, as of one load."""

    global_white: tuple[AddressMatcher, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    #: accessKey -> the file that defines it.
    sources: Mapping[str, str] = field(default_factory=dict)

    def account(self, access_key: str | None) -> Account | str:
        """The account of ``access_key``, or Java's refusal text."""
        if access_key is None:
            return "No accessKey is configured"
        account = self.accounts.get(access_key)
        if account is None:
            return f"No acl config for {access_key}"
        return account

    def globally_white(self, remote_ip: str) -> bool:
        """Whether ``globalWhiteRemoteAddresses`` lets ``remote_ip`` in."""
        return any(match(remote_ip) for match in self.global_white)

    @staticmethod
    def trace_only(needed: Mapping[str, int]) -> bool:
        """Java skips the permission check of a PUB to the trace topic."""
        return needed.get(RMQ_SYS_TRACE_TOPIC) == PUB


def acl_files(default_file: Path, acl_dir: Path) -> list[Path]:
    """Java's file list: ``*.yml``/``*.yaml`` under ``acl_dir`` (sorted), then the default file."""
    found: list[Path] = []
    if acl_dir.is_dir():
        found = sorted(
            p for p in acl_dir.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file()
        )
    if default_file.is_file() and default_file not in found:
        found.append(default_file)
    return found


def load_acl_files(paths: Sequence[Path]) -> AclAccounts:
    """Read and parse every file (blocking: run it in a thread).

    Raises:
        AclConfigError: a file cannot be read, is not YAML, or has a bad value.
    """
    white: list[AddressMatcher] = []
    accounts: dict[str, Account] = {}
    sources: dict[str, str] = {}
    for path in paths:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise AclConfigError(f"{path}: {exc}") from exc
        file_white, file_accounts = parse_acl_document(data, str(path))
        white.extend(file_white)
        for account in file_accounts:
            if account.access_key in accounts:
                log.warning(
                    "accessKey %s is repeated in %s; the first one wins", account.access_key, path
                )
                continue
            accounts[account.access_key] = account
            sources[account.access_key] = str(path)
    return AclAccounts(tuple(white), accounts, tuple(str(p) for p in paths), sources)
