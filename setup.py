"""Build the optional C kernels; everything else is in pyproject.toml.

The kernels (``aiorocketmq/**/_*_kernels.pyx``) are Cython, compiled with whatever C
compiler the machine has, as aiokafka, asyncpg and uvloop build theirs. They are
optional: without Cython or a compiler, or with ``AIOROCKETMQ_NO_EXTENSIONS=1`` at
install time, the install still succeeds and the pure-Python reference code runs
(``aiorocketmq.common.kernels`` makes the choice at import time).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNELS = [
    "aiorocketmq/broker/_send_kernels.pyx",
    "aiorocketmq/client/_produce_kernels.pyx",
    "aiorocketmq/common/_hash_kernels.pyx",
    "aiorocketmq/common/_props_kernels.pyx",
    "aiorocketmq/common/_record_kernels.pyx",
    "aiorocketmq/remoting/_frame_kernels.pyx",
    "aiorocketmq/remoting/_json_kernels.pyx",
    "aiorocketmq/remoting/_observe_kernels.pyx",
    "aiorocketmq/store/_dispatch_kernels.pyx",
    "aiorocketmq/store/_index_kernels.pyx",
    "aiorocketmq/store/_page_kernels.pyx",
    "aiorocketmq/store/_scan_kernels.pyx",
]


class OptionalBuildExt(build_ext):
    """``build_ext`` that warns instead of failing when a kernel cannot be compiled.

    The kernels compile in parallel, one per core (``build_ext -j``): built one after
    another they took ~40 s of a wheel build on a 2-core machine.
    """

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all (DistutilsPlatformError...)
            _skipped(f"cannot build C kernels: {exc}")

    def build_extension(self, ext: object) -> None:
        try:
            super().build_extension(ext)  # type: ignore[arg-type]
        except Exception as exc:  # CompileError, LinkError, a missing header...
            _skipped(f"cannot build {getattr(ext, 'name', ext)}: {exc}")


def _skipped(why: str) -> None:
    print(f"WARNING: {why}; the pure-Python code will run instead", file=sys.stderr)


def _extensions() -> list[object]:
    if os.environ.get("AIOROCKETMQ_NO_EXTENSIONS", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        _skipped("Cython is not installed")
        return []
    extensions = [
        Extension(
            str(Path(path).with_suffix("")).replace("/", "."),
            [path],
            # The record kernel computes body CRCs with zlib's crc32, as zlib.crc32 does.
            libraries=["z"] if path.endswith("_record_kernels.pyx") else [],
        )
        for path in KERNELS
    ]
    return list(
        cythonize(
            extensions,
            compiler_directives={"language_level": "3"},
            quiet=True,
            nthreads=os.cpu_count() or 1,
        )
    )


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
