"""MessageStoreConfig: RocketMQ 4.9.8 names and defaults, normalisation, .properties input,
and the store's path layout."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from aiorocketmq.common.properties_file import parse_properties
from aiorocketmq.store.config import BrokerRole, FlushDiskType, MessageStoreConfig

# Every field of store/.../config/MessageStoreConfig.java at rocketmq-all-4.9.8.
JAVA_FIELDS = """
storePathRootDir storePathCommitLog storePathDLedgerCommitLog readOnlyCommitLogStorePaths
mappedFileSizeCommitLog mappedFileSizeConsumeQueue enableConsumeQueueExt
mappedFileSizeConsumeQueueExt bitMapLengthConsumeQueueExt flushIntervalCommitLog
commitIntervalCommitLog useReentrantLockWhenPutMessage flushCommitLogTimed
flushIntervalConsumeQueue cleanResourceInterval deleteCommitLogFilesInterval
deleteConsumeQueueFilesInterval destroyMapedFileIntervalForcibly redeleteHangedFileInterval
deleteWhen diskMaxUsedSpaceRatio fileReservedTime putMsgIndexHightWater maxMessageSize
checkCRCOnRecover flushCommitLogLeastPages commitCommitLogLeastPages
flushLeastPagesWhenWarmMapedFile flushConsumeQueueLeastPages flushCommitLogThoroughInterval
commitCommitLogThoroughInterval flushConsumeQueueThoroughInterval
maxTransferBytesOnMessageInMemory maxTransferCountOnMessageInMemory
maxTransferBytesOnMessageInDisk maxTransferCountOnMessageInDisk accessMessageInMemoryMaxRatio
messageIndexEnable maxHashSlotNum maxIndexNum maxMsgsNumBatch messageIndexSafe haListenPort
haSendHeartbeatInterval haHousekeepingInterval haTransferBatchSize haMasterAddress
haSlaveFallbehindMax brokerRole flushDiskType syncFlushTimeout slaveTimeout messageDelayLevel
flushDelayOffsetInterval cleanFileForciblyEnable warmMapedFileEnable offsetCheckInSlave
debugLockEnable duplicationEnable diskFallRecorded osPageCacheBusyTimeOutMills
defaultQueryMaxNum transientStorePoolEnable transientStorePoolSize
fastFailIfNoBufferInStorePool enableDLegerCommitLog dLegerGroup dLegerPeers dLegerSelfId
preferredLeaderId isEnableBatchPush enableScheduleMessageStats enableLmq enableMultiDispatch
maxLmqConsumeQueueNum enableScheduleAsyncDeliver scheduleAsyncDeliverMaxPendingLimit
scheduleAsyncDeliverMaxResendNum2Blocked
""".split()  # noqa: SIM905 (pasted from the Java source as words)

# specs/store.md §14 (the store's rows), by Java name.
SPEC_DEFAULTS = {
    "mappedFileSizeCommitLog": 1_073_741_824,
    "mappedFileSizeConsumeQueue": 6_000_000,
    "enableConsumeQueueExt": False,
    "maxHashSlotNum": 5_000_000,
    "maxIndexNum": 20_000_000,
    "messageIndexEnable": True,
    "messageIndexSafe": False,
    "maxMsgsNumBatch": 64,
    "defaultQueryMaxNum": 32,
    "brokerRole": BrokerRole.ASYNC_MASTER,
    "flushDiskType": FlushDiskType.ASYNC_FLUSH,
    "flushIntervalCommitLog": 500,
    "flushCommitLogTimed": True,
    "flushCommitLogLeastPages": 4,
    "flushCommitLogThoroughInterval": 10_000,
    "commitIntervalCommitLog": 200,
    "commitCommitLogLeastPages": 4,
    "commitCommitLogThoroughInterval": 200,
    "transientStorePoolEnable": False,
    "transientStorePoolSize": 5,
    "fastFailIfNoBufferInStorePool": False,
    "flushIntervalConsumeQueue": 1000,
    "flushConsumeQueueLeastPages": 2,
    "flushConsumeQueueThoroughInterval": 60_000,
    "syncFlushTimeout": 5000,
    "slaveTimeout": 3000,
    "useReentrantLockWhenPutMessage": True,
    "osPageCacheBusyTimeOutMills": 1000,
    "maxMessageSize": 4_194_304,
    "checkCRCOnRecover": True,
    "warmMapedFileEnable": False,
    "flushLeastPagesWhenWarmMapedFile": 4096,
    "cleanResourceInterval": 10_000,
    "deleteWhen": "04",
    "fileReservedTime": 72,
    "diskMaxUsedSpaceRatio": 75,
    "cleanFileForciblyEnable": True,
    "deleteCommitLogFilesInterval": 100,
    "deleteConsumeQueueFilesInterval": 100,
    "destroyMapedFileIntervalForcibly": 120_000,
    "redeleteHangedFileInterval": 120_000,
    "maxTransferBytesOnMessageInMemory": 262_144,
    "maxTransferCountOnMessageInMemory": 32,
    "maxTransferBytesOnMessageInDisk": 65_536,
    "maxTransferCountOnMessageInDisk": 8,
    "accessMessageInMemoryMaxRatio": 40,
    "haListenPort": 10912,
    "haSendHeartbeatInterval": 5000,
    "haHousekeepingInterval": 20_000,
    "haTransferBatchSize": 32_768,
    "haSlaveFallbehindMax": 268_435_456,
    "haMasterAddress": None,
    "messageDelayLevel": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
    "flushDelayOffsetInterval": 10_000,
    "offsetCheckInSlave": False,
    "duplicationEnable": False,
    "diskFallRecorded": True,
    "enableLmq": False,
    "enableMultiDispatch": False,
    "maxLmqConsumeQueueNum": 20_000,
}


def test_every_java_field_is_an_alias() -> None:
    aliases = {f.alias for f in MessageStoreConfig.model_fields.values()}
    assert set(JAVA_FIELDS) <= aliases
    ours = aliases - set(JAVA_FIELDS)
    assert ours == {
        "warmCommitLogFiles",
        "warmCommitLogAheadBytes",
        "preallocateCommitLogBlocks",
        "verifyWrites",
        "diskSpaceWarningLevelRatio",
        "diskSpaceCleanForciblyRatio",
        "checkpointFlushInterval",
        "timerWheelEnable",  # RocketMQ 5's timer keys (broker.timer)
        "timerMaxDelaySec",
    }
    for name, field in MessageStoreConfig.model_fields.items():
        if field.alias not in JAVA_FIELDS:
            assert (field.description or "").startswith("aiorocketmq"), name


def test_defaults_are_rocketmq_4_9_8() -> None:
    dumped = MessageStoreConfig().model_dump(by_alias=True)
    for key, value in SPEC_DEFAULTS.items():
        assert dumped[key] == value, key
    config = MessageStoreConfig()
    assert config.store_path_root_dir == "~/store" and config.store_path_commit_log is None
    assert config.disk_space_warning_level_ratio == 0.90
    assert config.disk_space_clean_forcibly_ratio == 0.85


def test_every_field_is_described_and_important_ones_marked() -> None:
    important = set()
    for name, field in MessageStoreConfig.model_fields.items():
        assert field.description, name
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("important"):
            important.add(field.alias)
    assert {"storePathRootDir", "brokerRole", "flushDiskType", "fileReservedTime"} <= important


@pytest.mark.parametrize(
    ("configured", "used"), [(6_000_000, 6_000_000), (1, 20), (101, 120), (119, 120)]
)
def test_consume_queue_size_rounds_up_to_units(configured: int, used: int) -> None:
    assert (
        MessageStoreConfig(mapped_file_size_consume_queue=configured).mapped_file_size_consume_queue
        == used
    )


@pytest.mark.parametrize(("configured", "used"), [(5, 10), (75, 75), (99, 95)])
def test_disk_ratio_is_clamped(configured: int, used: int) -> None:
    assert (
        MessageStoreConfig(disk_max_used_space_ratio=configured).disk_max_used_space_ratio == used
    )


def test_properties_file_loads_with_java_names() -> None:
    text = """
    # broker.conf
    brokerClusterName = DefaultCluster
    storePathRootDir=/data/rocketmq/store
    mappedFileSizeCommitLog=65536
    flushDiskType=SYNC_FLUSH
    brokerRole : SLAVE
    checkCRCOnRecover=false
    fileReservedTime=48
    """
    config = MessageStoreConfig.from_properties(parse_properties(text))
    assert config.mapped_file_size_commit_log == 65536
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.broker_role is BrokerRole.SLAVE
    assert config.check_crc_on_recover is False and config.file_reserved_time == 48
    assert "brokerClusterName" not in MessageStoreConfig.known_keys(), "a BrokerConfig key"
    assert {"fileReservedTime", "file_reserved_time"} <= MessageStoreConfig.known_keys()


def test_bad_values_name_the_key() -> None:
    with pytest.raises(ValidationError, match="mappedFileSizeCommitLog"):
        MessageStoreConfig.from_properties({"mappedFileSizeCommitLog": "big"})
    with pytest.raises(ValidationError, match="flushDiskType"):
        MessageStoreConfig.from_properties({"flushDiskType": "SOMETIMES"})
    with pytest.raises(ValidationError, match="multi-path"):
        MessageStoreConfig(store_path_commit_log="/a,/b")


def test_frozen_and_small_sizes_allowed(tmp_path: Path) -> None:
    config = MessageStoreConfig(
        store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=64 * 1024
    )
    with pytest.raises(ValidationError):
        config.mapped_file_size_commit_log = 1  # type: ignore[misc]
    smaller = config.model_copy(update={"mapped_file_size_consume_queue": 100})
    assert smaller.mapped_file_size_consume_queue == 100


def test_path_layout(tmp_path: Path) -> None:
    config = MessageStoreConfig(store_path_root_dir=str(tmp_path))
    assert config.root_dir == tmp_path
    assert config.commit_log_dir == tmp_path / "commitlog"
    assert config.consume_queue_dir == tmp_path / "consumequeue"
    assert config.consume_queue_ext_dir == tmp_path / "consumequeue_ext"
    assert config.index_dir == tmp_path / "index"
    assert config.checkpoint_path == tmp_path / "checkpoint"
    assert config.abort_path == tmp_path / "abort"
    assert config.lock_path == tmp_path / "lock"
    assert config.config_dir == tmp_path / "config"
    assert config.delay_offset_path == tmp_path / "config" / "delayOffset.json"
    moved = MessageStoreConfig(store_path_root_dir=str(tmp_path), store_path_commit_log="/cl")
    assert moved.commit_log_dir == Path("/cl")
    assert MessageStoreConfig().root_dir == Path("~/store").expanduser()
