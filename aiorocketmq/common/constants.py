"""RocketMQ 4.9 constants every layer shares, with the small pure helpers that read them.

Owns: master id, CommitLog magic codes and fixed sizes, system topic names and the
retry/DLQ prefixes, the default delay levels (and their parser), topic permission bits,
the message ``sysFlag`` bits (``MessageSysFlag``) and the pull request ``sysFlag`` bits
(``PullSysFlag``), and the size limits of the formats.

Must not: hold mutable state, do I/O, log, or import anything of ours beyond ``errors``.

Values are copied from apache/rocketmq 4.9.x (``MixAll``, ``CommitLog``,
``TopicValidator``, ``PermName``, ``MessageSysFlag``, ``PullSysFlag``,
``MessageStoreConfig``, client ``Validators``). The flag groups are classes of plain
``int`` constants rather than ``enum.IntFlag``: they are combined on the append and
pull hot paths, where enum arithmetic would allocate a member per operation.
"""

from __future__ import annotations

from typing import Final

from aiorocketmq.common.errors import RemoteProtocolError

# ---------------------------------------------------------------------------
# Brokers and the CommitLog
# ---------------------------------------------------------------------------

MASTER_ID: Final = 0
"""``brokerId`` of a master; slaves have ids > 0 (``MixAll.MASTER_ID``)."""

VIP_CHANNEL_PORT_OFFSET: Final = -2
"""A broker's VIP channel listens on ``listenPort - 2`` (``BrokerController``'s
``fastRemotingServer``); clients with ``vipChannelEnabled`` and rocketmq-dashboard
dial the route's port minus 2 (``MixAll.brokerVIPChannel``)."""

MESSAGE_MAGIC_CODE: Final = -626843481
"""0xDAA320A7 as a signed int: the v1 record, the only one RocketMQ 4.9 writes."""

MESSAGE_MAGIC_CODE_V2: Final = -626843477
"""0xDAA320AB: RocketMQ >= 5.1 record with a 2-byte topic length. Read-only for us."""

BLANK_MAGIC_CODE: Final = -875286124
"""0xCBD43194: the end-of-file filler record."""

END_FILE_MIN_BLANK_LENGTH: Final = 8
"""A message is placed in a file only if it leaves at least this many bytes behind."""

CQ_STORE_UNIT_SIZE: Final = 20
"""ConsumeQueue unit: physical offset (8) + size (4) + tagsCode (8)."""

DEFAULT_MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
"""``maxMessageSize`` default (4 MiB), for bodies and for a whole batch body."""

TOPIC_MAX_LENGTH: Final = 127
"""The record's topic length is a signed byte; validators also cap names at 127."""

PROPERTIES_MAX_LENGTH: Final = 32767
"""The record's properties length is a signed short."""

CHARACTER_MAX_LENGTH: Final = 255
"""Maximum group name length (client ``Validators.CHARACTER_MAX_LENGTH``)."""

# ---------------------------------------------------------------------------
# System topics and group-derived topics
# ---------------------------------------------------------------------------

AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC: Final = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"

# Short aliases under the names the rest of the specs use.
SCHEDULE_TOPIC_XXXX: Final = RMQ_SYS_SCHEDULE_TOPIC
BENCHMARK_TOPIC: Final = RMQ_SYS_BENCHMARK_TOPIC
OFFSET_MOVED_EVENT: Final = RMQ_SYS_OFFSET_MOVED_EVENT
SELF_TEST_TOPIC: Final = RMQ_SYS_SELF_TEST_TOPIC

SYSTEM_TOPICS: Final = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
"""``TopicValidator.SYSTEM_TOPIC_SET``; names starting with ``rmq_sys_`` are system too."""

NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
"""``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``: clients may not send to these."""

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
LMQ_PREFIX: Final = "%LMQ%"
DEFAULT_REGION: Final = "DefaultRegion"
"""Default ``MSG_REGION`` a broker reports (``MixAll.DEFAULT_TRACE_REGION_ID``)."""


