# The compiled twin of common.pulled_message.py_pulled_messages (_record_kernels.pyx).
from collections.abc import Callable
from typing import Any

def pulled_messages(
    body: Any,
    cls: type[Any],
    offsets: tuple[tuple[str, str], ...],
    unread_slots: tuple[Any, ...],
    decompress: Callable[[bytes, int], bytes],
) -> list[Any] | None: ...
