"""Shared test helpers: waiting on conditions and managing child processes.

Owns: ``wait_until`` / ``wait_until_sync`` (the only place tests may poll with a
short sleep) and ``ManagedProcess`` / ``PidRegistry`` (real processes with a
ready line, clean stop, leftovers killed by PID).

Must not: import fixtures (those live in ``tests/conftest.py``) or hard-code
paths or ports.
"""

from tests.support.procs import ManagedProcess, PidRegistry
from tests.support.wait import wait_until, wait_until_sync

__all__ = ["ManagedProcess", "PidRegistry", "wait_until", "wait_until_sync"]