def retry_topic(group: str) -> str:
    """Return the retry topic of a consumer group (``MixAll.getRetryTopic``)."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """Return the dead-letter topic of a consumer group (``MixAll.getDLQTopic``)."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    """Whether ``topic`` is a ``%RETRY%<group>`` topic."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    """Whether ``topic`` is a ``%DLQ%<group>`` topic."""
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


# ---------------------------------------------------------------------------
# Delay levels
# ---------------------------------------------------------------------------

DEFAULT_MESSAGE_DELAY_LEVEL: Final = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""``MessageStoreConfig.messageDelayLevel`` default; level n is the n-th entry."""

_DELAY_UNIT_MS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(levels: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> tuple[int, ...]:
    """Parse a ``messageDelayLevel`` string into delays in ms.

    Follows ``ScheduleMessageService.parseDelayLevel``: entries are separated by single
    spaces, each a decimal number followed by one unit letter ``s``/``m``/``h``/``d``.

    Args:
        levels: the configuration string.

    Returns:
        The delay of level ``n`` at index ``n - 1``; ``len(result)`` is the max level.

    Raises:
        ValueError: an entry is empty, has an unknown unit, or a non-numeric amount
            (a configuration error; pydantic turns it into a validation error).
    """
    delays: list[int] = []
    for entry in levels.split(" "):
        unit_ms = _DELAY_UNIT_MS.get(entry[-1:])
        amount = entry[:-1]
        if unit_ms is None or not amount.isdecimal():
            raise ValueError(f"bad delay level entry {entry!r} in {levels!r}")
        delays.append(int(amount) * unit_ms)
    return tuple(delays)


# ---------------------------------------------------------------------------
# Topic permissions (PermName)
# ---------------------------------------------------------------------------

PERM_PRIORITY: Final = 8
PERM_READ: Final = 4
PERM_WRITE: Final = 2
PERM_INHERIT: Final = 1


def is_readable(perm: int) -> bool:
    """Whether the READ bit is set."""
    return perm & PERM_READ == PERM_READ


def is_writeable(perm: int) -> bool:
    """Whether the WRITE bit is set."""
    return perm & PERM_WRITE == PERM_WRITE


def is_inherited(perm: int) -> bool:
    """Whether the INHERIT bit is set."""
    return perm & PERM_INHERIT == PERM_INHERIT


def perm_to_string(perm: int) -> str:
    """Render permissions the way ``PermName.perm2String`` does, e.g. ``"RW-"``."""
    return (
        ("R" if is_readable(perm) else "-")
        + ("W" if is_writeable(perm) else "-")
        + ("X" if is_inherited(perm) else "-")
    )


# ---------------------------------------------------------------------------
# Message sysFlag (stored in every CommitLog record)
# ---------------------------------------------------------------------------


class MessageSysFlag:
    """Bits of a message's ``sysFlag`` (``MessageSysFlag`` in RocketMQ 4.9.x)."""

    COMPRESSED_FLAG: Final = 0x1
    MULTI_TAGS_FLAG: Final = 0x2
    TRANSACTION_NOT_TYPE: Final = 0x0
    TRANSACTION_PREPARED_TYPE: Final = 0x4
    TRANSACTION_COMMIT_TYPE: Final = 0x8
    TRANSACTION_ROLLBACK_TYPE: Final = 0xC
    BORNHOST_V6_FLAG: Final = 0x10
    STOREHOSTADDRESS_V6_FLAG: Final = 0x20
    NEED_UNWRAP_FLAG: Final = 0x40
    INNER_BATCH_FLAG: Final = 0x80
    COMPRESSION_LZ4_TYPE: Final = 0x100
    COMPRESSION_ZSTD_TYPE: Final = 0x200
    COMPRESSION_ZLIB_TYPE: Final = 0x300
    COMPRESSION_TYPE_COMPARATOR: Final = 0x700


# Compression type numbers, ``(sysFlag & 0x700) >> 8`` (``CompressionType``).
COMPRESSION_TYPE_NONE_OR_ZLIB: Final = 0
"""Clients before 4.9.4 leave the type bits at 0, which means zlib."""
COMPRESSION_TYPE_LZ4: Final = 1
COMPRESSION_TYPE_ZSTD: Final = 2
COMPRESSION_TYPE_ZLIB: Final = 3


def transaction_value(sys_flag: int) -> int:
    """Return the transaction type bits (``sysFlag & 0xC``)."""
    return sys_flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


def reset_transaction_value(sys_flag: int, tran_type: int) -> int:
    """Replace the transaction type bits with ``tran_type``."""
    return (sys_flag & ~MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) | tran_type


def clear_compressed_flag(sys_flag: int) -> int:
    """Clear bit 0 (COMPRESSED), e.g. after a consumer inflated the body."""
    return sys_flag & ~MessageSysFlag.COMPRESSED_FLAG


def is_compressed(sys_flag: int) -> bool:
    """Whether the stored body is compressed."""
    return sys_flag & MessageSysFlag.COMPRESSED_FLAG != 0


def compression_type(sys_flag: int) -> int:
    """Return the compression type number, ``(sysFlag & 0x700) >> 8``.

    Raises:
        RemoteProtocolError: the type is not one of 0 (legacy zlib), 1, 2, 3;
            ``CompressionType.findByValue`` rejects the same values.
    """
    value = (sys_flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR) >> 8
    if value > COMPRESSION_TYPE_ZLIB:
        raise RemoteProtocolError(f"unknown compression type {value} in sysFlag {sys_flag:#x}")
    return value


# ---------------------------------------------------------------------------
# Pull request sysFlag
# ---------------------------------------------------------------------------


class PullSysFlag:
    """Bits of PULL_MESSAGE's ``sysFlag`` header field (``PullSysFlag``)."""

    COMMIT_OFFSET: Final = 0x1
    SUSPEND: Final = 0x2
    SUBSCRIPTION: Final = 0x4
    CLASS_FILTER: Final = 0x8
    LITE_PULL: Final = 0x10


def build_pull_sys_flag(
    commit_offset: bool,
    suspend: bool,
    subscription: bool,
    class_filter: bool = False,
    lite_pull: bool = False,
) -> int:
    """Combine pull flags the way ``PullSysFlag.buildSysFlag`` does."""
    flag = 0
    if commit_offset:
        flag |= PullSysFlag.COMMIT_OFFSET
    if suspend:
        flag |= PullSysFlag.SUSPEND
    if subscription:
        flag |= PullSysFlag.SUBSCRIPTION
    if class_filter:
        flag |= PullSysFlag.CLASS_FILTER
    if lite_pull:
        flag |= PullSysFlag.LITE_PULL
    return flag


def clear_commit_offset_flag(sys_flag: int) -> int:
    """Clear the commit-offset bit (a slave must never store a commit offset)."""
    return sys_flag & ~PullSysFlag.COMMIT_OFFSET


def has_commit_offset_flag(sys_flag: int) -> bool:
    """Whether the request's ``commitOffset`` should be stored."""
    return sys_flag & PullSysFlag.COMMIT_OFFSET != 0


def has_suspend_flag(sys_flag: int) -> bool:
    """Whether the request may be held (long polling)."""
    return sys_flag & PullSysFlag.SUSPEND != 0


def has_subscription_flag(sys_flag: int) -> bool:
    """Whether the request carries its own subscription expression."""
    return sys_flag & PullSysFlag.SUBSCRIPTION != 0


def has_class_filter_flag(sys_flag: int) -> bool:
    """Whether the (obsolete) class-filter bit is set."""
    return sys_flag & PullSysFlag.CLASS_FILTER != 0


def has_lite_pull_flag(sys_flag: int) -> bool:
    """Whether the request comes from a Java lite pull consumer."""
    return sys_flag & PullSysFlag.LITE_PULL != 0
