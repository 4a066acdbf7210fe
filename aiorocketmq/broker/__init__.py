"""aiorocketmq.broker."""
