"""The admin's message look-ups, pulls and offset resets (Java's DefaultMQAdminExtImpl).

Owns: ``MessageAdmin``, over an ``MQAdmin``: ``queryMessage`` by key or by unique
key (QUERY_MESSAGE to the selected address of every broker of the topic's route,
merged, then filtered by the real key since the index matches hashes),
``viewMessage`` by offsetMsgId (VIEW_MESSAGE_BY_ID to the address the id
carries), the ``DefaultMQPullConsumer`` calls the tools use (queues of a topic,
min/max/search offset, one pull as ``TOOLS_CONSUMER``), ``messageTrackDetail``
(each group consuming the topic and whether it got past the message), and both
ways to reset a
group's offsets: ``resetOffsetByTimestamp`` (INVOKE_BROKER_TO_RESET_OFFSET on each
broker, which tells the group's clients) and ``resetOffsetByTimestampOld``
(UPDATE_CONSUMER_OFFSET per queue from the admin, for a group with no client online).

Must not: print or parse command lines (``message_commands`` does).

Errors: ``MQAdminError`` when nothing matches (NO_MESSAGE, as Java), the client's
error types for transport failures and error replies.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass
from typing import Final

from aiorocketmq.admin.mq_admin import MQAdmin, MQAdminError, select_broker_addr
from aiorocketmq.client.errors import (
    MQBrokerError,
    MQClientError,
    MQResponseError,
    from_remoting,
)
from aiorocketmq.client.mq_client_api import MQClientAPI
from aiorocketmq.client.pull_wrapper import decode_messages, filter_by_tags
from aiorocketmq.client.results import PullResult, PullStatus
from aiorocketmq.common.admin_bodies import ResetOffsetBody
from aiorocketmq.common.constants import MASTER_ID, is_readable
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.common.protocol_bodies import ConsumeType, build_subscription_data
from aiorocketmq.common.route import TopicRouteData
from aiorocketmq.remoting.broker_admin_headers import (
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from aiorocketmq.remoting.broker_headers import (
    PullMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.errors import RemotingError

__all__ = ["TOOLS_CONSUMER_GROUP", "MessageAdmin", "MessageTrack", "RollbackStats", "TrackType"]

log = logging.getLogger(__name__)

TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
"""``MixAll.TOOLS_CONSUMER_GROUP``: the group the tools pull as."""
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"
"""extField of a query by unique key (``MixAll.UNIQUE_MSG_QUERY_FLAG``)."""
JAVA_LONG_MAX: Final = 2**63 - 1
#: Pull flags of a tools pull: subscription only (no commit, no suspend).
_PULL_FLAG_SUBSCRIPTION: Final = 0x4


@dataclass(slots=True, frozen=True)
class RollbackStats:
    """One queue of ``resetOffsetByTimestampOld`` (Java's ``RollbackStats``)."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


class TrackType(enum.Enum):
    """How far a consumer group got with a message (Java's ``TrackType``)."""

    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    UNKNOWN = "UNKNOWN"


@dataclass(slots=True, frozen=True)
class MessageTrack:
    """One group's state for a message (Java's ``MessageTrack``)."""

    consumer_group: str
    track_type: TrackType
    exception_desc: str | None = None

    def __str__(self) -> str:
        desc = "null" if self.exception_desc is None else self.exception_desc
        return (
            f"MessageTrack [consumerGroup={self.consumer_group}, "
            f"trackType={self.track_type.value}, exceptionDesc={desc}]"
        )


def _failed_track(group: str, exc: MQClientError) -> MessageTrack:
    """Java's catch blocks: NOT_ONLINE for CONSUMER_NOT_ONLINE, else UNKNOWN, with why."""
    code: int | None = None
    desc = str(exc)
    if isinstance(exc, MQResponseError):
        code, desc = exc.code, f"CODE:{exc.code} DESC:{exc.remark}"
    elif isinstance(exc, MQAdminError) and exc.code >= 0:
        code, desc = exc.code, f"CODE:{exc.code} DESC:{str(exc).split(' DESC: ', 1)[-1]}"
    kind = TrackType.NOT_ONLINE if code == ResponseCode.CONSUMER_NOT_ONLINE else TrackType.UNKNOWN
    return MessageTrack(group, kind, desc)


def _key_matches(msg: MessageExt, topic: str, key: str) -> bool:
    return msg.topic == topic and key in (msg.get_property("KEYS") or "").split(" ")


class MessageAdmin:
    """Message queries, pulls and offset resets over an ``MQAdmin``'s transport.

    Args:
        admin: the facade whose name servers, transport and timeout are used.
    """

    def __init__(self, admin: MQAdmin) -> None:
        self.admin = admin
        self.timeout_ms = admin.broker.timeout_ms
        self.client = MQClientAPI(admin.remoting)

    # -- routes -------------------------------------------------------------------------

    async def _route_addrs(self, topic: str) -> tuple[TopicRouteData, dict[str, str]]:
        """The route and the selected address of each of its brokers, by name."""
        route = await self.admin.examine_topic_route(topic)
        addrs = {}
        for broker in route.broker_datas:
            address = select_broker_addr(broker)
            if address is not None:
                addrs[broker.broker_name] = address
        return route, addrs

    async def broker_addr(self, topic: str, broker_name: str) -> str:
        """The address to use for ``broker_name`` in the topic's route.

        Raises:
            MQAdminError: the route has no such broker.
        """
        _, addrs = await self._route_addrs(topic)
        if broker_name not in addrs:
            raise MQAdminError(f"The broker[{broker_name}] not exist", ResponseCode.SYSTEM_ERROR)
        return addrs[broker_name]

    async def fetch_subscribe_queues(self, topic: str) -> list[tuple[MessageQueue, str]]:
        """Readable queues of the topic with their broker's address, sorted."""
        route, addrs = await self._route_addrs(topic)
        queues = []
        for qd in route.queue_datas:
            if qd.broker_name in addrs and is_readable(qd.perm):
                queues += [
                    (MessageQueue(topic, qd.broker_name, i), addrs[qd.broker_name])
                    for i in range(qd.read_queue_nums)
                ]
        return sorted(queues)

    # -- query --------------------------------------------------------------------------

    async def _query_one(
        self, address: str, header: QueryMessageRequestHeader, unique: bool
    ) -> list[MessageExt]:
        fields = header.to_ext_fields()
        if unique:
            fields[UNIQUE_MSG_QUERY_FLAG] = "true"
        try:
            reply = await self.admin.broker.invoke(
                address, RequestCode.QUERY_MESSAGE, fields, timeout_ms=self.timeout_ms * 3
            )
            if reply.code != ResponseCode.SUCCESS:
                log.debug("query message: %s answered %d %s", address, reply.code, reply.remark)
                return []
            return decode_messages(reply.body_bytes())
        except (MQClientError, RemoteProtocolError) as exc:  # Java logs and goes on
            log.warning("query message exception address=%s error=%s", address, exc)
            return []

    async def query_message(
        self,
        topic: str,
        key: str,
        max_num: int = 64,
        begin: int = 0,
        end: int = JAVA_LONG_MAX,
        *,
        unique: bool = False,
    ) -> list[MessageExt]:
        """QUERY_MESSAGE on every broker of the route, filtered by the real key.

        With ``unique`` the key is a UNIQ_KEY and only the earliest stored copy is
        kept (Java's ``queryMessageByUniqKey``).

        Raises:
            MQAdminError: nothing matched (NO_MESSAGE).
        """
        _, addrs = await self._route_addrs(topic)
        header = QueryMessageRequestHeader(topic, key, max_num, begin, end)
        found = await asyncio.gather(
            *(self._query_one(a, header, unique) for a in sorted(addrs.values()))
        )
        matched: list[MessageExt] = []
        for msg in (m for batch in found for m in batch):
            if unique and msg.get_property("UNIQ_KEY") != key:
                continue
            if not unique and not _key_matches(msg, topic, key):
                continue
            if unique and matched and matched[0].store_timestamp <= msg.store_timestamp:
                continue
            matched = [msg] if unique else [*matched, msg]
        if not matched:
            raise MQAdminError(
                "query message by key finished, but no message.", ResponseCode.NO_MESSAGE
            )
        return matched

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """VIEW_MESSAGE_BY_ID at the broker and CommitLog offset the id carries.

        Raises:
            MQAdminError: the id is not an offset message id.
            MQBrokerError: the broker has no message there.
        """
        try:
            ip, port, offset = decode_offset_msg_id(offset_msg_id.strip())
        except RemoteProtocolError as exc:
            raise MQAdminError(
                f"query message by id finished, but no message. ({exc})", ResponseCode.NO_MESSAGE
            ) from exc
        address = f"{ip}:{port}"
        fields = ViewMessageRequestHeader(offset).to_ext_fields()
        reply = await self.admin.broker.invoke(address, RequestCode.VIEW_MESSAGE_BY_ID, fields)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, address=address)
        try:
            msgs = decode_messages(reply.body_bytes())
        except RemoteProtocolError as exc:
            raise MQBrokerError(
                ResponseCode.SYSTEM_ERROR, f"malformed message: {exc}", address=address
            ) from exc
        if len(msgs) != 1:
            raise MQBrokerError(
                ResponseCode.SYSTEM_ERROR, f"{len(msgs)} messages in the reply", address=address
            )
        return msgs[0]

    # -- message track ----------------------------------------------------------------

    async def message_track_detail(self, msg: MessageExt) -> list[MessageTrack]:
        """``messageTrackDetail``: each group consuming the message's topic, and how far.

        Raises:
            MQClientError: the groups of the topic could not be asked for.
        """
        groups = await self.admin.query_topic_consume_by_who(msg.topic)
        return [await self._track(msg, group) for group in groups]

    async def _track(self, msg: MessageExt, group: str) -> MessageTrack:
        try:
            connection = await self.admin.examine_consumer_connection_info(group)
        except MQClientError as exc:
            return _failed_track(group, exc)
        if connection.consume_type is ConsumeType.CONSUME_ACTIVELY:
            return MessageTrack(group, TrackType.PULL)
        try:
            consumed = await self._consumed(msg, group)
        except MQClientError as exc:
            return _failed_track(group, exc)
        if not consumed:
            return MessageTrack(group, TrackType.NOT_CONSUME_YET)
        sub = connection.subscriptions.get(msg.topic)
        tags = set() if sub is None else set(sub.tags_set)
        if tags and "*" not in tags and msg.get_property("TAGS") not in tags:
            return MessageTrack(group, TrackType.CONSUMED_BUT_FILTERED)
        return MessageTrack(group, TrackType.CONSUMED)

    async def _consumed(self, msg: MessageExt, group: str) -> bool:
        """``consumed``: the group's offset on the message's queue (at its master) is past it."""
        stats = await self.admin.examine_consume_stats(group)
        info = await self.admin.examine_cluster_info()
        store_host = f"{msg.store_host[0]}:{msg.store_host[1]}"
        for mq, wrapper in stats.offset_table.items():
            if mq.topic != msg.topic or mq.queue_id != msg.queue_id:
                continue
            broker = info.broker_addr_table.get(mq.broker_name)
            master = None if broker is None else broker.broker_addrs.get(MASTER_ID)
            if master == store_host and wrapper.consumer_offset > msg.queue_offset:
                return True
        return False

    # -- pull consumer ------------------------------------------------------------------

    async def min_offset(self, address: str, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET."""
        return await self.client.get_min_offset(address, mq, self.timeout_ms)

    async def max_offset(self, address: str, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET."""
        return await self.client.get_max_offset(address, mq, self.timeout_ms)

    async def search_offset(self, address: str, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        return await self.client.search_offset(address, mq, timestamp_ms, self.timeout_ms)

    async def pull(
        self,
        address: str,
        mq: MessageQueue,
        sub_expression: str,
        offset: int,
        max_nums: int,
        *,
        group: str = TOOLS_CONSUMER_GROUP,
    ) -> PullResult:
        """One pull as ``group`` (no commit, no suspend), tag-filtered.

        Raises:
            MQBrokerError: an error reply, or records that do not decode.
        """
        subscription = build_subscription_data(mq.topic, sub_expression)
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=_PULL_FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription=subscription.sub_string,
        )
        result = await self.client.pull_message(address, header, self.timeout_ms * 3)
        if result.status is PullStatus.FOUND and result.message_binary is not None:
            try:
                msgs = decode_messages(result.message_binary)
            except RemoteProtocolError as exc:
                raise MQBrokerError(
                    ResponseCode.SYSTEM_ERROR, f"malformed pull body: {exc}", address=address
                ) from exc
            result.msg_found_list = filter_by_tags(msgs, subscription)
            result.message_binary = None
            if not result.msg_found_list:
                result.status = PullStatus.NO_MATCHED_MSG
        return result

    # -- offsets ------------------------------------------------------------------------

    async def reset_offset_by_timestamp(
        self, topic: str, group: str, timestamp: int, force: bool, is_c: bool = False
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET on each broker of the route, merged.

        Raises:
            MQBrokerError: a broker refused (CONSUMER_NOT_ONLINE: no client online).
        """
        _, addrs = await self._route_addrs(topic)
        fields = ResetOffsetRequestHeader(topic, group, timestamp, force).to_ext_fields()
        merged: dict[MessageQueue, int] = {}
        for address in addrs.values():
            request = RemotingCommand.request(
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                fields,
                language=LanguageCode.CPP if is_c else LanguageCode.JAVA,
            )
            reply = await self._invoke(address, request)
            if reply.code != ResponseCode.SUCCESS or not reply.body_bytes():
                raise MQBrokerError(reply.code, reply.remark, address=address)
            try:
                merged.update(ResetOffsetBody.decode(reply.body_bytes()).offset_table)
            except RemoteProtocolError as exc:
                raise MQBrokerError(
                    ResponseCode.SYSTEM_ERROR, f"malformed ResetOffsetBody: {exc}", address=address
                ) from exc
        return merged

    async def _invoke(self, address: str, request: RemotingCommand) -> RemotingCommand:
        try:
            return await self.admin.remoting.invoke(address, request, self.timeout_ms)
        except RemotingError as exc:
            raise from_remoting(exc) from exc

    async def reset_offset_by_timestamp_old(
        self, group: str, topic: str, timestamp: int, force: bool
    ) -> list[RollbackStats]:
        """Reset from the admin with UPDATE_CONSUMER_OFFSET per queue (no client online).

        A broker where the group consumed ``topic`` resets those queues; elsewhere
        every read queue of the route, its consumer offset taken as the queue's min.
        """
        route, addrs = await self._route_addrs(topic)
        read_nums = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
        out: list[RollbackStats] = []
        for broker_name, address in addrs.items():
            stats = await self.admin.broker.get_consume_stats(address, group)
            rows = [(mq, w.broker_offset, w.consumer_offset) for mq, w in
                    sorted(stats.offset_table.items()) if mq.topic == topic]  # fmt: skip
            if not rows:
                table = (await self.admin.broker.get_topic_stats_info(address, topic)).offset_table
                for i in range(read_nums.get(broker_name, 0)):
                    mq = MessageQueue(topic, broker_name, i)
                    status = table.get(mq)
                    if status is None:
                        raise MQAdminError(f"no stats of {mq} on {address}")
                    rows.append((mq, status.max_offset, status.min_offset))
            for mq, broker_offset, consumer_offset in rows:
                out.append(
                    await self._rollback(
                        address,
                        group,
                        mq,
                        offsets=(broker_offset, consumer_offset),
                        timestamp=timestamp,
                        force=force,
                    )
                )
        return out

    async def _rollback(
        self,
        address: str,
        group: str,
        mq: MessageQueue,
        *,
        offsets: tuple[int, int],
        timestamp: int,
        force: bool,
    ) -> RollbackStats:
        """``resetOffsetConsumeOffset``: one queue; ``offsets`` is (broker, consumer)."""
        broker_offset, consumer_offset = offsets
        if timestamp == -1:
            reset = await self.max_offset(address, mq)
        else:
            reset = await self.search_offset(address, mq, timestamp)
        rollback = consumer_offset
        if force or reset <= consumer_offset:
            rollback = reset
            header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, reset)
            await self.client.update_consumer_offset(address, header, self.timeout_ms)
        return RollbackStats(
            mq.broker_name, mq.queue_id, broker_offset, consumer_offset, reset, rollback
        )
