"""IndexService: which keys are indexed, rotation when a file fills (keys of one message
may span two files), queries across files, expiry and loading after a crash."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common import tag_hash
from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.dispatch_request import DispatchRequest
from aiorocketmq.store.errors import StoreLoadError
from aiorocketmq.store.index_file import IndexFile
from aiorocketmq.store.index_service import IndexService, gather_keys, index_keys
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip, use_index_kernel
from tests.support.wait import wait_until
from tests.unit.store.helpers import make_record, small_config

T0 = 1_700_000_000_000


@pytest.fixture(autouse=True, params=IMPLEMENTATIONS)
def _index_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here writes keys with the C kernel and without it."""
    use_index_kernel(request.param, monkeypatch)


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-index", 2)
    yield pool
    await pool.shutdown()


def request(
    offset: int, keys: str | None = None, uniq: str | None = None, sys_flag: int = 0, ts: int = T0
) -> DispatchRequest:
    return DispatchRequest(
        topic="TopicTest",
        queue_id=0,
        commit_log_offset=offset,
        msg_size=100,
        tags_code=0,
        store_timestamp=ts,
        consume_queue_offset=0,
        keys=keys,
        uniq_key=uniq,
        sys_flag=sys_flag,
    )


async def build(service: IndexService, req: DispatchRequest) -> None:
    """As the dispatcher does: on False, await a new file and call again."""
    while not service.build_index(req):
        await service.create_file()


def test_keys_uniq_first_then_each_word() -> None:
    req = request(0, keys=" a  b c ", uniq="U1")
    assert index_keys(req) == ["TopicTest#U1", "TopicTest#a", "TopicTest#b", "TopicTest#c"]
    assert index_keys(request(0)) == []


def test_dispatch_request_from_a_record() -> None:
    from aiorocketmq.common.message_codec import decode_record

    record = make_record(properties="KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC\x02TAGS\x01t")
    view = decode_record(record)
    req = DispatchRequest.from_record(view, tags_code=42)
    assert (req.keys, req.uniq_key, req.tags_code, req.msg_size) == (
        "k1 k2",
        "ABC",
        42,
        len(record),
    )
    assert req.builds_consume_queue
    assert not request(0, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE).builds_consume_queue


async def test_build_and_query(tmp_path: Path, executor: BlockingExecutor) -> None:
    service = IndexService(small_config(tmp_path), executor, clock=ManualClock(T0))
    assert service.build_index(request(0)) is True, "no keys: nothing to do, no file needed"
    assert service.build_index(request(0, keys="k")) is False, "no file yet"
    await build(service, request(100, keys="k1 k2", uniq="U1", ts=T0 + 1000))
    await build(service, request(200, keys="k1", ts=T0 + 2000))
    rollback = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    await build(service, request(300, keys="k1", sys_flag=rollback, ts=T0 + 3000))
    prepared = MessageSysFlag.TRANSACTION_PREPARED_TYPE
    await build(service, request(400, keys="k1", sys_flag=prepared, ts=T0 + 4000))
    everything = (0, T0 + 10_000)
    found = service.query_offset("TopicTest", "k1", 10, *everything)
    assert found.phy_offsets == [400, 200, 100], "newest first; the rollback is not indexed"
    assert found.index_last_update_phyoffset == 400
    assert found.index_last_update_timestamp == T0 + 4000
    assert service.query_offset("TopicTest", "U1", 10, *everything).phy_offsets == [100]
    assert service.query_offset("Other", "k1", 10, *everything).phy_offsets == []
    assert service.query_offset("TopicTest", "k1", 10, T0 + 1500, T0 + 2500).phy_offsets == [200]
    # Redispatch of an older message is skipped.
    assert service.build_index(request(200, keys="k9")) is True
    assert service.query_offset("TopicTest", "k9", 10, *everything).phy_offsets == []
    await service.shutdown()
    service.close()


async def test_rotation_carries_on_mid_message(tmp_path: Path, executor: BlockingExecutor) -> None:
    full_files: list[IndexFile] = []
    clock = ManualClock(T0)
    service = IndexService(
        small_config(tmp_path), executor, clock=clock, on_file_full=full_files.append
    )
    await service.create_file()
    for n in range(7):  # 7 of the 39 items of a 40-item file
        await build(service, request(n * 100, keys=" ".join(f"m{n}k{j}" for j in range(5))))
        clock.advance(1000)
    files = service.files
    assert len(files) == 1 and files[0].index_count == 36
    await build(service, request(700, keys="a b c d e f", ts=T0 + 7000))
    files = service.files
    assert len(files) == 2 and files[0].is_write_full
    assert files[1].index_count == 3, "4 of 6 keys went to the first file, 2 to the new one"
    assert files[1].file_name > files[0].file_name
    assert (files[1].begin_phy_offset, files[1].end_phy_offset) == (700, 700)
    for key in "abcdef":
        assert service.query_offset("TopicTest", key, 5, 0, 2**62).phy_offsets == [700]
    await wait_until(lambda: full_files == [files[0]], what="on_file_full after the flush")
    await service.shutdown()
    service.close()


