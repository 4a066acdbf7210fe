"""aiorocketmq.analytics."""
