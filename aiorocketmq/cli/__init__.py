"""aiorocketmq.cli."""
