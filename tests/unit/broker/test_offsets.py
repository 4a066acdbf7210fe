"""ConsumerOffsetManager: commits, queries, admin helpers, the Java file form, flushing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.broker.offsets import ConsumerOffsetFlushService, ConsumerOffsetManager
from aiorocketmq.runtime import BlockingExecutor
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(30)

# What a RocketMQ 4.9.8 broker writes (fastjson PrettyFormat: tabs, bare queue ids).
JAVA_FILE = (
    "{\n"
    '\t"offsetTable":{\n'
    '\t\t"%RETRY%group_a@group_a":{0:0\n'
    "\t\t},\n"
    '\t\t"TopicTest@group_a":{0:250,1:251,2:252,3:253\n'
    "\t\t}\n"
    "\t}\n"
    "}"
)


def _manager(tmp_path: Path, executor: BlockingExecutor) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(tmp_path / "config" / "consumerOffset.json", executor)


async def test_reads_java_file_and_writes_it_back_byte_for_byte(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    mgr = _manager(tmp_path, executor)
    mgr.path.parent.mkdir(parents=True)
    mgr.path.write_text(JAVA_FILE)
    assert await mgr.load()
    assert mgr.query_offset("group_a", "TopicTest", 3) == 253
    assert mgr.query_offset("group_a", "%RETRY%group_a", 0) == 0
    await mgr.persist()
    assert mgr.path.read_text() == JAVA_FILE
    assert mgr.path.with_name("consumerOffset.json.bak").read_text() == JAVA_FILE


async def test_missing_file_is_empty_and_bad_file_falls_back(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    mgr = _manager(tmp_path, executor)
    assert not await mgr.load()
    assert mgr.offset_table() == {}
    mgr.commit_offset("c", "g", "T", 0, 7)
    await mgr.persist()
    mgr.commit_offset("c", "g", "T", 0, 9)
    await mgr.persist()  # .bak now holds 7
    mgr.path.write_text("{not json")
    again = _manager(tmp_path, executor)
    assert await again.load()
    assert again.query_offset("g", "T", 0) == 7


def test_commit_and_query(tmp_path: Path) -> None:
    mgr = ConsumerOffsetManager(tmp_path / "x.json", BlockingExecutor("unused"))
    assert mgr.query_offset("g", "T", 0) == -1
    assert mgr.commit_offset("127.0.0.1", "g", "T", 0, 5)
    assert not mgr.commit_offset("127.0.0.1", "g", "T", 0, -1)  # ali-ons commits -1
    assert mgr.query_offset("g", "T", 0) == 5
    assert mgr.commit_offset("127.0.0.1", "g", "T", 0, 3)  # a reset goes back, as Java
    assert mgr.query_offset("g", "T", 0) == 3
    assert mgr.query_offset("g", "T", 1) == -1
    assert mgr.query_offsets("g", "T") == {0: 3}
    assert mgr.query_offsets("g", "U") is None


def test_which_topics_and_groups_and_admin_helpers(tmp_path: Path) -> None:
    mgr = ConsumerOffsetManager(tmp_path / "x.json", BlockingExecutor("unused"))
    mgr.commit_offset("h", "g1", "T", 0, 10)
    mgr.commit_offset("h", "g1", "T", 1, 20)
    mgr.commit_offset("h", "g2", "T", 0, 4)
    mgr.commit_offset("h", "g2", "U", 0, 1)
    assert mgr.which_topic_by_consumer("g2") == {"T", "U"}
    assert mgr.which_group_by_topic("T") == {"g1", "g2"}
    assert sorted(mgr.groups_and_topics()) == [("T", "g1"), ("T", "g2"), ("U", "g2")]
    assert mgr.query_min_offset_in_all_group("T", "", lambda t, q: 0) == {0: 4, 1: 20}
    assert mgr.query_min_offset_in_all_group("T", "g2", lambda t, q: 0) == {0: 10, 1: 20}
    assert mgr.query_min_offset_in_all_group("T", "", lambda t, q: 5) == {0: 10, 1: 20}
    mgr.clone_offset("g1", "g3", "T")
    assert mgr.query_offsets("g3", "T") == {0: 10, 1: 20}
    mgr.reset_offset("g3", "T", {0: 1, 1: -1})
    assert mgr.query_offsets("g3", "T") == {0: 1, 1: 20}
    mgr.remove_offset("g2")
    assert mgr.which_group_by_topic("T") == {"g1", "g3"}
    assert mgr.which_topic_by_consumer("g2") == set()


def test_compact_encoding_is_the_rpc_body(tmp_path: Path) -> None:
    mgr = ConsumerOffsetManager(tmp_path / "x.json", BlockingExecutor("unused"))
    mgr.commit_offset("h", "g", "T", 1, 2)
    assert mgr.encode() == '{"offsetTable":{"T@g":{1:2}}}'


async def test_flush_service_persists_periodically_and_at_shutdown(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    mgr = _manager(tmp_path, executor)
    service = ConsumerOffsetFlushService(mgr, interval_ms=5, initial_delay_ms=0)
    mgr.commit_offset("h", "g", "T", 0, 1)
    await service.start()
    await wait_until(lambda: service.flushes >= 2, what="two periodic flushes")
    mgr.commit_offset("h", "g", "T", 0, 2)
    await service.shutdown()
    reread = _manager(tmp_path, executor)
    await reread.load()
    assert reread.query_offset("g", "T", 0) == 2


@given(
    st.dictionaries(
        st.tuples(st.text("abc%_-", min_size=1), st.text("xyz", min_size=1)).map("@".join),
        st.dictionaries(st.integers(0, 1023), st.integers(0, 2**62), max_size=5),
        max_size=5,
    )
)
def test_file_form_round_trips(table: dict[str, dict[int, int]]) -> None:
    mgr = ConsumerOffsetManager(Path("unused.json"), BlockingExecutor("unused"))
    mgr.apply(table)
    for pretty in (True, False):
        assert mgr.parse(mgr.encode(pretty=pretty)) == table
