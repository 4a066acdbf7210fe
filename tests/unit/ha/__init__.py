"""HA replication tests."""
