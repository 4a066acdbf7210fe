"""KVConfigManager: the table, the Java file format, atomic writes with a .bak, fallback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.route import KVTable
from aiorocketmq.namesrv.kv_config import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    KVConfigManager,
    load_table_blocking,
)
from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.runtime.files import write_file_atomic_blocking

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    ex = BlockingExecutor("test-kv")
    yield ex
    await ex.shutdown()


async def test_put_persist_and_load_again(tmp_path: Path, executor: BlockingExecutor) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigManager(path, executor)
    await kv.load()
    assert kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, "T") is None
    kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "T", "broker-a:4")
    kv.put("ns", "k", "v1")
    kv.put("ns", "k", "v2")
    await kv.persist()
    # Java's KVConfigSerializeWrapper shape, readable by a Java name server.
    assert json.loads(path.read_text()) == {
        "configTable": {NAMESPACE_ORDER_TOPIC_CONFIG: {"T": "broker-a:4"}, "ns": {"k": "v2"}}
    }
    again = KVConfigManager(path, executor)
    await again.load()
    assert again.get("ns", "k") == "v2"
    assert again.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG) == KVTable(
        {"T": "broker-a:4"}
    )


async def test_delete_keeps_an_empty_namespace(tmp_path: Path, executor: BlockingExecutor) -> None:
    kv = KVConfigManager(tmp_path / "kv.json", executor)
    await kv.load()
    kv.put("ns", "k", "v")
    g = kv.generation
    kv.delete("ns", "k")
    kv.delete("ns", "absent")
    kv.delete("absent-ns", "k")
    assert kv.generation == g + 1
    assert kv.get("ns", "k") is None
    assert kv.get_kv_list_by_namespace("ns") == KVTable({})
    assert kv.get_kv_list_by_namespace("absent-ns") is None


def test_atomic_write_keeps_the_previous_file_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    write_file_atomic_blocking(path, "first")
    assert not path.with_name("kvConfig.json.bak").exists()
    write_file_atomic_blocking(path, "second")
    assert path.read_text() == "second"
    assert path.with_name("kvConfig.json.bak").read_text() == "first"
    assert not list(tmp_path.glob("*.tmp"))


def test_load_falls_back_to_the_bak_when_the_main_file_is_torn(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.with_name("kvConfig.json.bak").write_text('{"configTable":{"ns":{"k":"old"}}}')
    path.write_text('{"configTable":{"ns":{"k":"ne')  # a torn write
    assert load_table_blocking(path) == {"ns": {"k": "old"}}
    path.unlink()
    assert load_table_blocking(path) == {"ns": {"k": "old"}}


def test_load_accepts_java_written_text_and_refuses_garbage(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    assert load_table_blocking(path) == {}
    path.write_text('{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"b:4"}}}\n')
    assert load_table_blocking(path) == {"ORDER_TOPIC_CONFIG": {"T": "b:4"}}
    path.write_text('{"configTable":{"ns":{"k":1}}}')
    with pytest.raises(RemoteProtocolError, match="non-string"):
        load_table_blocking(path)
    path.write_text("not json")
    with pytest.raises(RemoteProtocolError):
        load_table_blocking(path)


async def test_persists_land_in_call_order(tmp_path: Path, executor: BlockingExecutor) -> None:
    """Snapshots are taken on the loop and written FIFO by one thread: last one wins."""
    path = tmp_path / "kv.json"
    kv = KVConfigManager(path, executor)
    await kv.load()
    writes = []
    for i in range(20):
        kv.put("ns", "k", str(i))
        writes.append(kv.persist())
    for write in writes:
        await write
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"k": "19"}}}
