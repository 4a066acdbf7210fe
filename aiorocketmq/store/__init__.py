"""aiorocketmq.store."""
