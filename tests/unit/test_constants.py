"""Shared RocketMQ constants and their helpers."""

from __future__ import annotations

import pytest

from aiorocketmq.common import constants as c


def test_magic_codes_are_the_signed_java_ints() -> None:
    def signed(value: int) -> int:
        return value - 2**32 if value >= 2**31 else value

    assert signed(0xDAA320A7) == c.MESSAGE_MAGIC_CODE == -626843481
    assert signed(0xCBD43194) == c.BLANK_MAGIC_CODE == -875286124
    assert signed(0xDAA320AB) == c.MESSAGE_MAGIC_CODE_V2
    assert c.END_FILE_MIN_BLANK_LENGTH == 8
    assert c.CQ_STORE_UNIT_SIZE == 20
    assert c.DEFAULT_MAX_MESSAGE_SIZE == 4 * 1024 * 1024
    assert (c.TOPIC_MAX_LENGTH, c.PROPERTIES_MAX_LENGTH, c.CHARACTER_MAX_LENGTH) == (
        127,
        32767,
        255,
    )
    assert c.MASTER_ID == 0


def test_default_delay_levels() -> None:
    levels = c.parse_delay_levels()
    assert len(levels) == 18
    assert levels[0] == 1000
    assert levels[2] == 10_000  # level 3, as the C++ capture's delayed send
    assert levels[4] == 60_000
    assert levels[-1] == 2 * 3_600_000
    assert c.parse_delay_levels("1s 2d") == (1000, 2 * 86_400_000)


@pytest.mark.parametrize("bad", ["", "1x", "s", "1s  2s", "1.5s", "-1s"])
def test_bad_delay_levels(bad: str) -> None:
    with pytest.raises(ValueError, match="bad delay level"):
        c.parse_delay_levels(bad)


def test_group_topics() -> None:
    assert c.retry_topic("CID_x") == "%RETRY%CID_x"
    assert c.dlq_topic("CID_x") == "%DLQ%CID_x"
    assert c.is_retry_topic("%RETRY%CID_x") and not c.is_retry_topic("TopicTest")
    assert c.is_dlq_topic("%DLQ%CID_x") and not c.is_dlq_topic("%RETRY%CID_x")


def test_permissions() -> None:
    assert (c.PERM_PRIORITY, c.PERM_READ, c.PERM_WRITE, c.PERM_INHERIT) == (8, 4, 2, 1)
    assert c.perm_to_string(6) == "RW-"
    assert c.perm_to_string(7) == "RWX"
    assert c.perm_to_string(4) == "R--"
    assert c.perm_to_string(0) == "---"
    assert c.is_readable(6) and c.is_writeable(6) and not c.is_inherited(6)


def test_message_sys_flag() -> None:
    f = c.MessageSysFlag
    assert (f.COMPRESSED_FLAG, f.MULTI_TAGS_FLAG) == (0x1, 0x2)
    assert (
        f.TRANSACTION_NOT_TYPE,
        f.TRANSACTION_PREPARED_TYPE,
        f.TRANSACTION_COMMIT_TYPE,
        f.TRANSACTION_ROLLBACK_TYPE,
    ) == (0, 4, 8, 12)
    assert (f.BORNHOST_V6_FLAG, f.STOREHOSTADDRESS_V6_FLAG) == (0x10, 0x20)
    assert (f.NEED_UNWRAP_FLAG, f.INNER_BATCH_FLAG) == (0x40, 0x80)
    assert (f.COMPRESSION_LZ4_TYPE, f.COMPRESSION_ZSTD_TYPE, f.COMPRESSION_ZLIB_TYPE) == (
        0x100,
        0x200,
        0x300,
    )
    assert f.COMPRESSION_TYPE_COMPARATOR == 0x700
    assert c.transaction_value(0x31 | 8) == 8
    assert c.reset_transaction_value(0x31 | 8, 4) == 0x31 | 4
    assert c.clear_compressed_flag(0x301) == 0x300
    assert c.is_compressed(1) and not c.is_compressed(0x300)
    assert c.compression_type(0x1) == c.COMPRESSION_TYPE_NONE_OR_ZLIB
    assert c.compression_type(0x301) == c.COMPRESSION_TYPE_ZLIB
    assert c.compression_type(0x101) == c.COMPRESSION_TYPE_LZ4
    assert c.compression_type(0x201) == c.COMPRESSION_TYPE_ZSTD


def test_pull_sys_flag() -> None:
    # Values seen on the wire: 6 (first pulls), 7 (with commit), 4 (C++ pull consumer).
    assert c.build_pull_sys_flag(False, True, True) == 6
    assert c.build_pull_sys_flag(True, True, True) == 7
    assert c.build_pull_sys_flag(False, False, True) == 4
    assert c.build_pull_sys_flag(True, True, True, True, True) == 31
    assert c.clear_commit_offset_flag(7) == 6
    assert c.has_commit_offset_flag(7) and not c.has_commit_offset_flag(6)
    assert c.has_suspend_flag(6) and not c.has_suspend_flag(4)
    assert c.has_subscription_flag(4) and not c.has_subscription_flag(3)
    assert c.has_class_filter_flag(8) and not c.has_class_filter_flag(7)
    assert c.has_lite_pull_flag(16) and not c.has_lite_pull_flag(15)


def test_system_topic_names() -> None:
    assert c.AUTO_CREATE_TOPIC_KEY_TOPIC == "TBW102"
    assert c.SCHEDULE_TOPIC_XXXX == "SCHEDULE_TOPIC_XXXX"
    assert c.RMQ_SYS_TRANS_HALF_TOPIC in c.SYSTEM_TOPICS
    assert c.NOT_ALLOWED_SEND_TOPICS < c.SYSTEM_TOPICS
    assert len(c.SYSTEM_TOPICS) == 9
