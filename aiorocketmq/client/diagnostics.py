"""Diagnostics a client hands out on request: ``mqadmin consumerStatus -s``'s "jstack".

Owns: ``stack_dump``, the Python counterpart of Java's jstack (every thread's
stack, then every asyncio task's).

Must not: change anything it looks at.
"""

from __future__ import annotations

import asyncio
import io
import sys
import threading
import traceback

__all__ = ["stack_dump"]


def stack_dump() -> str:
    """Java's jstack, for a Python process: every thread's stack, then every task's."""
    out = []
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident) if thread.ident is not None else None
        out.append(f'"{thread.name}" daemon={str(thread.daemon).lower()}\n')
        if frame is not None:
            out.extend(traceback.format_stack(frame))
        out.append("\n")
    for task in asyncio.all_tasks():
        buffer = io.StringIO()
        task.print_stack(file=buffer)
        out.append(buffer.getvalue() + "\n")
    return "".join(out)
