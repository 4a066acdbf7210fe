"""The broker's ACL gate: every request checked before its processor runs.

``aclEnable=true`` puts ``AclProcessorTable`` between the server and the
broker's processors: a refused request gets NO_PERMISSION (16) with the reason
RocketMQ gives (``No acl config for x``, ``Check signature failed for
accessKey=x``, ``No default permission for topic=t``...), and its processor never
runs. Java answers these with SYSTEM_ERROR and the exception text; the code here
lets a client tell "not allowed" from "broken". Oneway requests are dropped.

Which resources a request needs (PlainAccessValidator.parse), by code:

==========================  =====================================================
SEND_MESSAGE(_V2), batch,   PUB on the topic; SUB on the group for a retry topic
reply sends
CONSUMER_SEND_MSG_BACK      SUB on the group
PULL_MESSAGE                SUB on the topic and the group
QUERY_MESSAGE               SUB on the topic
HEART_BEAT                  SUB on each consumer group and its subscribed topics
UNREGISTER_CLIENT,          SUB on the consumer group
GET_CONSUMER_LIST_BY_GROUP
UPDATE/QUERY_CONSUMER_      SUB on the group and the topic
OFFSET
==========================  =====================================================

Java does not check batch sends, reply sends or offset queries against topic
and group permissions (only their signature); we do. Any other code needs a
valid signature only, plus ``admin`` for ``ADMIN_CODES``.

Owns: the per-code resource table, checking one request against the current
``AclAccounts``, the processor-table wrapper, and ``AclService`` (loading the
files at start, reloading them when they change, keeping the last good set when
an edit is malformed).

Must not: parse YAML (``plain.py``) or sign requests (``remoting/acl_sign.py``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from aiorocketmq.broker.acl import editor
from aiorocketmq.broker.acl.plain import (
    PUB,
    SUB,
    AclAccounts,
    AclConfigError,
    acl_files,
    load_acl_files,
)
from aiorocketmq.common.constants import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from aiorocketmq.common.errors import ProtocolError
from aiorocketmq.common.protocol_bodies import HeartbeatData
from aiorocketmq.remoting.acl_sign import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    request_signature,
    signatures_equal,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import (
    Handler,
    HandlerResult,
    ProcessorTable,
    RemotingConnection,
)
from aiorocketmq.runtime.lifecycle import Service

__all__ = [
    "AclProcessorTable",
    "AclService",
    "needed_resources",
    "refusal",
    "resolve_acl_paths",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

_SKIP_BROKER = frozenset((SIGNATURE, UNIQUE_MSG_QUERY_FLAG))
_SKIP_CLIENT = frozenset((SIGNATURE,))


def _add(needed: dict[str, int], resource: str | None, perm: int) -> None:
    if resource:
        needed[resource] = perm


def _send(needed: dict[str, int], topic: str | None) -> None:
    # A send to a retry topic is a consumer's redelivery: the group's SUB. (Java
    # reads a "group" field V1 sends do not have, and the producer group for V2.)
    if topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        _add(needed, topic, SUB)
    else:
        _add(needed, topic, PUB)


def _group(group: str | None) -> str | None:
    return retry_topic(group) if group else None


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """The topics and groups (as retry topics) ``request`` uses, with the permission.

    Raises:
        ProtocolError: a HEART_BEAT body that cannot be read.
    """
    f = request.ext_fields
    code = request.code
    needed: dict[str, int] = {}
    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE):
        _send(needed, f.get("topic"))
    elif code in (
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE_V2,
    ):
        _send(needed, f.get("b", f.get("topic")))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        _add(needed, _group(f.get("group")), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        _add(needed, f.get("topic"), SUB)
        _add(needed, _group(f.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        _add(needed, f.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        for data in HeartbeatData.decode(request.body).consumers:
            _add(needed, _group(data.group_name), SUB)
            for sub in data.subscriptions:
                _add(needed, sub.topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        _add(needed, _group(f.get("consumerGroup")), SUB)
    elif code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        _add(needed, _group(f.get("consumerGroup")), SUB)
        _add(needed, f.get("topic"), SUB)
    return needed


def _remote_ip(remote_address: str) -> str:
    """``host:port`` -> ``host`` (Java cuts at the last colon; IPv6 keeps its colons)."""
    host, sep, _ = remote_address.rpartition(":")
    return host.strip("[]") if sep else remote_address


def refusal(accounts: AclAccounts, request: RemotingCommand, remote_address: str) -> str | None:
    """Why ``request`` from ``remote_address`` is refused (Java's text), or None to let it in."""
    remote_ip = _remote_ip(remote_address)
    if accounts.globally_white(remote_ip):
        return None
    f = request.ext_fields
    account = accounts.account(f.get(ACCESS_KEY))
    if isinstance(account, str):
        return account
    if account.white_address(remote_ip):
        return None
    given = f.get(SIGNATURE)
    expected = request_signature(request, account.secret_key, skip=_SKIP_BROKER)
    if not signatures_equal(expected, given) and not (
        UNIQUE_MSG_QUERY_FLAG in f
        and signatures_equal(
            request_signature(request, account.secret_key, skip=_SKIP_CLIENT), given
        )
    ):
        return f"Check signature failed for accessKey={account.access_key}"
    try:
        needed = needed_resources(request)
    except ProtocolError as exc:
        return f"cannot read the request's resources: {exc}"
    if accounts.trace_only(needed):
        return None
    return account.refusal(request.code, needed)


class AclProcessorTable(ProcessorTable):
    """Wraps every processor registered through it with the ACL check.

    Args:
        inner: the table the server reads (registrations go there, wrapped).
        accounts: returns the current accounts (reloads swap what it returns).
    """

    __slots__ = ("_accounts", "_inner")

    def __init__(self, inner: ProcessorTable, accounts: Callable[[], AclAccounts]) -> None:
        super().__init__()
        self._inner = inner
        self._accounts = accounts

    def register(self, code: int, handler: Handler) -> None:
        """Route ``code`` to ``handler``, behind the check."""
        self._inner.register(code, self._guarded(handler))

    def set_default(self, handler: Handler) -> None:
        """Handle unregistered codes with ``handler``, behind the check."""
        self._inner.set_default(self._guarded(handler))

    def get(self, code: int) -> Handler | None:
        """The guarded handler for ``code`` (from the inner table)."""
        return self._inner.get(code)

    def __contains__(self, code: object) -> bool:
        return code in self._inner

    def _guarded(self, handler: Handler) -> Handler:
        accounts = self._accounts

        def run(conn: RemotingConnection, request: RemotingCommand) -> HandlerResult:
            reason = refusal(accounts(), request, conn.remote_address)
            if reason is None:
                return handler(conn, request)
            log.info("acl refused code=%s from %s: %s", request.code, conn.remote_address, reason)
            return request.response_to(ResponseCode.NO_PERMISSION, reason)

        return run


def _fingerprint(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(out)


class AclService(Service):
    """Loads the ACL files at start and reloads them when they change.

    Args:
        default_file: ``aclPlainFile``, resolved.
        acl_dir: ``<rocketmqHome>/conf/acl``.
        watch_interval_ms: how often the files are looked at (Java: 5 s).

    Attributes:
        accounts: the accounts in force.
    """

    def __init__(self, default_file: Path, acl_dir: Path, watch_interval_ms: int) -> None:
        super().__init__("acl")
        self._default_file = default_file
        self._acl_dir = acl_dir
        self._interval_s = watch_interval_ms / 1000
        self._seen: tuple[tuple[str, int, int], ...] = ()
        self.accounts = AclAccounts()
        self._edits = asyncio.Lock()

    def current(self) -> AclAccounts:
        """The accounts in force (the table's callback)."""
        return self.accounts

    # -- edits (mqadmin updateAclConfig...) ---------------------------------------------

    @property
    def default_file(self) -> Path:
        """``aclPlainFile``: where new accounts and the global white list go."""
        return self._default_file

    async def _edit(self, edit: Callable[[], T]) -> T:
        """Run a file edit in a thread, one at a time, then reload at once."""
        async with self._edits:
            result = await asyncio.to_thread(edit)
            self._seen = ()  # whatever the timestamps say, read the files again
            await self._watch()
            return result

    async def update_account(self, fields: Mapping[str, object]) -> None:
        """Create or update an account where it is defined (else in ``aclPlainFile``).

        Raises:
            AclConfigError: the account would be malformed.
        """
        source = self.accounts.sources.get(str(fields.get("accessKey")))
        path = Path(source) if source else self._default_file
        await self._edit(functools.partial(editor.update_account, path, fields))

    async def delete_account(self, access_key: str) -> bool:
        """Remove an account from its file; False when no file defines it."""
        source = self.accounts.sources.get(access_key)
        if source is None:
            return False
        return await self._edit(functools.partial(editor.delete_account, Path(source), access_key))

    async def update_global_white(self, addresses: Sequence[str], file: str | None) -> None:
        """Replace the global white list of ``file`` (one of the ACL files; default: ours).

        Raises:
            AclConfigError: ``file`` is not an ACL file here, or a pattern is malformed.
        """
        path = self._default_file
        if file:
            if file not in self.accounts.files and Path(file) != self._default_file:
                raise AclConfigError(f"{file} is not one of this broker's ACL files")
            path = Path(file)
        await self._edit(functools.partial(editor.update_global_white, path, list(addresses)))

    async def versions(self) -> dict[str, dict[str, int]]:
        """Each ACL file's ``dataVersion`` (the default file's even before it exists)."""
        files = list(dict.fromkeys([*self.accounts.files, str(self._default_file)]))

        def read() -> dict[str, dict[str, int]]:
            return {f: editor.data_version(Path(f)) for f in files}

        return await asyncio.to_thread(read)

    def _scan(
        self,
    ) -> tuple[tuple[tuple[str, int, int], ...], AclAccounts | AclConfigError | None]:
        """The files' fingerprint, and their accounts when it changed (or why they are bad)."""
        paths = acl_files(self._default_file, self._acl_dir)
        seen = _fingerprint(paths)
        if seen == self._seen:
            return seen, None
        try:
            return seen, load_acl_files(paths)
        except AclConfigError as exc:
            return seen, exc

    async def on_start(self) -> None:
        """Load the files; a malformed one stops the broker with its reason.

        Raises:
            AclConfigError: a file is malformed.
        """
        seen, accounts = await asyncio.to_thread(self._scan)
        if isinstance(accounts, AclConfigError):
            raise accounts
        if not seen:
            log.warning(
                "aclEnable is true but no ACL file exists (%s, %s): every request without "
                "a globally white-listed address is refused",
                self._default_file,
                self._acl_dir,
            )
        self._seen = seen
        self.accounts = accounts or AclAccounts()
        log.info(
            "acl loaded accounts=%d files=%s", len(self.accounts.accounts), self.accounts.files
        )
        self.periodic(self._interval_s, self._watch, name="acl-watch")

    async def _watch(self) -> None:
        seen, accounts = await asyncio.to_thread(self._scan)
        if accounts is None:
            return
        self._seen = seen
        if isinstance(accounts, AclConfigError):
            # Java logs and keeps serving with what it had; so do we, once per edit.
            log.error("acl files not reloaded, the previous ones stay in force: %s", accounts)
            return
        self.accounts = accounts
        log.info("acl reloaded accounts=%d files=%s", len(accounts.accounts), accounts.files)


def resolve_acl_paths(plain_file: str, rocketmq_home: str | None) -> tuple[Path, Path]:
    """``aclPlainFile`` and ``conf/acl`` under ``rocketmqHome`` (else the working directory)."""
    home = Path(rocketmq_home or ".").expanduser()
    default = Path(plain_file).expanduser()
    if not default.is_absolute():
        default = home / default
    return default, home / "conf" / "acl"
