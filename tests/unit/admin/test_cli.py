"""mqadmin's command line: Java's names and short flags, NAMESRV_ADDR, exit codes."""

from __future__ import annotations

import asyncio

import pytest

from aiorocketmq.admin.commands import COMMANDS
from aiorocketmq.cli.admin import WATCHABLE, build_parser, main, namesrv_addr_of, watch


def test_every_command_has_a_parser_and_java_flags() -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["updateTopic", "-n", "h:9876", "-c", "C", "-t", "T", "-r", " 4", "-w", "2", "-p", "6",
         "-o", "true", "-u", "false", "-s", "true"]
    )  # fmt: skip
    assert (args.command, args.namesrvAddr, args.clusterName, args.brokerAddr) == (
        "updateTopic", "h:9876", "C", None,
    )  # fmt: skip
    assert (args.topic, args.readQueueNums, args.writeQueueNums, args.perm) == ("T", 4, 2, 6)
    assert (args.order, args.unit, args.hasUnitSub) == ("true", "false", "true")
    args = parser.parse_args(
        ["updateSubGroup", "-b", "h:1", "-g", "G", "-s", "true", "-m", "false", "-d", "true",
         "-q", "2", "-r", "5", "-i", "1", "-w", "1", "-a", "false"]
    )  # fmt: skip
    assert (args.brokerAddr, args.groupName, args.retryQueueNums, args.retryMaxTimes) == (
        "h:1", "G", 2, 5,
    )  # fmt: skip
    assert (args.brokerId, args.whichBrokerWhenConsumeSlowly, args.notifyConsumerIdsChanged) == (
        1, 1, "false",
    )  # fmt: skip
    for argv in (
        ["deleteTopic", "-t", "T", "-c", "C"],
        ["topicList", "-c"],
        ["topicRoute", "-t", "T", "-l"],
        ["topicStatus", "-t", "T"],
        ["clusterList", "-m", "-i", "5"],
        ["brokerStatus", "-b", "h:1"],
        ["deleteSubGroup", "-g", "G", "-c", "C", "-r", "true"],
        ["consumerProgress", "-g", "G", "-s", "true"],
        ["consumerConnection", "-g", "G", "-b", "h:1"],
        ["producerConnection", "-g", "G", "-t", "T"],
    ):
        assert parser.parse_args(argv).command == argv[0]
    assert set(COMMANDS) == {
        "updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "clusterList",
        "brokerStatus", "updateSubGroup", "deleteSubGroup", "consumerProgress",
        "consumerConnection", "producerConnection",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["updateTopic", "-t", "T"], "one of the arguments -b/--brokerAddr -c/--clusterName"),
        (["updateTopic", "-b", "h:1", "-c", "C", "-t", "T"], "not allowed with argument"),
        (["updateTopic", "-b", "h:1", "-t", "T", "-r", "eight"], "not a valid int: 'eight'"),
        (["updateTopic", "-b", "h:1", "-t", "T", "-w", "4294967296"], "out of int range"),
        (["deleteTopic", "-t", "T"], "-c/--clusterName"),
        (["topicRoute"], "-t/--topic"),
        (["noSuchCommand"], "invalid choice: 'noSuchCommand'"),
    ],
)
def test_bad_usage_exits_2_with_the_reason(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_namesrv_addr_from_flag_then_environment() -> None:
    parser = build_parser()
    with_flag = parser.parse_args(["topicList", "-n", " a:1;b:2 "])
    assert namesrv_addr_of(with_flag, {"NAMESRV_ADDR": "c:3"}) == "a:1;b:2"
    without = parser.parse_args(["topicList"])
    assert namesrv_addr_of(without, {"NAMESRV_ADDR": "c:3"}) == "c:3"
    assert namesrv_addr_of(without, {"NAMESRV_ADDR": "  "}) is None
    assert namesrv_addr_of(without, {}) is None


def test_no_name_server_exits_1_and_says_how_to_give_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert main(["topicList"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        "mqadmin topicList: command failed: "
        "no name server address: pass -n host:port or set NAMESRV_ADDR"
    )


def test_sub_group_without_broker_or_cluster_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["updateSubGroup", "-g", "G"]) == 2
    assert "needs -b brokerAddr or -c clusterName" in capsys.readouterr().err


async def test_watch_runs_again_until_cancelled_and_once_without_an_interval() -> None:
    runs: list[int] = []
    enough = asyncio.Event()

    async def once() -> None:
        runs.append(len(runs))
        if len(runs) == 3:
            enough.set()

    task = asyncio.create_task(watch(once, 0.001))
    async with asyncio.timeout(5):
        await enough.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runs[:3] == [0, 1, 2]
    runs.clear()
    await watch(once, None)
    assert runs == [0]


def test_watch_flag_only_on_read_only_commands() -> None:
    """``-i`` / ``--watch`` on the read-only commands; elsewhere ``-i`` is Java's own."""
    parser = build_parser()
    for name in WATCHABLE:
        assert parser.parse_args([name, "--watch", "2", *_required(name)]).watch == 2.0
        assert parser.parse_args([name, "-i", "0.5", *_required(name)]).watch == 0.5
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["updateTopic", "-c", "C", "-t", "T", "--watch", "2"])
    assert exc.value.code == 2
    assert parser.parse_args(["queryMsgById", "-i", "0A0B"]).msgId == "0A0B"
    assert parser.parse_args(["clusterList", "-i", "3"]).interval == 3


def _required(name: str) -> list[str]:
    """The least each watchable command needs to parse."""
    return {
        "topicRoute": ["-t", "T"], "topicStatus": ["-t", "T"], "topicClusterList": ["-t", "T"],
        "haStatus": ["-c", "C"], "consumerConnection": ["-g", "G"], "lag": ["-g", "G"],
        "producerConnection": ["-g", "G", "-t", "T"],
    }.get(name, [])  # fmt: skip
