"""A RocketMQ 5 receive (POP) of records out of memory, on a real in-process broker:
the records are read in a thread first, then the receive reads again with nothing to
wait for, and answers the right messages, in order, once each."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.store import page_ops
from tests.support.grpc_v2 import V2Client, in_process_grpc_broker, v2_message
from tests.support.page_cache import drop_from_page_cache
from tests.unit.component.test_proxy_grpc import TOPIC, _messages, _receive_request, _send

#: 64 KiB CommitLog files: a restart's recovery reads the last three back, and the
#: first messages' file stays out of memory.
FILES = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 50 * 20}
BODIES = [bytes([i % 251]) * 1024 for i in range(400)]


async def test_a_receive_of_records_out_of_memory_reads_them_first(tmp_path: Path) -> None:
    if not page_ops.populate_supported():
        pytest.skip("no MADV_POPULATE_READ here: a receive reads as before")
    async with in_process_grpc_broker(tmp_path, **FILES) as (broker, proxy):
        broker.ctx.topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
        store_dir = Path(broker.store.config.store_path_root_dir)
        client = V2Client(f"127.0.0.1:{proxy.port}")
        try:
            for body in BODIES:
                await _send(client, v2_message(TOPIC, body))
        finally:
            await client.close()
    os.sync()
    drop_from_page_cache(store_dir)
    async with in_process_grpc_broker(tmp_path, **FILES) as (broker, proxy):
        client = V2Client(f"127.0.0.1:{proxy.port}")
        try:
            first = _messages(await client.receive(_receive_request(batch=32)))
            assert broker.store.read_ahead.cold_reads >= 1
            second = _messages(await client.receive(_receive_request(batch=32)))
        finally:
            await client.close()
    assert [m.body for m in first] == BODIES[:32]
    # The next ones, from where the first stopped (a read ends at its ConsumeQueue file).
    assert second and [m.body for m in second] == BODIES[32 : 32 + len(second)]
