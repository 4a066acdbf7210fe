"""ProcessQueue: offsets committed, flow-control figures, orderly take/commit, lock expiry."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.process_queue import REBALANCE_LOCK_MAX_LIVE_TIME_MS, ProcessQueue
from aiorocketmq.common.message import MessageExt


def msg(offset: int, size: int = 10) -> MessageExt:
    return MessageExt("T", b"b" * size, queue_offset=offset)


def test_remove_returns_the_smallest_held_offset_then_one_past_the_largest() -> None:
    pq = ProcessQueue()
    assert pq.remove_messages([msg(0)]) == -1  # nothing held: nothing to commit
    m = [msg(o) for o in range(5, 10)]
    assert pq.put_messages(m) is True
    assert (pq.msg_count, pq.msg_size, pq.max_span()) == (5, 50, 4)
    # Consumed out of order: the commit offset stays at the oldest unconsumed message.
    assert pq.remove_messages([m[2], m[4]]) == 5
    assert pq.remove_messages([m[0]]) == 6
    assert pq.held_offsets() == [6, 8]
    assert pq.remove_messages([m[1], m[3]]) == 10
    assert (pq.msg_count, pq.msg_size, pq.max_span()) == (0, 0, 0)


def test_put_ignores_offsets_already_held() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(1), msg(2)])
    pq.put_messages([msg(2), msg(3)])
    assert pq.msg_count == 3 and pq.held_offsets() == [1, 2, 3]


@given(st.lists(st.integers(0, 500), min_size=1, max_size=60, unique=True), st.data())
def test_commit_offset_is_never_past_an_unconsumed_message(
    offsets: list[int], data: st.DataObject
) -> None:
    pq = ProcessQueue()
    held = {o: msg(o) for o in offsets}
    pq.put_messages(held.values())
    consumed = data.draw(st.lists(st.sampled_from(offsets), unique=True))
    result = pq.remove_messages([held[o] for o in consumed])
    left = sorted(set(offsets) - set(consumed))
    assert result == (left[0] if left else max(offsets) + 1)
    assert pq.msg_count == len(left)


def test_orderly_take_commit_and_consume_again() -> None:
    pq = ProcessQueue()
    assert pq.put_messages([msg(3), msg(1), msg(2)]) is True  # dispatch: nothing running
    assert pq.put_messages([msg(4)]) is False  # a consume is already running
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [1, 2]
    pq.make_message_to_consume_again(taken[1:])
    assert pq.commit() == 2  # offset 1 consumed
    assert [m.queue_offset for m in pq.take_messages(10)] == [2, 3, 4]
    assert pq.commit() == 5
    assert pq.msg_count == 0 and pq.msg_size == 0
    assert pq.take_messages(1) == [] and pq.consuming is False
    assert pq.commit() == -1
    assert pq.put_messages([msg(5)]) is True  # the next pull dispatches again


def test_lock_expiry_and_clear() -> None:
    pq = ProcessQueue()
    assert not pq.is_lock_expired()
    pq.last_lock_timestamp -= REBALANCE_LOCK_MAX_LIVE_TIME_MS + 1
    assert pq.is_lock_expired()
    pq.put_messages([msg(7)])
    pq.clear()
    assert (pq.msg_count, pq.msg_size, pq.has_temp_message()) == (0, 0, False)


async def test_flow_control_waits_end_when_messages_leave_or_the_queue_drops() -> None:
    """No 50 ms polling: a held-back pull loop is woken by the consume that made room."""
    pq = ProcessQueue()
    pq.put_messages([msg(o) for o in range(3)])
    loop = asyncio.get_running_loop()
    for make_room in (
        lambda: pq.remove_messages([msg(0)]),
        lambda: setattr(pq, "dropped", True),
        pq.clear,
    ):
        waiting = asyncio.ensure_future(pq.wait_for_room(30))
        await asyncio.sleep(0)  # the waiter is parked on the event now
        assert not waiting.done()
        loop.call_soon(make_room)
        await asyncio.wait_for(waiting, 5)  # woken, far before its 30 s bound
    started = loop.time()
    await pq.wait_for_room(0.05)  # nothing happens: the bound ends it
    assert loop.time() - started >= 0.04
