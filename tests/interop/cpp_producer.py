"""Send one message with the stock C++ client (PyPI ``rocketmq`` 0.4.4) and report it.

Usage: ``python tests/interop/cpp_producer.py <namesrv host:port> <topic> <body>``.
Prints one line ``SEND_RESULT status=<n> msg_id=<id> offset=<n>`` and exits 0, or
exits 1 with the client's error on stderr. Runs in its own process: the C++ client
blocks in native code and writes its logs under ``$HOME/logs/rocketmq-cpp``.
"""

from __future__ import annotations

import sys

from rocketmq.client import Message, Producer
from rocketmq.ffi import _CLogLevel, dll

# Bound the client's own log (it can write ~100 MB in a reconnect loop): two 8 MiB
# files at most, warnings and worse only.
LOG_FILES = 2
LOG_FILE_BYTES = 8 * 1024 * 1024


def main(namesrv: str, topic: str, body: str) -> int:
    producer = Producer("PID_cpp_interop", timeout=3000)
    dll.SetProducerLogFileNumAndSize(producer._handle, LOG_FILES, LOG_FILE_BYTES)
    dll.SetProducerLogLevel(producer._handle, _CLogLevel.WARN)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        msg = Message(topic)
        msg.set_keys("interop-key")
        msg.set_tags("TagA")
        msg.set_body(body)
        result = producer.send_sync(msg)
        print(
            f"SEND_RESULT status={int(result.status)} msg_id={result.msg_id} "
            f"offset={result.offset}",
            flush=True,
        )
    finally:
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
