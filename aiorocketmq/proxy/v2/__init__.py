"""protoc's output for apache/rocketmq-apis' v2 protos (``aiorocketmq.proxy.codegen``
regenerates it; never edit by hand)."""
