"""A read of many pipelined requests is answered in time-bounded runs, in order.

What this pins: the requests of one ``data_received`` are answered inline only for
the read's time budget; the rest wait in the backlog with reading paused and are
answered, in order, in later loop iterations, each run bounded the same way; once
the backlog is empty, reading resumes. A fake transport and a fake clock (each
reading advances it 0.4 ms): no sockets, nothing sleeps.
"""

from __future__ import annotations

import pytest

from aiorocketmq.remoting import connection as connection_module
from aiorocketmq.remoting.command import RPC_RESPONSE, RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from tests.support.wait import wait_until

CODE = 1001


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.paused = False
        self.pauses = 0

    def write(self, data: bytes) -> None:
        self.written += data

    def writelines(self, items: list[bytes]) -> None:
        for item in items:
            self.written += item

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None:
        self.paused, self.pauses = True, self.pauses + 1

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


async def test_one_read_of_many_requests_is_answered_in_bounded_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.0004
        return now[0]

    monkeypatch.setattr(connection_module, "perf_counter", clock)
    handled: list[int] = []
    runs: list[list[int]] = [[]]

    def handler(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        handled.append(int(request.ext_fields["n"]))
        runs[-1].append(handled[-1])
        return request.response_to(0, "")

    table = ProcessorTable()
    table.register(CODE, handler)
    conn = RemotingConnection(table)
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    frames = b"".join(encode_frame(RemotingCommand.request(CODE, {"n": str(n)})) for n in range(20))
    run_backlog = conn._run_backlog

    def counted_run() -> None:
        runs.append([])
        run_backlog()

    conn._run_backlog = counted_run  # type: ignore[method-assign]
    conn.data_received(frames)
    assert 0 < len(handled) < 20 and transport.paused, "the read stopped at its budget"
    await wait_until(lambda: len(handled) == 20, what="the backlog answered")
    assert handled == list(range(20)), "in order"
    assert len(runs) > 2 and all(len(run) <= 3 for run in runs), runs  # 1 ms at 0.4 ms a reading
    await wait_until(lambda: not transport.paused, what="reading resumed")
    replies = FrameDecoder().feed(bytes(transport.written))
    assert len(replies) == 20 and all(r.flag & RPC_RESPONSE for r in replies)
