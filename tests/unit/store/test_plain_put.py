"""A single put's plain way (``MessagePutter._put_plain``) against the general way.

The same messages go into two stores on the same manual clock: one with the record
kernel (plain messages take ``CommitLog.append_fields``), one without it (every
message takes ``encode_record`` + ``CommitLog.append``). Their results and their
CommitLog files must be the same to the byte, across file rolls, and the first store
must have taken the plain way for exactly the messages that are plain.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.record_encoder import HOST_V6_BITS
from aiorocketmq.store import commit_log as commit_log_module
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import PutMessageResult, PutMessageStatus
from tests.support.kernels import kernel_or_skip
from tests.unit.store.store_support import inner, put_watched

#: (message, whether it is plain: stored as sent, IPv4 hosts, nothing to refuse)
Case = tuple[MessageExtBrokerInner, bool]


def _cases() -> list[Case]:
    keyed = {"KEYS": "order-1", "TAGS": "TagA", "UNIQ_KEY": "AC11000100002A9F0000000000000001"}
    cases: list[Case] = [
        (inner(b"x" * 1024, **keyed), True),
        (inner(b"", queue_id=1), True),
        (inner(b"y" * 3000, queue_id=2, TAGS="\u00e9t\u00e9"), True),  # non-ASCII text
        (replace(inner(b"z" * 900, queue_id=3, TAGS="a"), body=memoryview(b"z" * 900)), True),
        (inner(b"multi", sys_flag=MessageSysFlag.MULTI_TAGS_FLAG, TAGS="a b"), True),
        (inner(b"v6 bits, v4 hosts", sys_flag=HOST_V6_BITS), True),  # the hosts decide
        (replace(inner(b"flagged", TAGS="t"), flag=-7, reconsume_times=3), True),
        (inner(b"delayed", **{MessageConst.PROPERTY_DELAY_TIME_LEVEL: "2"}), False),
        (inner(b"prepared", sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE), False),
        (inner(b"commit", sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE), False),
        (replace(inner(b"v6 born"), born_host=("::1", 40000)), False),
        (replace(inner(b"map only", TAGS="m"), properties_string=None), False),
        (replace(inner(b"committed"), prepared_transaction_offset=4096), False),
        (replace(inner(b"escaped"), properties_string="TAGS\x01\udcff"), True),
        (replace(inner(b"lone"), properties_string="TAGS\x01\ud800"), False),  # refused
        (inner(b"long props", TAGS="p" * 40_000), False),  # refused: over 32767 chars
        (inner(b"wide props", TAGS="\u00e9" * 20_000), False),  # refused: over 32767 bytes
        (inner(b"b" * 70_000), False),  # refused: over maxMessageSize
        (inner(b"long topic", topic="T" * 128), False),  # refused
    ]
    # Enough plain records to roll the 64 KiB files a few times, at varying fill.
    cases += [(inner(b"r" * (500 + 37 * i), queue_id=i % 4, TAGS="roll"), True) for i in range(120)]
    return cases


async def _put_all(
    tmp_path: Path, cases: list[Case], plain: bool, verify: bool = True
) -> tuple[list[Any], bytes, list[bool]]:
    """Results, the CommitLog's bytes, and per message whether the plain way stored it."""
    assert (commit_log_module._KERNEL is not None) is plain

    def put(store: MessageStore, case: Case) -> Awaitable[PutMessageResult]:
        return store.put_message(replace(case[0], properties=dict(case[0].properties)))

    return await put_watched(
        tmp_path, cases, put, "append_fields", max_message_size=65_536, verify_writes=verify
    )


@pytest.mark.parametrize("verify", [True, False], ids=["verified aside", "into the file"])
async def test_plain_way_stores_what_the_general_way_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verify: bool
) -> None:
    monkeypatch.setattr(
        commit_log_module, "_KERNEL", kernel_or_skip("aiorocketmq.common._record_kernels")
    )
    cases = _cases()
    fast, fast_bytes, took_plain = await _put_all(tmp_path / "plain", cases, True, verify)
    monkeypatch.setattr(commit_log_module, "_KERNEL", None)
    ref, ref_bytes, none_plain = await _put_all(tmp_path / "general", cases, plain=False)
    assert fast == ref
    refused = [r.status for r in ref if not r.ok]
    illegal, too_wide = PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    # lone surrogate, properties over 32767 chars, over 32767 bytes, body, topic
    assert refused == [illegal, illegal, too_wide, illegal, illegal]
    assert len(fast_bytes) > 3 * 64 * 1024  # rolled past a few files
    assert fast_bytes == ref_bytes
    assert took_plain == [is_plain for _, is_plain in cases]
    assert not any(none_plain)
