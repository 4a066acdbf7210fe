"""``mqadmin`` run in-process by integration tests (``main([...])`` in a thread, its
output through capsys), so the test's own clients stay served meanwhile."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from aiorocketmq.cli.admin import main

__all__ = ["Admin"]


class Admin:
    """Runs mqadmin in-process against one name server."""

    def __init__(self, capsys: pytest.CaptureFixture[str], namesrv: str) -> None:
        self.capsys = capsys
        self.namesrv = namesrv

    async def run(self, *args: str) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``mqadmin <command> -n namesrv args...``."""
        self.capsys.readouterr()
        argv = [args[0], "-n", self.namesrv, *args[1:]]
        code = await asyncio.to_thread(main, argv)
        out, err = self.capsys.readouterr()
        return code, out, err

    async def table(self, *args: str) -> str:
        """The command's text output; it must succeed."""
        code, out, err = await self.run(*args)
        assert code == 0, f"mqadmin {args}: {err}"
        return out

    async def json(self, *args: str) -> Any:
        """The command's ``--json`` document; it must succeed and be one JSON line."""
        out = await self.table(*args, "--json")
        assert out.endswith("\n") and out.count("\n") == 1, out
        return json.loads(out)

    async def both(self, *args: str) -> tuple[str, Any]:
        """Table then JSON of the same command."""
        return await self.table(*args), await self.json(*args)
