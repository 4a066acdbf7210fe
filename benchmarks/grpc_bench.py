"""gRPC v2 (RocketMQ 5 SDK protocol) beside remoting on one broker: produce and consume.

One ``mqnamesrv`` + one ``mqbroker`` (the real CLIs, ASYNC_FLUSH, gRPC endpoint on a
free port), a topic of 4 queues, 1 KiB bodies with a key and a tag. Phases, each of
``--messages`` messages, ``--inflight`` requests in flight:

1. *remoting produce*: our client's ``Producer.send``, one message per request;
2. *gRPC produce*: ``SendMessage`` with one message per call (as both official SDKs
   send), over one grpc.aio channel, the SDK's metadata;
3. *remoting pull*: our ``PullConsumer.pull`` (32 max) over the 4 queues;
4. *gRPC receive + ack*: ``ReceiveMessage`` (32 max, 30 s invisible) then one
   ``AckMessage`` per message, as the SDKs' simple consumers do.

Each line gives messages/s and the CPU of the broker process and of this client
process in cores over the phase (1.00 = one core busy; on 2 cores the Python client
is often the one saturated). Run: ``python benchmarks/grpc_bench.py [--messages
5000] [--inflight 64]``. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from google.protobuf.duration_pb2 import Duration

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import Message
from aiorocketmq.proxy.server import SERVICE_NAME
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc

TOPIC = "GrpcBench"
BODY = b"x" * 1024
_TICKS = os.sysconf("SC_CLK_TCK")
_METADATA = (("x-mq-client-id", "bench@1"), ("x-mq-language", "PYTHON"))


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _start(
    args: list[str], pattern: str, home: Path
) -> tuple[subprocess.Popen[str], re.Match[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "HOME": str(home)},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        match = re.search(pattern, line)
        if match:
            return proc, match
    raise RuntimeError(f"{args[0]} exited before its ready line")


async def _phase(name: str, broker_pid: int, count: int, run: Callable[[], Awaitable[int]]) -> None:
    server0, client0, t0 = _cpu_s(broker_pid), _cpu_s(os.getpid()), time.perf_counter()
    done = await run()
    elapsed = time.perf_counter() - t0
    server = (_cpu_s(broker_pid) - server0) / elapsed
    client = (_cpu_s(os.getpid()) - client0) / elapsed
    print(
        f"{name:<22} {done:>7} msgs {done / elapsed:>9,.0f} msg/s   "
        f"broker {server:4.2f} cores   client {client:4.2f} cores"
    )
    assert done == count, f"{name}: {done} of {count}"


async def _bounded(count: int, inflight: int, one: Callable[[int], Awaitable[None]]) -> int:
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await one(i)

    await asyncio.gather(*(worker() for _ in range(inflight)))
    return count


def _v2(i: int) -> pb.Message:
    return pb.Message(
        topic=pb.Resource(name=TOPIC),
        body=BODY,
        system_properties=pb.SystemProperties(
            tag="TagA",
            keys=[f"g{i}"],
            message_id="01" + uuid.uuid4().hex.upper(),
            message_type=pb.MessageType.NORMAL,
            body_encoding=pb.Encoding.IDENTITY,
        ),
    )


async def _grpc_receive(channel: grpc.aio.Channel, count: int) -> int:
    receive = channel.unary_stream(
        f"/{SERVICE_NAME}/ReceiveMessage",
        request_serializer=rpc.ReceiveMessageRequest.SerializeToString,
        response_deserializer=rpc.ReceiveMessageResponse.FromString,
    )
    ack = channel.unary_unary(
        f"/{SERVICE_NAME}/AckMessage",
        request_serializer=rpc.AckMessageRequest.SerializeToString,
        response_deserializer=rpc.AckMessageResponse.FromString,
    )
    request = rpc.ReceiveMessageRequest(
        group=pb.Resource(name="GID_bench"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=32,
        invisible_duration=Duration(seconds=30),
        long_polling_timeout=Duration(seconds=5),
    )
    done = 0
    while done < count:
        messages = [
            e.message
            async for e in receive(request, metadata=_METADATA, timeout=10)
            if e.HasField("message")
        ]
        if not messages:
            break
        await asyncio.gather(
            *(
                ack(
                    rpc.AckMessageRequest(
                        group=request.group,
                        topic=m.topic,
                        entries=[
                            rpc.AckMessageEntry(
                                message_id=m.system_properties.message_id,
                                receipt_handle=m.system_properties.receipt_handle,
                            )
                        ],
                    ),
                    metadata=_METADATA,
                )
                for m in messages
            )
        )
        done += len(messages)
    return done


async def _remoting_pull(config: ClientConfig, count: int) -> int:
    done = 0
    async with PullConsumer("GID_bench_pull", client_config=config) as consumer:
        for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
            offset = 0
            while (result := await consumer.pull(mq, "*", offset, 32)).status is PullStatus.FOUND:
                done += sum(1 for m in result.msg_found_list if m.body and m.keys)
                offset = result.next_begin_offset
    return done


async def run(count: int, inflight: int, root: Path) -> None:
    ns, ns_ready = _start(
        ["aiorocketmq.cli.namesrv", "--listenPort", "0", "--bindAddress", "127.0.0.1"],
        r"address=(\S+)",
        root,
    )
    conf = root / "broker.properties"
    conf.write_text(
        f"brokerName=bench\nbrokerIP1=127.0.0.1\nlistenPort=0\ngrpcListenPort=-1\n"
        f"metricsPort=0\nnamesrvAddr={ns_ready[1]}\nstorePathRootDir={root / 'store'}\n"
        "defaultTopicQueueNums=4\nmaxHashSlotNum=50000\nmaxIndexNum=200000\n"
    )
    broker, ready = _start(
        ["aiorocketmq.cli.broker", "-c", str(conf)], r"address=\S+ .* grpc=(\S+)", root
    )
    try:
        config = ClientConfig(namesrv_addr=ns_ready[1], client_ip="127.0.0.1")
        async with Producer("PG_bench", client_config=config) as producer:

            async def remoting_send(i: int) -> None:
                message = Message(topic=TOPIC, body=BODY)
                message.tags, message.keys = "TagA", [f"r{i}"]
                await producer.send(message)

            await remoting_send(-1)  # auto-creates the topic and warms the route
            await _phase(
                "remoting produce",
                broker.pid,
                count,
                lambda: _bounded(count, inflight, remoting_send),
            )
        async with grpc.aio.insecure_channel(ready[1]) as channel:
            send = channel.unary_unary(
                f"/{SERVICE_NAME}/SendMessage",
                request_serializer=rpc.SendMessageRequest.SerializeToString,
                response_deserializer=rpc.SendMessageResponse.FromString,
            )

            async def grpc_send(i: int) -> None:
                reply = await send(rpc.SendMessageRequest(messages=[_v2(i)]), metadata=_METADATA)
                assert reply.status.code == pb.Code.OK, reply.status

            await _phase(
                "gRPC produce", broker.pid, count, lambda: _bounded(count, inflight, grpc_send)
            )
            total = 2 * count + 1
            await _phase("remoting pull", broker.pid, total, lambda: _remoting_pull(config, total))
            await _phase(
                "gRPC receive + ack", broker.pid, total, lambda: _grpc_receive(channel, total)
            )
    finally:
        for proc in (broker, ns):
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--inflight", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args.messages, args.inflight, Path(tmp)))


if __name__ == "__main__":
    main()
