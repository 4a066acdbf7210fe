"""A batch put encoded straight into the CommitLog file against encode-then-append.

The same batches go into two stores on the same manual clock: one with the record
kernel and ``verify_writes`` off (a batch the kernel takes is written in place by
``CommitLog.append_batch_in_place``, its offsets and store time final), one without
the kernel (every batch is encoded by the Python reference into a buffer, then copied
and patched by ``CommitLog.append_batch``). Their results and CommitLog files must be
the same to the byte, across file rolls, and the first store must have placed
exactly the batches the kernel takes.
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.common import record_encoder
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.message import Message
from aiorocketmq.common.message_codec import encode_batch
from aiorocketmq.store import commit_log_batch
from aiorocketmq.store.inner_message import MessageExtBatch
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import PutMessageResult, PutMessageStatus
from tests.support.kernels import kernel_or_skip
from tests.unit.store.helpers import BORN_HOST, STORE_HOST
from tests.unit.store.store_support import put_watched

S = PutMessageStatus
#: (batch, whether the kernel places it)
Case = tuple[MessageExtBatch, bool]


def _batch(
    bodies: list[bytes], queue_id: int = 0, props: dict[str, str] | None = None, **kw: Any
) -> MessageExtBatch:
    messages = [
        Message("T", body, flag=i, properties={"KEYS": f"k{i}", "TAGS": "t" if i % 2 else "\u00e9"})
        for i, body in enumerate(bodies)
    ]
    return MessageExtBatch(
        "T", queue_id, encode_batch(messages), dict(props or {"CLUSTER": "c1"}),
        born_timestamp=7, born_host=kw.pop("born_host", BORN_HOST), store_host=STORE_HOST, **kw,
    )  # fmt: skip


def _cases() -> list[Case]:
    garbled = _batch([b"x"])
    garbled.body = garbled.body[:-1]
    cases: list[Case] = [
        (_batch([b"a" * 100, b"", b"b" * 3000], queue_id=1), True),
        (_batch([b"v6"], born_host=("::1", 40000)), True),  # IPv6: the store time moves
        (_batch([b"w"] * 5, props={"CLUSTER": "c1", "WAIT": "false"}), True),
        (_batch([b"x"], sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE), False),  # refused
        (_batch([b"y"], props={"DELAY": "2"}), False),  # refused
        (garbled, False),  # refused in the reference's words
        (_batch([b"z" * 30_000] * 3), False),  # no 64 KiB file takes it
        (_batch([b"m"], reconsume_times=4, props={}), True),
    ]
    # Enough batches to roll the 64 KiB files a few times, at varying fill.
    cases += [
        (_batch([b"r" * (400 + 53 * i)] * (1 + i % 5), queue_id=i % 3), True) for i in range(60)
    ]
    return cases


async def _put_all(tmp_path: Path, cases: list[Case]) -> tuple[list[Any], bytes, list[bool]]:
    """Results, the CommitLog's bytes, and per batch whether it was placed in the file."""

    def put(store: MessageStore, case: Case) -> Awaitable[PutMessageResult]:
        return store.put_messages(case[0])

    return await put_watched(
        tmp_path, cases, put, "append_batch_in_place", max_message_size=128_000,
        verify_writes=False,
    )  # fmt: skip


async def test_a_batch_placed_in_the_file_is_the_batch_encoded_then_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    cases = _cases()
    monkeypatch.setattr(record_encoder, "_KERNEL", kernel)
    monkeypatch.setattr(commit_log_batch, "_KERNEL", kernel)
    fast, fast_bytes, took = await _put_all(tmp_path / "in-place", cases)
    monkeypatch.setattr(record_encoder, "_KERNEL", None)
    monkeypatch.setattr(commit_log_batch, "_KERNEL", None)
    ref, ref_bytes, none_took = await _put_all(tmp_path / "reference", cases)
    assert fast == ref
    refused = [r.status for r in ref if not r.ok]
    assert refused == [S.MESSAGE_ILLEGAL] * 4  # the last: no file takes it
    assert len(fast_bytes) > 3 * 64 * 1024  # rolled past a few files
    assert fast_bytes == ref_bytes
    assert took == [in_place for _, in_place in cases]
    assert not any(none_took)
