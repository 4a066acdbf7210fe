"""aiorocketmq.admin."""
