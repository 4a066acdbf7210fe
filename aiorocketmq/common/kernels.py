"""Which compiled kernels this process uses.

Owns: the one switch between the C kernels (Cython, built by ``pip install`` from
``setup.py`` when the machine has a C compiler) and the pure-Python reference code,
the way aiokafka, asyncpg and uvloop do it.

``AIOROCKETMQ_NO_EXTENSIONS=1`` in the environment forces the pure-Python code at
import time (aiokafka's ``AIOKAFKA_NO_EXTENSIONS``): to compare the two, to rule a
kernel out when chasing a bug, and so tests can run either way. It is read here, once
per kernel module, because the choice has to be made before any hot path binds its
functions; it is not a setting a deployment tunes. A kernel that was not built (no
compiler at install time) is simply absent: the reference code runs.

Must not: import anything of ours beyond ``common``, or fail an import because a
kernel is missing.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: The environment variable that turns every kernel off.
NO_EXTENSIONS_ENV = "AIOROCKETMQ_NO_EXTENSIONS"


def extensions_disabled() -> bool:
    """Whether ``AIOROCKETMQ_NO_EXTENSIONS`` asks for the pure-Python code."""
    return os.environ.get(NO_EXTENSIONS_ENV, "") not in ("", "0")


def load_kernel(name: str) -> ModuleType | None:
    """The compiled module ``name`` (full dotted name), or None: disabled or not built."""
    if extensions_disabled():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
