"""``mqadmin`` without a command, and ``mqadmin help <command>``, as Java's MQAdminStartup.

Owns: the command list Java prints when mqadmin runs alone ("The most commonly used
mqadmin commands are:", one command a line with its description, then "See
'mqadmin help <command>' ..."), one command's usage for ``help <command>``, and the
command table without aliases (``clusterSendMsgRT`` is ``clusterRT``'s), and
command names found ignoring case, as Java's ``findSubCommand``.

Must not: define commands (``aiorocketmq.cli.admin`` does) or run them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["admin_help", "canonical_command", "command_list", "unique_commands"]


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


def canonical_command(parser: argparse.ArgumentParser, word: str) -> str:
    """``word`` as a command's own spelling (Java finds commands ignoring case)."""
    choices = _subcommands(parser).choices
    if word in choices:
        return word
    return next((name for name in choices if name.lower() == word.lower()), word)


def command_list(parser: argparse.ArgumentParser) -> str:
    """What ``mqadmin`` alone prints: Java's ``printHelp`` list, one command a line."""
    sub = _subcommands(parser)
    helps = {action.dest: action.help or "" for action in sub._choices_actions}
    lines = ["The most commonly used mqadmin commands are:"]
    lines += [f"   {name:<20} {helps.get(name, '')}" for name in unique_commands(sub)]
    lines += ["", "See 'mqadmin help <command>' for more information on a specific command.", ""]
    return "\n".join(lines)


def admin_help(
    parser: argparse.ArgumentParser, topic: Sequence[str], write: Callable[[str], None]
) -> int:
    """``mqadmin`` alone or ``mqadmin help [command]``: the list, or one command's flags.

    Returns:
        The exit code: 0, or 2 for an unknown command (Java's "The sub command X not
        exist.", on stderr here).
    """
    if not topic:
        write(command_list(parser))
        return 0
    name = canonical_command(parser, topic[0])
    command = _subcommands(parser).choices.get(name)
    if command is None:
        print(f"The sub command {topic[0]} not exist.", file=sys.stderr)
        return 2
    write(command.format_help())
    return 0