async def test_names_stay_ordered_within_one_millisecond(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    service = IndexService(small_config(tmp_path, max_index_num=2), executor, clock=ManualClock(T0))
    names = []
    for n in range(3):
        await build(service, request(n * 10, keys="k"))
        names.append(service.files[-1].file_name)
    assert names == sorted(names) and len(set(names)) == 3
    assert int(names[2]) - int(names[0]) == 2
    await service.shutdown()
    service.close()


async def test_max_num_is_capped(tmp_path: Path, executor: BlockingExecutor) -> None:
    config = small_config(tmp_path, max_msgs_num_batch=3, max_index_num=100)
    service = IndexService(config, executor, clock=ManualClock(T0))
    for n in range(6):
        await build(service, request(n * 10, keys="same"))
    assert service.query_offset("TopicTest", "same", 64, 0, 2**62).phy_offsets == [50, 40, 30]
    await service.shutdown()
    service.close()


async def test_expiry_never_takes_the_last_file(tmp_path: Path, executor: BlockingExecutor) -> None:
    service = IndexService(small_config(tmp_path, max_index_num=3), executor, clock=ManualClock(T0))
    for n in range(6):  # two items per file: three files, end offsets 10, 30, 50
        await build(service, request(n * 10, keys="k"))
    assert [f.end_phy_offset for f in service.files] == [10, 30, 50]
    assert await service.delete_expired(31) == 2
    assert [f.end_phy_offset for f in service.files] == [50]
    assert await service.delete_expired(10**9) == 0
    assert len(list((tmp_path / "index").iterdir())) == 1
    await service.shutdown()
    service.close()


async def test_load_after_a_crash_drops_unsafe_files(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    config = small_config(tmp_path, max_index_num=3)
    writer = IndexService(config, executor, clock=ManualClock(T0))
    for n in range(5):
        await build(writer, request(n * 10, keys="k", ts=T0 + n * 1000))
    # A full file's header and slots reach its file before the next one exists (not
    # left to its flush task, which a shutdown may cancel).
    assert [f.is_shadowed for f in writer.files] == [False, False, True]
    await writer.shutdown()
    writer.close()
    ends = [f.end_timestamp for f in writer.files]
    assert ends == [T0 + 1000, T0 + 3000, T0 + 4000]
    (tmp_path / "index" / "README").write_text("not an index file")
    clean = IndexService(config, executor)
    assert clean.load_blocking(last_exit_ok=True, index_msg_timestamp=0) == []
    assert len(clean.files) == 3
    clean.close()
    crashed = IndexService(config, executor)
    deleted = crashed.load_blocking(last_exit_ok=False, index_msg_timestamp=T0 + 3000)
    assert [p.name for p in deleted] == [writer.files[2].file_name]
    assert [f.end_timestamp for f in crashed.files] == ends[:2]
    crashed.close()
    # A file the checkpoint covers in part is kept (RocketMQ deletes it, and with it every
    # key the replay does not reach again); only the one that began after it goes.
    ahead = IndexService(config, executor)
    assert ahead.load_blocking(last_exit_ok=False, index_msg_timestamp=T0 + 2500) == []
    assert [f.end_timestamp for f in ahead.files] == ends[:2]
    ahead.close()


async def test_flush_current_and_drop_beyond(tmp_path: Path, executor: BlockingExecutor) -> None:
    """flush_current reports the time its msync covered; after recovery cut a torn
    tail, files indexing messages past the new end go."""
    config = small_config(tmp_path, max_index_num=3)
    service = IndexService(config, executor, clock=ManualClock(T0))
    assert await service.flush_current() == 0, "no file yet"
    for n in range(4):
        await build(service, request(n * 10, keys="k", ts=T0 + n * 1000))
    assert await service.flush_current() == T0 + 3000
    assert service.drop_beyond_blocking(31) == []
    first, second = service.files
    assert [p.name for p in service.drop_beyond_blocking(30)] == [second.file_name]
    assert service.files == [first] and not second.mapped.path.exists()
    await service.shutdown()
    service.close()


async def test_disabled_index_builds_nothing(tmp_path: Path, executor: BlockingExecutor) -> None:
    service = IndexService(small_config(tmp_path, message_index_enable=False), executor)
    assert service.build_index(request(0, keys="k")) is True and service.files == []


async def test_failed_load_leaves_nothing_mapped(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    config = small_config(tmp_path)
    writer = IndexService(config, executor, clock=ManualClock(T0))
    await build(writer, request(0, keys="k"))
    await writer.shutdown()
    writer.close()
    (tmp_path / "index" / "99990101000000000").write_bytes(b"short")
    reader = IndexService(config, executor)
    with pytest.raises(StoreLoadError, match="bytes"):
        reader.load_blocking(last_exit_ok=True, index_msg_timestamp=0)
    assert reader.files == []


async def test_a_message_with_more_keys_than_a_file_spans_three(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    """Resumed twice: each file takes the keys the one before it left."""
    service = IndexService(small_config(tmp_path), executor, clock=ManualClock(T0))
    await service.create_file()
    keys = [f"w{j}" for j in range(90)]  # a 40-item file holds 39 keys
    await build(service, request(100, keys=" ".join(keys)))
    assert [f.index_count - 1 for f in service.files] == [39, 39, 12]
    for key in keys:
        assert service.query_offset("TopicTest", key, 5, 0, 2**62).phy_offsets == [100], key
    await service.shutdown()
    service.close()


async def test_batches_write_the_same_files_as_one_message_at_a_time(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    """The dispatcher's batch path across rotations, rollbacks and no-key
    messages: every file byte for byte what ``build_index`` one by one writes."""
    rollback = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    requests = [
        request(
            n * 100,
            keys=" ".join(f"k{n % 7}-{j}" for j in range(n % 4)) or None,
            uniq=None if n % 5 == 0 else f"U{n:04X}",
            sys_flag=rollback if n % 11 == 3 else 0,
            ts=T0 + n * 700,
        )
        for n in range(60)
    ]
    services = []
    for name in ("one", "batch"):
        config = small_config(tmp_path / name)
        services.append(IndexService(config, executor, clock=ManualClock(T0)))
    one, batch = services
    for req in requests:
        await build(one, req)
    position, sizes = 0, itertools.cycle((1, 9, 4, 17))  # uneven batches, as chunks end
    while position < len(requests):
        chunk = requests[position : position + next(sizes)]
        done = batch.build_indexes(chunk)
        position += done
        if done < len(chunk):
            await batch.create_file()  # then the stuck message again, from its next key
    assert [f.mapped.path.name for f in batch.files] == [f.mapped.path.name for f in one.files]
    assert len(one.files) > 3
    for service in services:  # the writable file's header and slots reach the file
        await service.shutdown()
    for mine, theirs in zip(batch.files, one.files, strict=True):
        assert bytes(mine.mapped.buffer) == bytes(theirs.mapped.buffer)
    for service in services:
        service.close()


_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=6)
"""Any code points: non-BMP ones hash as two UTF-16 units, lone surrogates as one."""


def _keyed(topic: str, uniq: str | None, keys: str | None, flag: int, ts: int) -> DispatchRequest:
    req = request(0, keys=keys, uniq=uniq, sys_flag=flag, ts=ts)
    req.topic = topic
    return req


_REQUESTS = st.lists(
    st.builds(
        _keyed,
        st.sampled_from(["TopicTest", "t\U0001f600", "\ud800x"]),
        st.none() | _TEXT,
        st.none() | st.lists(_TEXT | st.just(""), max_size=4).map(" ".join),
        st.sampled_from([0, 4, 8, 12, 13]),
        st.integers(0, 2**41),
    ),
    max_size=24,
)


@settings(max_examples=300, deadline=None)
@given(requests=_REQUESTS, data=st.data())
def test_key_table_kernel_is_the_reference_gathering(
    requests: list[DispatchRequest], data: st.DataObject
) -> None:
    """``index_key_table`` (C) gives what ``gather_keys`` and the key hash give, key by
    key: skips (below the file's end, rolled back), empty words, the resumed request."""
    kernel = kernel_or_skip("aiorocketmq.common._hash_kernels")
    for position, req in enumerate(requests):
        req.commit_log_offset = position * 100
    end_phy = data.draw(st.integers(-1, len(requests) * 100))
    resume = data.draw(
        st.none()
        | st.tuples(st.integers(0, len(requests)).map(lambda p: p * 100), st.integers(0, 3))
    )
    keys, owners = gather_keys(requests, end_phy, resume)
    rollback = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    hashes, positions, offsets, stamps = kernel.index_key_table(
        requests, end_phy, *(resume or (-1, 0)), rollback
    )
    assert hashes.tolist() == [tag_hash.py_index_key_hash(key) for key in keys]
    assert positions.tolist() == owners
    assert offsets.tolist() == [requests[p].commit_log_offset for p in owners]
    assert stamps.tolist() == [requests[p].store_timestamp for p in owners]


@settings(max_examples=300, deadline=None)
@given(requests=_REQUESTS, skip=st.integers(0, 4))
def test_request_key_hashes_kernel_is_the_reference(
    requests: list[DispatchRequest], skip: int
) -> None:
    """``request_key_hashes`` (C, a single put's keys) hashes ``index_keys`` but the
    first ``skip``."""
    kernel = kernel_or_skip("aiorocketmq.common._hash_kernels")
    for req in requests:
        got = kernel.request_key_hashes(req.topic, req.uniq_key, req.keys, skip)
        assert got == [tag_hash.py_index_key_hash(key) for key in index_keys(req)[skip:]]
