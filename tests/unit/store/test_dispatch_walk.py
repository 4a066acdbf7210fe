"""DispatchRequestBuilder.walk: the C kernel's runs give what the scanner's records give.

For any slice (plain, v2 and IPv6 records, schedule-topic records the kernel leaves to
the scanner, BLANK records, truncated or corrupt tails), the walk with the kernel yields
the same requests and ends as the walk without it, and stops the same way.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RMQ_SYS_SCHEDULE_TOPIC,
)
from aiorocketmq.common.message_codec import decode_record, encode_record
from aiorocketmq.store import dispatch_builder
from aiorocketmq.store.dispatch_builder import DispatchRequestBuilder, RecordWalk
from tests.support.kernels import kernel_or_skip

_RECORD = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["T", "Topic\u00e9", RMQ_SYS_SCHEDULE_TOPIC]),
        "body": st.binary(max_size=30),
        # The kernel picks TAGS, KEYS and UNIQ_KEY from the bytes: later pairs, empty
        # names and values, separators inside values, non-ASCII and escaped bytes.
        "properties": st.sampled_from([
            "", "TAGS\x01a", "TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U",
            "DELAY\x012\x02REAL_TOPIC\x01T\x02TAGS\x01b", "KEYS\x01\udc80x",
            "TAGS\x01a\x02TAGS\x01b", "TAGS\x01\x02KEYS\x01\x01k", "\x01a\x02TAGS\x01a\x01b",
            "TAGS\x01\u00e9\x02UNIQ_KEY\x01U\x02UNIQ_KEY\x01", "TAGS\x01\udcff", "TAGSX\x01a",
            "TAG\x01a\x02\x02TAGS\x01a\x02",
        ]),
        "queue_id": st.integers(0, 7),
        "queue_offset": st.integers(0, 2**40),
        "physical_offset": st.integers(0, 2**40),
        "sys_flag": st.sampled_from([0, 4, 8, 12]),
        "born_host": st.sampled_from([("127.0.0.1", 1), ("::1", 2)]),
        "store_host": st.sampled_from([("127.0.0.1", 3), ("::2", 4)]),
        "store_timestamp": st.integers(0, 2**42),
        "prepared_transaction_offset": st.integers(0, 2**30),
    },
    optional={"v2": st.booleans()},
)  # fmt: skip


def _encode(kwargs: dict[str, Any]) -> bytes:
    kwargs = dict(kwargs)
    v2 = kwargs.pop("v2", False)
    raw = bytes(encode_record(born_timestamp=1, **kwargs))
    if not v2:
        return raw
    view = decode_record(raw)
    topic_pos = view.body_offset + view.body_len
    out = bytearray(raw[:topic_pos]) + struct.pack(">h", raw[topic_pos]) + raw[topic_pos + 1 :]
    struct.pack_into(">ii", out, 0, len(raw) + 1, MESSAGE_MAGIC_CODE_V2)
    return bytes(out)


def _walk(view: memoryview) -> tuple[list[tuple[Any, int]], Any]:
    walk = RecordWalk()
    items = [
        item
        for run in DispatchRequestBuilder((1000, 5000)).walk(view, walk)
        for item in zip(*run, strict=True)
    ]
    assert walk.scanner is not None
    return items, walk.scanner.stop


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(_RECORD, max_size=8),
    tail=st.sampled_from(["", "blank", "zero", "cut", "flip"]),
    flip=st.integers(0, 10_000),
)
def test_the_kernel_walk_equals_the_scanner_walk(
    records: list[dict[str, Any]], tail: str, flip: int
) -> None:
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    data = bytearray(b"".join(_encode(r) for r in records))
    if tail == "blank":
        data += struct.pack(">ii", 64, BLANK_MAGIC_CODE) + bytes(56)
    elif tail == "zero":
        data += bytes(16)
    elif tail == "cut" and data:
        del data[-(flip % len(data)) - 1 :]
    elif tail == "flip" and data:
        data[flip % len(data)] ^= 0xFF
    view = memoryview(bytes(data))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dispatch_builder, "_KERNEL", kernel)
        by_kernel = _walk(view)
        patch.setattr(dispatch_builder, "_KERNEL", None)
        assert by_kernel == _walk(view)


def test_a_long_slice_is_walked_in_bounded_kernel_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    calls: list[int] = []

    class Counting:
        @staticmethod
        def dispatch_requests(*args: Any) -> Any:
            calls.append(args[2])
            return kernel.dispatch_requests(*args)

    record = _encode({"topic": "T", "body": b"x", "properties": "TAGS\x01a", "queue_id": 0,
                      "born_host": ("127.0.0.1", 1), "store_host": ("127.0.0.1", 2),
                      "store_timestamp": 5})  # fmt: skip
    run = dispatch_builder._KERNEL_RUN
    view = memoryview(record * (2 * run + 10))
    monkeypatch.setattr(dispatch_builder, "_KERNEL", Counting)
    items, stop = _walk(view)
    assert len(items) == 2 * run + 10 and stop.clean
    assert calls == [run] * 3  # run + run + 10, then the scanner meets the end
