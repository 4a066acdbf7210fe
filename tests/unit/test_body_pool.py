"""BodyPool and the decoder's large bodies: reused only when nothing can read them."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

from aiorocketmq.remoting import body_pool
from aiorocketmq.remoting.body_pool import (
    MAX_KEPT_BYTES,
    MAX_POOLED_BODY,
    BodyPool,
    thread_body_pool,
)
from aiorocketmq.remoting.codes import RequestCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import LARGE_FRAME, FrameDecoder, encode_frame


def test_a_dropped_buffer_is_taken_again_at_the_new_size() -> None:
    pool = BodyPool()
    first = pool.take(100_000)
    first_id = id(first)
    del first
    second = pool.take(90_000)
    assert id(second) == first_id
    assert len(second) == 90_000
    del second
    third = pool.take(120_000)
    assert id(third) == first_id
    assert len(third) == 120_000
    assert pool.kept == 1


@pytest.mark.parametrize("holder", ["reference", "memoryview", "numpy"])
def test_a_buffer_anything_still_reads_is_not_handed_out(holder: str) -> None:
    pool = BodyPool()
    buf = pool.take(100_000)
    buf[:5] = b"first"
    held: object = {
        "reference": buf,
        "memoryview": memoryview(buf)[:5],
        "numpy": np.frombuffer(buf, dtype=np.uint8, count=5),
    }[holder]
    del buf
    other = pool.take(100_000)
    other[:5] = b"other"
    assert bytes(memoryview(held))[:5] == b"first"  # type: ignore[arg-type]
    assert pool.kept == 2


def test_reuse_is_on_here_and_off_turns_the_pool_into_plain_allocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert body_pool.REUSE  # CPython with its GIL: the interpreter the suite runs on
    monkeypatch.setattr(body_pool, "REUSE", False)
    pool = BodyPool()
    first = pool.take(100_000)
    del first
    assert len(pool.take(100_000)) == 100_000
    assert pool.kept == 0


def test_bodies_above_the_pooled_size_are_never_kept() -> None:
    pool = BodyPool()
    big = pool.take(MAX_POOLED_BODY + 1)
    assert len(big) == MAX_POOLED_BODY + 1
    assert pool.kept == 0


def test_kept_bytes_stay_within_the_bound() -> None:
    pool = BodyPool()
    held = [pool.take(MAX_POOLED_BODY) for _ in range(4)]
    assert all(len(b) == MAX_POOLED_BODY for b in held)
    assert pool.kept_bytes <= MAX_KEPT_BYTES
    assert pool.kept == MAX_KEPT_BYTES // (MAX_POOLED_BODY + 1)  # __alloc__ adds the NUL


def test_growing_past_the_bound_lets_the_buffer_go() -> None:
    pool = BodyPool()
    held = []
    while pool.kept_bytes + MAX_POOLED_BODY + 1 <= MAX_KEPT_BYTES:
        held.append(pool.take(MAX_POOLED_BODY))  # less room than one big body is left
    small = pool.take(1_000)
    kept = pool.kept
    del small
    grown = pool.take(MAX_POOLED_BODY)  # would pass the bound if it grew in the pool
    assert len(grown) == MAX_POOLED_BODY
    assert pool.kept == kept - 1  # the small one was let go, the big one not kept
    assert pool.kept_bytes <= MAX_KEPT_BYTES
    del held


def _in_new_thread(fn: Callable[[], object]) -> object:
    """Run ``fn`` in a thread of its own: a pool no earlier test has touched."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert out, "the thread failed (see its traceback above)"
    return out[0]


def test_each_thread_has_its_own_pool() -> None:
    mine = thread_body_pool()
    assert thread_body_pool() is mine
    theirs = _in_new_thread(thread_body_pool)
    assert isinstance(theirs, BodyPool)
    assert theirs is not mine


def _frame(body: bytes) -> bytes:
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"k": "v"}, body)
    return encode_frame(cmd)


def test_decoder_reuses_a_body_only_after_it_is_dropped() -> None:
    assert _in_new_thread(_decode_three_bodies) is True


def _decode_three_bodies() -> bool:
    decoder = FrameDecoder()
    one, two = bytes([1]) * (2 * LARGE_FRAME), bytes([2]) * (2 * LARGE_FRAME + 7)
    frame_one, frame_two = _frame(one), _frame(two)

    def receive(frame: bytes) -> RemotingCommand:
        # Two reads, so the frame is incomplete after the first: the large path.
        assert decoder.feed(frame[:100]) == []
        [cmd] = decoder.feed(frame[100:])
        return cmd

    first = receive(frame_one)
    view = memoryview(first.body)[10:20]
    body_id = id(first.body)
    del first
    second = receive(frame_two)
    assert id(second.body) != body_id  # the view still reads the first body
    assert bytes(view) == one[10:20]
    assert second.body == two
    view.release()
    del second
    third = receive(frame_one)
    assert id(third.body) == body_id
    assert third.body == one
    return True
