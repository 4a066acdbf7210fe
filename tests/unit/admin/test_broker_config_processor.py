"""GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG over loopback against a real store.

The processor's persistence (Java's ``Configuration.persist``) and its refusals
are checked here; the mqadmin commands over real processes are in
``tests/integration/test_mqadmin_broker_config.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from aiorocketmq.broker.config import BrokerSettings
from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.broker_config import BrokerConfigProcessor
from aiorocketmq.common.properties_file import parse_properties
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable
from tests.unit.broker.broker_support import harness


async def test_update_applies_persists_and_get_shows_it(tmp_path: Path) -> None:
    conf = tmp_path / "broker.properties"
    conf.write_text("brokerName=broker-x\ntls.server.mode=enforcing\nserverWorkerThreads=8\n")

    def extra(ctx: BrokerContext, table: ProcessorTable) -> None:
        settings = BrokerSettings(ctx.config, ctx.store_config, RemotingServerConfig())
        BrokerConfigProcessor(ctx, settings, conf).register(table)

    async with harness(tmp_path, broker={"brokerName": "broker-x"}, extra=extra) as h:
        get = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, {})
        before = await h.invoke(get)
        assert before.code == ResponseCode.SUCCESS
        assert parse_properties(before.body_bytes().decode())["brokerName"] == "broker-x"
        counter = json.loads(before.ext_fields["version"])["counter"]

        update = RemotingCommand.request(
            RequestCode.UPDATE_BROKER_CONFIG, {}, b"autoCreateTopicEnable=false\n"
        )
        reply = await h.invoke(update)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        assert h.ctx.config.auto_create_topic_enable is False  # live for processors
        persisted = parse_properties(conf.read_text())
        assert persisted["autoCreateTopicEnable"] == "false"
        # Only the updated key changes: what the view does not show stays in the file.
        assert persisted == {
            "brokerName": "broker-x", "tls.server.mode": "enforcing",
            "serverWorkerThreads": "8", "autoCreateTopicEnable": "false",
        }  # fmt: skip

        after = await h.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, {}))
        assert json.loads(after.ext_fields["version"])["counter"] == counter + 1

        refused = await h.invoke(
            RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"configBlackList=\n")
        )
        assert refused.code == ResponseCode.NO_PERMISSION
        assert "configBlackList" in (refused.remark or "")
        empty = await h.invoke(RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}))
        assert empty.code == ResponseCode.SYSTEM_ERROR
        assert parse_properties(conf.read_text()) == persisted  # refusals write nothing
