"""SlaveSynchronize: a slave copies its master's metadata every 10 s.

Owns: GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG to the master (learned from the name server's
registration reply), and installing what comes back:

* topics and subscription groups are replaced by the master's when its data
  version differs (``syncTopicConfig``/``syncSubscriptionGroupConfig``);
* consumer offsets are merged taking the larger offset per queue. Java replaces
  them (``putAll``), which rolls back offsets consumers committed to the slave
  while the master was down; taking the maximum keeps that progress;
* delay offsets are installed as the master sends them.

Each table is persisted after it changed. A failed sync is logged and retried at
the next tick; the first sync runs as soon as the master is known.

Must not: run on a master, or import ``aiorocketmq.client`` (brokers keep their own
small outer API).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from aiorocketmq.broker.offsets import ConsumerOffsetManager
from aiorocketmq.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.common.admin_bodies import ConsumerOffsetSerializeWrapper, SubscriptionGroupWrapper
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.topic_config import TopicConfigSerializeWrapper
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.errors import RemotingError
from aiorocketmq.runtime.lifecycle import Periodic, Service

__all__ = ["SLAVE_SYNC_INTERVAL_MS", "SlaveSynchronize"]

log = logging.getLogger(__name__)

#: BrokerController: syncAll every 10 s on a slave.
SLAVE_SYNC_INTERVAL_MS: Final = 10_000
REQUEST_TIMEOUT_MS: Final = 3_000

#: Installs the master's delayOffset.json text (the schedule service's).
DelayOffsetSink = Callable[[str], None]


class SlaveSynchronize(Service):
    """Periodic metadata copy from the master.

    Args:
        topics, groups, offsets: the slave's managers to update.
        delay_offsets: installs the master's delay offsets (None: skipped).
        interval_ms: the period (10 s).
        client_config: the broker's remoting client settings (useTLS...).
    """

    def __init__(
        self,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        delay_offsets: DelayOffsetSink | None = None,
        *,
        interval_ms: int = SLAVE_SYNC_INTERVAL_MS,
        client_config: RemotingClientConfig | None = None,
    ) -> None:
        super().__init__("SlaveSynchronize")
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._delay_offsets = delay_offsets
        self._interval_s = interval_ms / 1000
        # The broker's NettyClientConfig: TLS to the master when useTLS is on.
        self._client = RemotingClient(client_config)
        self._job: Periodic | None = None
        self.master_addr: str | None = None
        self.syncs = 0

    def update_master_address(self, addr: str | None) -> None:
        """The master's address changed (registration reply): sync at once."""
        if addr == self.master_addr:
            return
        self.master_addr = addr
        if self._job is not None and addr:
            self._job.wakeup()

    async def on_start(self) -> None:
        """Sync every interval (at once if the master is already known)."""
        self._job = self.periodic(
            self._interval_s,
            self.sync_all,
            name="slave-sync",
            initial_delay_s=0 if self.master_addr else self._interval_s,
        )

    async def on_shutdown(self) -> None:
        """Close the connection to the master."""
        await self._client.close()

    async def sync_all(self) -> bool:
        """One round; True when every table was fetched from the master."""
        master = self.master_addr
        if not master:
            return False
        try:
            await self._sync_topics(master)
            await self._sync_offsets(master)
            await self._sync_delay_offsets(master)
            await self._sync_groups(master)
        except (RemotingError, OSError, RemoteProtocolError, _RefusedError) as exc:
            log.warning("slave sync from master %s failed: %s", master, exc)
            return False
        self.syncs += 1
        return True

    async def _fetch(self, master: str, code: int) -> bytes:
        reply = await self._client.invoke(master, RemotingCommand.request(code), REQUEST_TIMEOUT_MS)
        if reply.code != ResponseCode.SUCCESS:
            raise _RefusedError(f"request {code}: code={reply.code} remark={reply.remark}")
        return bytes(reply.body)

    async def _sync_topics(self, master: str) -> None:
        body = await self._fetch(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = TopicConfigSerializeWrapper.decode(body)
        if self._topics.replace_from_master(wrapper):
            await self._topics.persist()

    async def _sync_groups(self, master: str) -> None:
        body = await self._fetch(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        wrapper = SubscriptionGroupWrapper.decode(body)
        if self._groups.replace_from_master(wrapper.subscription_group_table, wrapper.data_version):
            await self._groups.persist()

    async def _sync_offsets(self, master: str) -> None:
        body = await self._fetch(master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        table = ConsumerOffsetSerializeWrapper.decode(body).offset_table
        if self._offsets.merge_from_master(table):
            await self._offsets.persist()

    async def _sync_delay_offsets(self, master: str) -> None:
        if self._delay_offsets is None:
            return
        body = await self._fetch(master, RequestCode.GET_ALL_DELAY_OFFSET)
        self._delay_offsets(body.decode("utf-8", "replace"))


class _RefusedError(Exception):
    """The master answered with an error code."""
