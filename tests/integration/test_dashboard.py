"""``mqadmin dashboard`` against a real ``mqnamesrv`` + ``mqbroker``, read in headless
Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright's bundled driver).

The numbers checked are the ones the rendered DOM shows, compared with what the
broker itself reports through the admin API: topic total = messages sent, per-queue
max offsets, group lag = sent - committed, the broker row's address and role; a
message is found by key, by offsetMsgId and by unique key with its body; bad input
gives a 4xx page with a message.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import async_playwright

from aiorocketmq.admin.message_admin import MessageAdmin
from aiorocketmq.admin.mq_admin import MQAdmin, MQAdminError
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus, SendResult
from aiorocketmq.common.message import Message
from tests.support.cluster import (
    BrokerProcess,
    create_topic,
    start_broker,
    start_namesrv,
    wait_route,
)
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
DASHBOARD_READY = r"dashboard ready at (?P<url>http://\S+/)"
TOPIC = "DashIT"
GROUP = "CID_dash_it"
MESSAGES = 20
PER_QUEUE_CONSUMED = 2
StartProcess = Callable[..., ManagedProcess]


async def produce(namesrv: str) -> list[SendResult]:
    config = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="dash-p")
    sent = []
    async with Producer("PG_dash_it", client_config=config) as producer:
        for i in range(MESSAGES):
            msg = Message(TOPIC, f"dashboard body {i}".encode())
            msg.keys = [f"dash-{i}"]
            sent.append(await producer.send(msg))
    return sent


async def consume_some(consumer: PullConsumer) -> int:
    """Pull PER_QUEUE_CONSUMED messages of each queue and commit; the count committed."""
    consumed = 0
    for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
        result = await consumer.pull(mq, "*", 0, PER_QUEUE_CONSUMED)
        assert result.status == PullStatus.FOUND
        consumer.update_consume_offset(mq, result.next_begin_offset)
        consumed += result.next_begin_offset
    await consumer.persist_offsets_now()
    return consumed


async def indexed(namesrv: str) -> bool:
    async with MQAdmin(namesrv) as admin:
        try:
            return len(await MessageAdmin(admin).query_message(TOPIC, f"dash-{MESSAGES - 1}")) == 1
        except MQAdminError:
            return False


async def text(page: Any, selector: str) -> str:
    return str(await page.locator(selector).inner_text()).strip()


async def check_cluster(page: Any, url: str, broker: BrokerProcess) -> None:
    await page.goto(url)
    row = f'tr.broker[data-address="{broker.addr}"]'
    assert await text(page, f'{row} td[data-field="role"]') == "master"
    assert await text(page, f'{row} td[data-field="address"]') == broker.addr
    assert await text(page, f'{row} td[data-field="brokerName"]') == "broker-a"
    shown = int(await text(page, f'{row} td[data-field="commitLogMaxOffset"]'))
    async with MQAdmin(None) as admin:
        runtime = await admin.fetch_broker_runtime_stats(broker.addr)
    assert shown == int(runtime["commitLogMaxOffset"])  # nothing is written meanwhile
    assert await page.locator("#chart svg polyline.series").count() >= 2


async def check_topics(page: Any, url: str, namesrv: str) -> None:
    await page.goto(url + "topics")
    row = f'tr.topic[data-topic="{TOPIC}"]'
    assert int(await text(page, f'{row} td[data-field="totalMessages"]')) == MESSAGES
    for internal in ("TBW102", "DefaultCluster", "broker-a", "%RETRY%" + GROUP):
        assert await page.locator(f'tr.topic[data-topic="{internal}"]').count() == 0, internal
    await page.click("#toggle-system")
    await page.wait_for_url("**/topics?system=1")
    assert await page.locator('tr.topic[data-topic="TBW102"]').count() == 1
    await page.goto(url + "topics")
    await page.click(f"{row} a")
    await page.wait_for_url(f"**/topic?topic={TOPIC}")
    async with MQAdmin(namesrv) as admin:
        stats = await admin.examine_topic_stats(TOPIC)
    assert int(await text(page, "#total-messages")) == MESSAGES
    for mq, offsets in stats.offset_table.items():
        qrow = f'tr.queue[data-broker="{mq.broker_name}"][data-queue="{mq.queue_id}"]'
        assert int(await text(page, f'{qrow} td[data-field="maxOffset"]')) == offsets.max_offset
        assert int(await text(page, f'{qrow} td[data-field="minOffset"]')) == offsets.min_offset


async def check_group(page: Any, url: str, consumed: int) -> None:
    await page.goto(url + "groups")
    row = f'tr.group[data-group="{GROUP}"]'
    assert int(await text(page, f'{row} td[data-field="lag"]')) == MESSAGES - consumed
    assert int(await text(page, f'{row} td[data-field="clients"]')) == 1
    await page.click(f"{row} a")
    await page.wait_for_url(f"**/group?group={GROUP}")
    assert int(await text(page, "#total-lag")) == MESSAGES - consumed
    lags = [int(t) for t in await page.locator('td[data-field="lag"]').all_inner_texts()]
    assert sum(lags) == MESSAGES - consumed and len(lags) == 4
    offsets = await page.locator('td[data-field="consumerOffset"]').all_inner_texts()
    assert [int(o) for o in offsets] == [PER_QUEUE_CONSUMED] * 4
    assert "dash-c" in await text(page, 'tr.queue td[data-field="client"] >> nth=0')
    # The lag chart: the broker's offset history (a snapshot every 300 ms here) and now.
    assert await page.locator(f'#lag-chart polyline[data-series="{TOPIC}"]').count() == 1
    reply = await page.goto(url + f"api/group?group={GROUP}")
    history = [p for p in json.loads(await reply.text())["lagHistory"] if p["topic"] == TOPIC]
    # (a snapshot between the per-queue commits counts the committed queues only)
    assert len(history) >= 2 and history[-1]["diff"] == MESSAGES - consumed
    assert all(0 <= p["diff"] <= MESSAGES - consumed for p in history)


async def check_messages(page: Any, url: str, sent: list[SendResult]) -> None:
    await page.goto(url + "messages")
    await page.fill("#by-key input[name=topic]", TOPIC)
    await page.fill("#by-key input[name=key]", "dash-7")
    await page.click("#by-key button")
    await page.wait_for_url("**/messages?topic=*&key=dash-7")
    assert await text(page, "#found") == "1 message(s)"
    assert await text(page, "pre.body-preview") == "dashboard body 7"
    assert await text(page, 'td[data-field="offsetMsgId"]') == sent[7].offset_msg_id

    await page.goto(url + "messages")
    await page.fill("#by-id input[name=msgId]", str(sent[3].offset_msg_id))
    await page.click("#by-id button")
    await page.wait_for_url("**/messages?*msgId=*")
    assert await text(page, "pre.body-preview") == "dashboard body 3"
    await page.goto(f"{url}messages?topic={TOPIC}&msgId={sent[5].msg_id}")  # a unique key
    assert await text(page, "pre.body-preview") == "dashboard body 5"
    assert await text(page, 'td[data-field="msgId"]') == sent[5].msg_id


async def check_bad_input(page: Any, url: str) -> None:
    for path, status, words in [
        ("topic?topic=NoSuchTopic", 404, "not found"),
        ("topic?topic=bad%20name!", 400, "topic contains illegal characters"),
        ("group?group=CID_nobody", 404, "not found"),
        ("messages?msgId=zz-not-hex", 400, "malformed message id"),
        (f"messages?topic={TOPIC}&key=no-such-key", 404, "no message"),
        ("nowhere", 404, "no such page"),
    ]:
        response = await page.goto(url + path)
        assert response.status == status, path
        assert words in await text(page, "#error"), path
    response = await page.goto(url + "api/topic?topic=NoSuchTopic")
    assert response.status == 404
    assert "not found" in json.loads(await response.text())["error"]


async def test_dashboard_pages_show_the_brokers_numbers(
    start_process: StartProcess, tmp_path: Path
) -> None:
    # No skip: without the browser this test must fail (.ci/run installs it).
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: apt-get install chromium"

    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(
        start_process, tmp_path, namesrv, "broker-a", flushConsumerOffsetHistoryInterval=300
    )
    await create_topic(broker.addr, TOPIC)
    await wait_route(namesrv, TOPIC, timeout=20)
    sent = await produce(namesrv)
    await wait_until(lambda: indexed(namesrv), timeout=20, what="the last key indexed")
    config = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="dash-c")
    async with PullConsumer(GROUP, client_config=config) as consumer:
        consumer.subscribe(TOPIC)
        consumed = await consume_some(consumer)
        await wait_route(namesrv, f"%RETRY%{GROUP}", timeout=20)
        dash = start_process(
            ["-m", "aiorocketmq.cli.admin", "dashboard", "-n", namesrv, "--port", "0",
             "--sampleInterval", "0.3", "--refresh", "0"],
            name="dashboard", ready=DASHBOARD_READY, wait=False,
        )  # fmt: skip
        url = (await dash.wait_ready_async())["url"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            page = await browser.new_page(viewport={"width": 1200, "height": 800})

            async def sampled() -> bool:
                reply = await page.goto(url + "api/tps")
                return len(json.loads(await reply.text())["samples"]) >= 3

            await wait_until(sampled, timeout=15, what="three TPS samples")
            await check_cluster(page, url, broker)
            shot = tmp_path / "dashboard.png"
            await page.screenshot(path=str(shot), full_page=True)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000
            await check_topics(page, url, namesrv)
            await check_group(page, url, consumed)
            await check_messages(page, url, sent)
            await check_bad_input(page, url)
            await browser.close()
