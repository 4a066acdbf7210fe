# The compiled twins of store.dispatch_runs' and store.dispatch_request's references
# (_dispatch_kernels.pyx).
from collections.abc import Collection
from typing import Any

def group_runs(
    requests: list[Any], cls: type[Any], no_unit: int
) -> dict[tuple[str, int], list[Any]]: ...
def newest_arrivals(requests: list[Any], cls: type[Any]) -> Collection[Any]: ...
def pack_units(requests: list[Any], cls: type[Any]) -> bytes | None: ...
