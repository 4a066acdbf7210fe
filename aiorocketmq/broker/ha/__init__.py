"""aiorocketmq.broker.ha: classic master/slave CommitLog replication (specs/store.md §11)."""
