"""RocketMQ 5's gRPC messaging protocol (``apache.rocketmq.v2.MessagingService``) in
local mode: a gRPC endpoint inside the broker process that calls the broker's parts
in-process (routes, sends, POP-style receive / ack / change-invisible, transactions).

Owns: the gRPC server and the v2 RPC handlers, the conversion between v2 messages
and stored 4.x records, and the POP in-flight state (``pop`` modules).

Must not: be imported by ``broker`` (the broker knows nothing of gRPC; the CLI
attaches the proxy to a BrokerController as an extension service).
"""
