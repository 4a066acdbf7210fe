"""aiorocketmq.cli: the command-line tools (``mqnamesrv``, ``mqbroker``, ``mqadmin``...).

Importing the package caps OpenBLAS at one thread unless the environment says
otherwise (``OPENBLAS_NUM_THREADS``), before any tool imports numpy: the tools use
numpy element-wise only, never BLAS, and numpy's OpenBLAS starts a thread per core
that spins at import, which cost each broker or name-server start ~0.13 s of CPU on a
2-core machine (the processes a tool starts inherit the setting).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
