"""TopicConfigManager: the broker's topic table, its version and ``topics.json``.

Owns: the table topic -> ``TopicConfig`` and its ``DataVersion`` (bumped on
every change; listeners hear of it so registration with name servers can run at
once), the system topics RocketMQ 4.9.8's ``TopicConfigManager`` constructor
creates, auto-creation on send (from ``TBW102`` or the client's default topic)
and on send-back (retry / DLQ topics), admin update/delete, order-topic flags
from the name server's ORDER_TOPIC_CONFIG, and the wrapper sent to name servers.

Must not: do file I/O on the loop (``request_persist`` writes in the executor),
or call name servers itself (the controller listens to changes).

System topics at start (Java order; queues, perm):

=========================== ========== ===========================================
topic                        queues     perm
=========================== ========== ===========================================
SELF_TEST_TOPIC              1          6
TBW102 (autoCreateTopicEnable) defaultTopicQueueNums 7 (inherit, read, write)
BenchmarkTest                1024       6
<brokerClusterName>          16         1, +6 if clusterTopicEnable
<brokerName>                 1          1, +6 if brokerTopicEnable
OFFSET_MOVED_EVENT           1          6
SCHEDULE_TOPIC_XXXX          18         6
<msgTraceTopicName> (traceTopicEnable) 1  6
<brokerClusterName>_REPLY_TOPIC 1       6
=========================== ========== ===========================================

Topics from ``topics.json`` replace these (Java ``putAll``s the file over them).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.config_manager import ConfigManager
from aiorocketmq.common import fastjson
from aiorocketmq.common.clock import Clock
from aiorocketmq.common.constants import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
)
from aiorocketmq.common.topic_config import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from aiorocketmq.runtime import BlockingExecutor

__all__ = ["REPLY_TOPIC_POSTFIX", "SCHEDULE_TOPIC_QUEUE_NUM", "TopicConfigManager"]

log = logging.getLogger(__name__)

SCHEDULE_TOPIC_QUEUE_NUM: Final = 18
"""One queue per delay level."""
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
BENCHMARK_QUEUE_NUMS: Final = 1024
_RW: Final = PERM_READ | PERM_WRITE

ChangeListener = Callable[[DataVersion], None]


def system_topic_configs(cfg: BrokerConfig) -> list[TopicConfig]:
    """The topics the 4.9.8 constructor puts in the table (see the module table)."""
    topics = [TopicConfig(RMQ_SYS_SELF_TEST_TOPIC, 1, 1)]
    if cfg.auto_create_topic_enable:
        nums = cfg.default_topic_queue_nums
        topics.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, nums, nums, PERM_INHERIT | _RW))
    topics.append(TopicConfig(RMQ_SYS_BENCHMARK_TOPIC, BENCHMARK_QUEUE_NUMS, BENCHMARK_QUEUE_NUMS))
    cluster_perm = PERM_INHERIT | (_RW if cfg.cluster_topic_enable else 0)
    topics.append(TopicConfig(cfg.broker_cluster_name, perm=cluster_perm))
    broker_perm = PERM_INHERIT | (_RW if cfg.broker_topic_enable else 0)
    topics.append(TopicConfig(cfg.broker_name, 1, 1, broker_perm))
    topics.append(TopicConfig(RMQ_SYS_OFFSET_MOVED_EVENT, 1, 1))
    topics.append(
        TopicConfig(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM, SCHEDULE_TOPIC_QUEUE_NUM)
    )
    if cfg.trace_topic_enable:
        topics.append(TopicConfig(cfg.msg_trace_topic_name, 1, 1))
    topics.append(TopicConfig(f"{cfg.broker_cluster_name}_{REPLY_TOPIC_POSTFIX}", 1, 1))
    return topics


class TopicConfigManager(ConfigManager[TopicConfigSerializeWrapper]):
    """The topic table (``TopicConfigManager``).

    Mutations are plain ``def`` methods on the loop; each change bumps the data
    version, requests a persist and calls the change listeners with the new
    version.

    Args:
        path: ``<storePathRootDir>/config/topics.json``.
        executor: Where file work runs; not owned.
        broker_config: The broker's settings (system topics, auto-create).
        clock: Wall clock of the data version.
    """

    def __init__(
        self, path: Path, executor: BlockingExecutor, broker_config: BrokerConfig, clock: Clock
    ) -> None:
        super().__init__(path, executor)
        self._cfg = broker_config
        self._clock = clock
        self._table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(clock.now_ms(), 0)
        self._listeners: list[ChangeListener] = []
        self._system_topics: set[str] = set()
        for tc in system_topic_configs(broker_config):
            self._table[tc.topic_name] = tc
            self._system_topics.add(tc.topic_name)

    # -- file form -------------------------------------------------------------------

    def encode(self, pretty: bool = False) -> str:
        """``{"dataVersion":{...},"topicConfigTable":{...}}``."""
        doc = TopicConfigSerializeWrapper(self._table, self.data_version).to_json_dict()
        return fastjson.dumps_pretty(doc) if pretty else fastjson.dumps(doc)

    def parse(self, text: str) -> TopicConfigSerializeWrapper:
        """Read ``topics.json``. Raises ``RemoteProtocolError``."""
        return TopicConfigSerializeWrapper.decode(text)

    def apply(self, table: TopicConfigSerializeWrapper) -> None:
        """Put the file's topics over the system ones; take its data version."""
        self._table.update(table.topic_config_table)
        self.data_version = table.data_version

    # -- reads -----------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        """The topic's config, or None."""
        return self._table.get(topic)

    def topic_config_table(self) -> dict[str, TopicConfig]:
        """A copy of the table."""
        return dict(self._table)

    def is_system_topic(self, topic: str) -> bool:
        """RocketMQ's system topics plus those this broker added at start."""
        return (
            topic in SYSTEM_TOPICS
            or topic in self._system_topics
            or topic.startswith(SYSTEM_TOPIC_PREFIX)
        )

    def is_order_topic(self, topic: str) -> bool:
        """Whether the name server lists ``topic`` as ordered."""
        tc = self._table.get(topic)
        return tc is not None and tc.order

    def build_serialize_wrapper(self) -> TopicConfigSerializeWrapper:
        """The table and version to register with name servers (a copy)."""
        return TopicConfigSerializeWrapper(dict(self._table), self.data_version)

    # -- changes ---------------------------------------------------------------------

    def add_change_listener(self, listener: ChangeListener) -> None:
        """Call ``listener(new_version)`` after every change (on the loop)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version(self._clock.now_ms())
        self.request_persist()
        for listener in self._listeners:
            listener(self.data_version)

    def create_topic_in_send_message_method(
        self,
        topic: str,
        default_topic: str,
        remote_address: str,
        client_default_topic_queue_nums: int,
        topic_sys_flag: int,
    ) -> TopicConfig | None:
        """Auto-create ``topic`` on send from ``default_topic`` (normally TBW102).

        RocketMQ's rules: the default topic must exist and carry the inherit
        perm; when it is TBW102 and autoCreateTopicEnable is off, TBW102's perm
        is set to read|write first (so it never inherits). The new topic takes
        ``min(client_default_topic_queue_nums, default.writeQueueNums)`` queues
        (at least 0), the default's perm without inherit, and its filter type.

        Returns:
            The existing or new config, or None when nothing may be created.
        """
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        default = self._table.get(default_topic)
        if default is None:
            log.warning("auto-create: no default topic %s client=%s", default_topic, remote_address)
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self._cfg.auto_create_topic_enable:
            # Java mutates TBW102 in place, without a version bump.
            default = dataclasses.replace(default, perm=_RW)
            self._table[default_topic] = default
        if not default.perm & PERM_INHERIT:
            log.warning(
                "auto-create: default topic %s perm=%d cannot inherit client=%s",
                default_topic, default.perm, remote_address,
            )  # fmt: skip
            return None
        nums = max(0, min(client_default_topic_queue_nums, default.write_queue_nums))
        created = TopicConfig(
            topic,
            nums,
            nums,
            default.perm & ~PERM_INHERIT,
            default.topic_filter_type,
            topic_sys_flag,
        )
        self._table[topic] = created
        log.info("auto-created topic %s from %s client=%s", created, default_topic, remote_address)
        self._changed()
        return created

    def create_topic_in_send_message_back_method(
        self, topic: str, client_default_topic_queue_nums: int, perm: int, topic_sys_flag: int
    ) -> TopicConfig:
        """Get or create a retry / DLQ topic (no inherit rules apply)."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        nums = client_default_topic_queue_nums
        created = TopicConfig(topic, nums, nums, perm, topic_sys_flag=topic_sys_flag)
        self._table[topic] = created
        log.info("created topic %s on send-back", created)
        self._changed()
        return created

    def update_topic_config(self, topic_config: TopicConfig) -> None:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC)."""
        old = self._table.get(topic_config.topic_name)
        self._table[topic_config.topic_name] = topic_config
        log.info("topic %s old=%s new=%s", "updated" if old else "created", old, topic_config)
        self._changed()

    def update_topic_sys_flag(self, topic: str, topic_sys_flag: int) -> None:
        """Set a topic's sysFlag (the unit flags), when the topic exists."""
        tc = self._table.get(topic)
        if tc is not None and tc.topic_sys_flag != topic_sys_flag:
            self._table[topic] = dataclasses.replace(tc, topic_sys_flag=topic_sys_flag)
            self._changed()

    def delete_topic_config(self, topic: str) -> bool:
        """Remove a topic (DELETE_TOPIC_IN_BROKER); False when it did not exist."""
        old = self._table.pop(topic, None)
        if old is None:
            log.warning("delete topic: %s not found", topic)
            return False
        log.info("deleted topic %s", old)
        self._changed()
        return True

    def replace_from_master(self, wrapper: TopicConfigSerializeWrapper) -> bool:
        """A slave's sync (``syncTopicConfig``): take the master's table and data
        version when the version differs; whether anything changed. No change
        listener runs: the slave's next periodic registration carries it."""
        if wrapper.data_version == self.data_version:
            return False
        self._table = dict(wrapper.topic_config_table)
        self.data_version = wrapper.data_version
        return True

    def update_order_topic_config(self, order_topics: Iterable[str]) -> bool:
        """Mark exactly ``order_topics`` (the ORDER_TOPIC_CONFIG keys) as ordered.

        Returns:
            Whether any flag changed (then the version was bumped).
        """
        wanted = set(order_topics)
        changed = False
        for name, tc in list(self._table.items()):
            if tc.order != (name in wanted):
                self._table[name] = dataclasses.replace(tc, order=name in wanted)
                changed = True
        if changed:
            self._changed()
        return changed
