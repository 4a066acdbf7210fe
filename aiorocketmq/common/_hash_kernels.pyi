# The compiled twin of common.tag_hash's reference functions (_hash_kernels.pyx).
from typing import Any

import numpy as np
import numpy.typing as npt

def java_string_hash(text: str) -> int: ...
def index_key_hash(key: str) -> int: ...
def fill_index_key_hashes(keys: list[str], out: memoryview) -> None: ...
def index_key_table(
    requests: list[Any], end_phy: int, resume_offset: int, resume_done: int, rollback: int
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
]: ...
