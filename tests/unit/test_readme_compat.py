"""The README's command-line compatibility table lists every mqadmin command and flag.

Operators read that table to know which Java command or flag works here; a command
added to the parser without its row (or a flag without its mention) fails this test.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from aiorocketmq.cli.admin import build_parser
from aiorocketmq.cli.admin_help import unique_commands
from aiorocketmq.cli.namesrv import build_parser as namesrv_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def _table_rows() -> dict[str, str]:
    text = README.read_text("utf-8").split("### Java command lines, command by command", 1)[1]
    text = text.split("\n## ", 1)[0]
    rows = {}
    for line in text.splitlines():
        match = re.match(r"\| `([^`]+)` \|(.*)", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def _subcommands(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_every_mqadmin_command_and_flag_has_its_row() -> None:
    rows = _table_rows()
    for name, command in unique_commands(_subcommands(build_parser())).items():
        assert name in rows, f"mqadmin {name} has no row in the README's table"
        for action in command._actions:
            if not action.option_strings or action.dest in ("help", "json", "watch"):
                continue
            if action.option_strings[0] == "-n":
                continue  # every command's, said once above the table
            for option in action.option_strings:
                assert f"`{option}`" in rows[name], f"mqadmin {name} {option} missing"


def test_the_programs_rows_name_their_flags() -> None:
    rows = _table_rows()
    for action in namesrv_parser()._actions:
        long = [o for o in action.option_strings if o.startswith("--") and o[2:3].islower()]
        for option in long:
            if option in ("--help", "--config", "--print-config", "--print-important"):
                continue  # -h, and the older spellings kept as aliases
            assert f"`{option}`" in rows["mqnamesrv"], option
    assert "missing" in rows["exportConfigs"]  # Java commands not built here say so
