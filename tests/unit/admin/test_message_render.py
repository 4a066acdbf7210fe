"""The message commands' text, checked against Java's formats."""

# Java's printf formats kept verbatim, as in the code under test.
# ruff: noqa: UP031

from __future__ import annotations

import time

import pytest

from aiorocketmq.admin import message_render as mr
from aiorocketmq.admin.message_admin import MessageTrack, RollbackStats, TrackType
from aiorocketmq.admin.render import human_time_ms
from aiorocketmq.broker.processors import reset_offset as broker_side
from aiorocketmq.cli.admin import build_parser, main
from aiorocketmq.common.admin_bodies import ResetOffsetBody
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.remoting.broker_admin_headers import ResetOffsetRequestHeader


def message() -> MessageExt:
    return MessageExt(
        topic="T",
        body=b"\x00\x7f\x80\xff",
        properties={"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "U1"},
        queue_id=2,
        queue_offset=7,
        store_size=120,
        born_timestamp=1_700_000_000_123,
        born_host=("10.0.0.1", 5000),
        store_timestamp=1_700_000_000_456,
        store_host=("10.0.0.2", 10911),
        msg_id="0A00000200002A9F0000000000000064",
        commit_log_offset=100,
        body_crc=9,
    )


def test_print_msg_text_is_javas_lines() -> None:
    msg = message()
    text = mr.print_msg_text(msg, "/x/U1")
    assert text.splitlines() == [
        "OffsetID:            0A00000200002A9F0000000000000064",
        "Topic:               T",
        "Tags:                [a]",
        "Keys:                [k1 k2]",
        "Queue ID:            2",
        "Queue Offset:        7",
        "CommitLog Offset:    100",
        "Reconsume Times:     0",
        f"Born Timestamp:      {human_time_ms(1_700_000_000_123)}",
        f"Store Timestamp:     {human_time_ms(1_700_000_000_456)}",
        "Born Host:           10.0.0.1:5000",
        "Store Host:          10.0.0.2:10911",
        "System Flag:         0",
        "Properties:          {TAGS=a, KEYS=k1 k2, UNIQ_KEY=U1}",
        "Message Body Path:   /x/U1",
    ]
    msg.properties = {}
    unique = mr.print_msg_text(msg, "/p", offset_id=False).splitlines()
    assert unique[0].startswith("Topic:") and unique[1:3] == [
        "Tags:                [null]",
        "Keys:                [null]",
    ]
    assert mr.client_msg_id(msg) == msg.msg_id


def test_print_message_line_is_message_ext_to_string() -> None:
    line = mr.print_message_line(message(), "broker-a", "latin-1", True)
    assert line.startswith(
        "MSGID: U1 MessageExt [brokerName=broker-a, queueId=2, storeSize=120, queueOffset=7, "
        "sysFlag=0, bornTimestamp=1700000000123, bornHost=/10.0.0.1:5000, "
    )
    assert "body=[0, 127, -128, -1], transactionId='null'}] BODY: \x00\x7f\x80\xff\n" in line
    assert mr.print_message_line(message(), None, "utf-8", False).endswith("NOT PRINT BODY\n")


def test_timestamps_as_java_parses_them() -> None:
    assert mr.parse_timestamp(" 1700000000123 ") == 1_700_000_000_123
    expected = int(time.mktime((2024, 3, 5, 6, 7, 8, 0, 0, -1))) * 1000 + 9
    assert mr.parse_timestamp("2024-03-05#06:07:08:009") == expected
    for bad in ("2024-03-05 06:07:08:009", "yesterday", "2024-03-05#06:07:08"):
        with pytest.raises(ValueError):
            mr.parse_timestamp(bad)


def test_reset_tables() -> None:
    text = mr.reset_offset_text({MessageQueue("T", "b" * 40, 1): 5, MessageQueue("T", "a", 0): 3})
    assert text.splitlines() == [
        "%-40s  %-40s  %-40s" % ("#brokerName", "#queueId", "#offset"),
        "%-40s  %-40d  %-40d" % ("a", 0, 3),
        "%-40s  %-40d  %-40d" % ("b" * 32, 1, 5),
    ]
    old = mr.reset_offset_old_text([RollbackStats("a", 0, 9, 4, 2, 2)])
    assert old.splitlines()[1] == "%-20s  %-20d  %-20d  %-20d  %-20d  %-20d" % ("a", 0, 9, 4, 2, 2)


@pytest.mark.parametrize(
    "argv",
    [
        ["queryMsgByOffset", "-t", "T", "-b", "b", "-i", "x", "-o", "0"],
        ["resetOffsetByTime", "-g", "G", "-t", "T"],
        ["queryMsgByKey", "-t", "T"],
    ],
)
def test_bad_command_lines_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: mqadmin" in capsys.readouterr().err


def test_bad_timestamp_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["resetOffsetByTime", "-n", "127.0.0.1:1", "-g", "G", "-t", "T", "-s", "soon"])
    assert code == 2
    assert "-s: not a timestamp" in capsys.readouterr().err


def test_body_dir_option_and_its_default() -> None:
    for spelling in ("--bodyDir", "--body-dir"):
        args = build_parser().parse_args(["queryMsgById", "-i", "X", spelling, "/d"])
        assert args.bodyDir == "/d"
    assert build_parser().parse_args(["queryMsgByUniqueKey", "-i", "X", "-t", "T"]).bodyDir is None


def test_track_section() -> None:
    assert mr.message_track_text([]) == "\n\nWARN: No Consumer\n"
    tracks = [
        MessageTrack("G1", TrackType.CONSUMED),
        MessageTrack("G2", TrackType.NOT_ONLINE, "CODE:206 DESC:Not found"),
    ]
    assert mr.message_track_text(tracks) == (
        "\n\nMessageTrack [consumerGroup=G1, trackType=CONSUMED, exceptionDesc=null]\n"
        "MessageTrack [consumerGroup=G2, trackType=NOT_ONLINE, exceptionDesc=CODE:206 DESC:Not "
        "found]\n"
    )


def test_admin_reads_the_brokers_reset_body() -> None:
    table = {MessageQueue("T", "broker-a", 0): 5, MessageQueue('T"x', "b", 7): 2**40}
    encoded = broker_side.ResetOffsetBody(table).encode()
    assert ResetOffsetBody.decode(encoded).offset_table == table
    header = ResetOffsetRequestHeader("t", "g", -1, False).to_ext_fields()
    assert broker_side.ResetOffsetRequestHeader.from_ext_fields(header) == (
        broker_side.ResetOffsetRequestHeader("t", "g", -1, False)
    )
