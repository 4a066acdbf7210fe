"""aiorocketmq.common."""
