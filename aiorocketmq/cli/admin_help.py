"""``mqadmin`` without a command, and ``mqadmin help <command>``, as Java's MQAdminStartup.

Owns: the command list Java prints when mqadmin runs alone ("The most commonly used
mqadmin commands are:", one command a line with its description, then "See
'mqadmin help <command>' ..."), one command's usage for ``help <command>``, and the
command table without aliases (``clusterSendMsgRT`` is ``clusterRT``'s).

Must not: define commands (``aiorocketmq.cli.admin`` does) or run them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["admin_help", "command_list", "unique_commands"]


def _subcommands(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise LookupError("mqadmin's parser has no commands")


def unique_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> dict[str, argparse.ArgumentParser]:
    """Command name -> parser, aliases left out (they share their command's parser)."""
    unique: dict[str, argparse.ArgumentParser] = {}
    for name, command in sub.choices.items():
        if all(command is not seen for seen in unique.values()):
            unique[name] = command
    return unique


def command_list(parser: argparse.ArgumentParser) -> str:
    """What ``mqadmin`` alone prints: Java's ``printHelp`` list, one command a line."""
    sub = _subcommands(parser)
    helps = {action.dest: action.help or "" for action in sub._choices_actions}
    lines = ["The most commonly used mqadmin commands are:"]
    lines += [f"   {name:<28}{helps.get(name, '')}" for name in unique_commands(sub)]
    lines += ["", "See 'mqadmin help <command>' for more information on a specific command.", ""]
    return "\n".join(lines)


def admin_help(
    parser: argparse.ArgumentParser, topic: Sequence[str], write: Callable[[str], None]
) -> int:
    """``mqadmin`` alone or ``mqadmin help [command]``: the list, or one command's flags.

    Returns:
        The exit code: 0, or 2 for an unknown command (Java: "The command X not exist").
    """
    if not topic:
        write(command_list(parser))
        return 0
    command = _subcommands(parser).choices.get(topic[0])
    if command is None:
        print(f"The command {topic[0]} not exist", file=sys.stderr)
        return 2
    write(command.format_help())
    return 0
