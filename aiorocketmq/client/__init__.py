"""aiorocketmq.client."""
