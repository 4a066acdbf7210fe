"""``mqnamesrv``: run one name server in the foreground.

Usage::

    mqnamesrv [-c namesrv.properties] [-p] [-m] [-n ADDRS]
              [--listenPort PORT] [--bindAddress HOST] [--log-level L]

The flags are Java's ``NamesrvStartup``: ``-c``/``--configFile`` the properties
file, ``-p``/``--printConfigItem`` print every setting and exit, ``-n``/
``--namesrvAddr`` accepted and unused (a name server needs none; Java takes it for
its shared command line). As in Java, the port is the file's ``listenPort``
(default 9876) and the bind address its ``bindAddress`` (Java 5's name; also
``listenHost``); ``--listenPort`` and ``--bindAddress`` (aiorocketmq) set them
from the command line, ``-m`` prints the important settings only (as ``mqbroker``).
``-p`` followed by a number, the old port flag, is refused with that advice.

Owns: the command line, reading the ``.properties`` file (ISO-8859-1 with
``\\uXXXX`` escapes, as Java's ``Properties.load``; and ``tls.config.file``) and
the environment (``ROCKETMQ_HOME``; ``~`` in paths), logging setup, uvloop, and the
one machine-readable ready line on stdout once the port is bound::

    mqnamesrv ready address=127.0.0.1:9876 pid=4242

``--listenPort 0`` picks a free port (the ready line says which). SIGTERM or SIGINT
stops it cleanly with exit code 0; a bad setting exits 2, a failed start (port
taken) 1.

Must not: hold name-server logic (``aiorocketmq.namesrv``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiorocketmq.common.properties_file import format_properties, parse_properties_bytes
from aiorocketmq.namesrv.config import (
    ConfigError,
    NamesrvConfig,
    config_items,
    load_namesrv_config,
)
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.tls import tls_file_properties
from aiorocketmq.runtime import (
    announce_ready,
    freeze_startup_objects,
    run,
    serve_until_stopped,
    setup_logging,
)

__all__ = ["build_parser", "load_config", "main"]

log = logging.getLogger("aiorocketmq.cli.namesrv")

EXIT_BAD_CONFIG = 2


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``mqnamesrv`` (Java ``NamesrvStartup``'s flags; module docstring)."""
    parser = argparse.ArgumentParser(
        prog="mqnamesrv", description="Run an aiorocketmq name server (RocketMQ 4.x protocol)."
    )
    parser.add_argument(
        "-c", "--configFile", "--config", dest="config", metavar="FILE",
        help="namesrv.properties to load (listenPort, bindAddress, ...)",
    )  # fmt: skip
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-p", "--printConfigItem", "--print-config", dest="print_config", action="store_true",
        help="print every setting and exit",
    )  # fmt: skip
    group.add_argument(
        "-m", "--printImportantConfig", "--print-important", dest="print_important",
        action="store_true", help="print the important settings and exit",
    )  # fmt: skip
    parser.add_argument(
        "-n", "--namesrvAddr", dest="namesrv", metavar="ADDRS",
        help="name server list, accepted as Java's NamesrvStartup does and not used",
    )  # fmt: skip
    parser.add_argument(
        "--listenPort", dest="port", type=int, metavar="PORT",
        help="listen port, over the file's listenPort (0 = pick a free one)",
    )  # fmt: skip
    parser.add_argument(
        "--bindAddress", dest="host", metavar="HOST",
        help="address to bind, over the file's bindAddress (default 0.0.0.0)",
    )  # fmt: skip
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING... (INFO)")
    parser.add_argument("--log-json", action="store_true", help="log JSON lines")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line; ``-p PORT`` (this command's old port flag) is refused
    with the way to set the port now, rather than printing the configuration.

    Raises:
        SystemExit: 2 on a bad command line (argparse's usage message).
    """
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.print_config and extra[0].lstrip("-").isdigit():
            parser.error(
                f"-p prints the configuration, as Java's NamesrvStartup; set the port with "
                f"--listenPort {extra[0]} or listenPort={extra[0]} in the -c file"
            )
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def load_config(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[NamesrvConfig, RemotingServerConfig, list[str]]:
    """Settings from the file, then the flags, then ``ROCKETMQ_HOME``; paths expanded.

    Raises:
        ConfigError: The file is unreadable or a value is bad.
    """
    properties: dict[str, str] = {}
    if args.config:
        try:
            properties = parse_properties_bytes(Path(args.config).read_bytes())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {args.config}: {exc}") from None
    if "bindAddress" in properties:  # Java 5's NettyServerConfig name for the bind address
        properties.setdefault("listenHost", properties.pop("bindAddress"))
    properties = tls_file_properties(properties)  # tls.config.file's keys win, as Java
    overrides: dict[str, Any] = {}
    if args.port is not None:
        overrides["listen_port"] = args.port
    if args.host is not None:
        overrides["listen_host"] = args.host
    namesrv, remoting, unknown = load_namesrv_config(properties, overrides)
    updates: dict[str, Any] = {
        "kv_config_path": str(Path(namesrv.kv_config_path).expanduser()),
        "config_store_path": str(Path(namesrv.config_store_path).expanduser()),
    }
    if not namesrv.rocketmq_home and environ.get("ROCKETMQ_HOME"):
        updates["rocketmq_home"] = environ["ROCKETMQ_HOME"]
    return namesrv.model_copy(update=updates), remoting, unknown


def _important(config: NamesrvConfig) -> str:
    items = []
    for name, field in NamesrvConfig.model_fields.items():
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("important"):
            items.append((field.alias or name, getattr(config, name)))
    return format_properties(items)


async def _serve(
    shutdown: asyncio.Event, config: NamesrvConfig, remoting: RemotingServerConfig
) -> int:
    controller = NamesrvController(config, remoting)
    try:
        await controller.start()
    except (OSError, ConfigError) as exc:  # ConfigError: unusable TLS certificates
        log.error("name server failed to start: %s", exc)
        return 1
    freeze_startup_objects()
    # The one machine-readable line: tests and launchers wait for it.
    announce_ready(f"mqnamesrv ready address={controller.address} pid={os.getpid()}")
    return await serve_until_stopped(controller, shutdown, controller.fatal)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mqnamesrv``; returns the exit code."""
    args = parse_args(argv)
    setup_logging(args.log_level, json=args.log_json)
    try:
        config, remoting, unknown = load_config(args, os.environ)
    except ConfigError as exc:
        print(f"mqnamesrv: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    for key in unknown:
        log.warning("unknown setting ignored key=%s", key)
    if args.namesrv:
        log.info("-n %s ignored: a name server uses none (bind with --bindAddress)", args.namesrv)
    if args.print_config:
        sys.stdout.write(format_properties(config_items(config, remoting)))
        return 0
    if args.print_important:
        sys.stdout.write(_important(config))
        return 0
    return run(lambda shutdown: _serve(shutdown, config, remoting))


if __name__ == "__main__":
    sys.exit(main())
