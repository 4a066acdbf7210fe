"""``mqbench producer|consumer`` against real ``mqnamesrv`` + ``mqbroker`` processes: the
report lines parse with regular expressions built from RocketMQ 4.9.8's
``benchmark/Producer.java`` / ``Consumer.java`` format strings, the figures add up,
and ``--json`` gives the same figures as JSON lines."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cluster import create_topic, start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
MESSAGES = 6000

# Java: "Current Time: %s Send TPS: %d Max RT(ms): %d Average RT(ms): %7.3f Send Failed: %d
# Response Failed: %d" with %s = UtilAll.timeMillisToHumanString2 (yyyy-MM-dd HH:mm:ss,SSS).
PRODUCER_LINE = re.compile(
    r"^Current Time: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} Send TPS: (\d+) Max RT\(ms\): (\d+) "
    r"Average RT\(ms\): +(\d+\.\d{3}) Send Failed: (\d+) Response Failed: (\d+)"
)
PRODUCER_DONE = re.compile(
    r"^\[Complete\] Send Total: (\d+) Send TPS: (\d+) Max RT\(ms\): (\d+) "
    r"Average RT\(ms\): +(\d+\.\d{3}) Send Failed: (\d+) Response Failed: (\d+)"
)
# Java: "Current Time: %s TPS: %d FAIL: %d AVG(B2C) RT(ms): %7.3f AVG(S2C) RT(ms): %7.3f
# MAX(B2C) RT(ms): %d MAX(S2C) RT(ms): %d" with %s = System.currentTimeMillis().
CONSUMER_LINE = re.compile(
    r"^Current Time: \d{13} TPS: (\d+) FAIL: (\d+) AVG\(B2C\) RT\(ms\): +(\d+\.\d{3}) "
    r"AVG\(S2C\) RT\(ms\): +(\d+\.\d{3}) MAX\(B2C\) RT\(ms\): (\d+) MAX\(S2C\) RT\(ms\): (\d+)"
)


def _bench(start_process: StartProcess, name: str, *args: str) -> ManagedProcess:
    ready = r'Consumer Started|"started": true' if args[0] == "consumer" else None
    return start_process(["-m", "aiorocketmq.cli.bench", *args], name=name, ready=ready, wait=False)


async def test_producer_and_consumer_lines_parse_and_add_up(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    await create_topic(broker.addr, "BenchTopic")
    common = ["-n", namesrv, "-t", "BenchTopic", "--report-interval", "0.2", "--seconds", "90"]
    text_consumer = _bench(start_process, "cons-text", "consumer", *common, "-g", "cg_text",
                           "-q", str(MESSAGES))  # fmt: skip
    json_consumer = _bench(start_process, "cons-json", "consumer", *common, "-g", "cg_json",
                           "-q", str(MESSAGES), "--json")  # fmt: skip
    for proc in (text_consumer, json_consumer):
        await proc.wait_ready_async()
    producer = _bench(start_process, "producer", "producer", *common, "-w", "4", "-s", "256",
                      "-k", "true", "-l", "3", "-q", str(MESSAGES))  # fmt: skip
    for proc in (producer, text_consumer, json_consumer):
        await wait_until(lambda p=proc: not p.running, timeout=90, what=f"{proc.name} exits",
                         describe=proc.tail)  # fmt: skip
        assert proc.returncode == 0, proc.tail()

    out = producer.output().splitlines()
    periodic = [m for m in map(PRODUCER_LINE.match, out) if m]
    assert periodic, producer.tail()
    assert all(int(m[1]) > 0 and m[4] == m[5] == "0" for m in periodic), producer.tail()
    done = [m for m in map(PRODUCER_DONE.match, out) if m]
    assert len(done) == 1, producer.tail()
    total, tps, max_rt, avg_rt, failed, response_failed = done[0].groups()
    assert (int(total), failed, response_failed) == (MESSAGES, "0", "0")
    assert int(tps) > 0 and float(avg_rt) <= int(max_rt) + 1

    lines = text_consumer.output().splitlines()
    periodic_c = [m for m in map(CONSUMER_LINE.match, lines) if m]
    assert periodic_c and sum(int(m[1]) for m in periodic_c) > 0, text_consumer.tail()
    assert all(m[2] == "0" for m in periodic_c)
    assert f"[Complete] Receive Total: {MESSAGES} FAIL: 0" in lines, text_consumer.tail()

    reports = [json.loads(line) for line in json_consumer.output().splitlines() if line]
    assert reports[0] == {"started": True, "group": "cg_json"}
    assert any(r.get("tps", 0) > 0 for r in reports), reports
    assert reports[-1] == {"complete": True, "received": MESSAGES, "fail": 0}
