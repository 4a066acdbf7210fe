"""Regenerates the v2 messaging protocol's Python modules from the committed protos.

Owns: the one recipe that turns ``protos/apache/rocketmq/v2/{definition,service}.proto``
(copied unchanged from apache/rocketmq-apis, Apache-2.0 headers kept) into
``v2/{definition,service}_pb2.py`` and their ``.pyi`` stubs, with protoc's
top-level ``apache.rocketmq.v2`` imports rewritten to ``aiorocketmq.proxy.v2``
(the generated service module imports the definitions by the proto's package
path, which is no importable package of ours).

The generated modules are committed, so neither an install nor a build needs
protoc: ``grpcio-tools`` is a dev dependency only. ``make proto`` runs this;
``tests/unit/proxy/test_codegen.py`` fails when the committed files and a fresh
generation differ.

Must not: run at import time of the proxy, or be imported by it.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["PROTO_FILES", "generate", "main"]

PROXY_DIR: Final = Path(__file__).resolve().parent
PROTO_ROOT: Final = PROXY_DIR / "protos"
OUT_DIR: Final = PROXY_DIR / "v2"
PROTO_FILES: Final = ("apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto")
_IMPORT = re.compile(r"^from apache\.rocketmq\.v2 import ", re.MULTILINE)


def generate(out_dir: Path) -> list[Path]:
    """Write the generated modules into ``out_dir``; the paths written.

    Raises:
        RuntimeError: protoc failed (its message is in the error).
    """
    from grpc_tools import protoc  # dev dependency: only regeneration needs it

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"-I{Path(protoc.__file__).parent / '_proto'}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            *(str(PROTO_ROOT / name) for name in PROTO_FILES),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed: {' '.join(args)}")
        for produced in sorted((Path(tmp) / "apache" / "rocketmq" / "v2").iterdir()):
            text = _IMPORT.sub("from aiorocketmq.proxy.v2 import ", produced.read_text())
            target = out_dir / produced.name
            target.write_text(text)
            written.append(target)
    return written


def main() -> int:
    """``python -m aiorocketmq.proxy.codegen``: regenerate in place."""
    for path in generate(OUT_DIR):
        print(f"wrote {path.relative_to(PROXY_DIR.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
