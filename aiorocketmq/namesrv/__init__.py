"""aiorocketmq.namesrv."""
