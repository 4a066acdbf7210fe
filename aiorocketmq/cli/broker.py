"""``mqbroker``: run one broker in the foreground.

Usage::

    mqbroker [-c broker.properties] [-n "ns1:9876;ns2:9876"] [-p | -m]
             [--log-level L] [--log-json]

Owns: RocketMQ's ``BrokerStartup`` command line (``-c`` file, ``-n`` name servers,
``-p`` print every setting and exit, ``-m`` the important ones), the environment
(``NAMESRV_ADDR`` when neither file nor flag names name servers, ``ROCKETMQ_HOME``,
``~`` in store paths), the ``tls.config.file`` file, resolving ``brokerIP1`` when
unset, logging, uvloop, and the one machine-readable ready line on stdout once the
broker serves::

    mqbroker ready address=127.0.0.1:10911 name=broker-a id=0 pid=4242

``listenPort=0`` picks a free port (the ready line says which). SIGTERM or SIGINT
stops it cleanly (unregister, flush, checkpoint, persist) with exit code 0; a bad
setting exits 2, a failed start (port taken, store locked) 1.

Must not: hold broker logic (``aiorocketmq.broker``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiorocketmq.broker.config import BrokerSettings, load_broker_settings, render_settings
from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.common.properties_file import parse_properties_bytes
from aiorocketmq.common.settings import ConfigError
from aiorocketmq.proxy.server import GrpcProxy
from aiorocketmq.remoting.tls import tls_file_properties
from aiorocketmq.runtime import (
    announce_ready,
    freeze_startup_objects,
    run,
    serve_until_stopped,
    setup_logging,
)

__all__ = ["build_parser", "load_settings", "local_address", "main"]

log = logging.getLogger("aiorocketmq.cli.broker")

EXIT_BAD_CONFIG = 2
EXIT_START_FAILED = 1


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``mqbroker`` (RocketMQ's short flags)."""
    parser = argparse.ArgumentParser(
        prog="mqbroker", description="Run an aiorocketmq broker (RocketMQ 4.x protocol)."
    )
    parser.add_argument("-c", "--configFile", dest="config", metavar="FILE", help="broker.conf")
    parser.add_argument(
        "-n", "--namesrvAddr", dest="namesrv", metavar="ADDRS", help="name servers, ';'-separated"
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-p", "--printConfigItem", dest="print_all", action="store_true", help="print all settings"
    )
    group.add_argument(
        "-m",
        "--printImportantConfig",
        dest="print_important",
        action="store_true",
        help="print the important settings",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING... (INFO)")
    parser.add_argument("--log-json", action="store_true", help="log JSON lines")
    return parser


def local_address() -> str:
    """The host's primary IPv4 address (``RemotingUtil.getLocalAddress``).

    A UDP ``connect`` sends nothing; it only asks the kernel which interface would
    route outwards. Falls back to the host name's address, then 127.0.0.1.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            addr = str(probe.getsockname()[0])
            if addr and not addr.startswith("0."):
                return addr
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def load_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> BrokerSettings:
    """Settings from the file, then ``-n``, then the environment.

    Raises:
        ConfigError: The file is unreadable or a value is bad.
    """
    properties: dict[str, str] = {}
    if args.config:
        try:
            properties = parse_properties_bytes(Path(args.config).read_bytes())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {args.config}: {exc}") from None
    properties = tls_file_properties(properties)  # tls.config.file's keys win, as Java
    overrides: dict[str, Any] = {}
    if args.namesrv:
        overrides["namesrv_addr"] = args.namesrv
    elif "namesrvAddr" not in properties and environ.get("NAMESRV_ADDR"):
        overrides["namesrv_addr"] = environ["NAMESRV_ADDR"]
    if not properties.get("rocketmqHome") and environ.get("ROCKETMQ_HOME"):
        overrides["rocketmq_home"] = environ["ROCKETMQ_HOME"]
    settings = load_broker_settings(properties, overrides)
    broker_updates: dict[str, Any] = {}
    if not settings.broker.broker_ip1:
        broker_updates["broker_ip1"] = local_address()
    # Store paths expand "~" themselves (MessageStoreConfig's path properties).
    return dataclasses.replace(settings, broker=settings.broker.model_copy(update=broker_updates))


async def _serve(
    shutdown: asyncio.Event, settings: BrokerSettings, config_path: Path | None
) -> int:
    controller = BrokerController(settings)
    # UPDATE_BROKER_CONFIG persists to the -c file, as Java's Configuration.persist.
    controller.broker_config.config_path = config_path
    proxy = None
    if settings.broker.grpc_listen_port != 0:
        # RocketMQ 5's proxy in local mode: the gRPC endpoint in this process.
        proxy = GrpcProxy(controller)
        controller.extensions.append(proxy)
    try:
        await controller.start()
    except Exception as exc:
        log.error("broker failed to start: %s", exc)
        return EXIT_START_FAILED
    freeze_startup_objects()
    # The one machine-readable line: tests and launchers wait for it.
    grpc = f" grpc={controller.ctx.store_host[0]}:{proxy.port}" if proxy is not None else ""
    announce_ready(
        f"mqbroker ready address={controller.address} name={settings.broker.broker_name} "
        f"id={settings.broker.broker_id} pid={os.getpid()}{grpc}"
    )
    return await serve_until_stopped(controller, shutdown, controller.fatal)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mqbroker``; returns the exit code."""
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, json=args.log_json)
    try:
        settings = load_settings(args, os.environ)
    except ConfigError as exc:
        print(f"mqbroker: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    for key in settings.unknown_keys:
        log.warning("unknown setting ignored key=%s", key)
    if args.print_all or args.print_important:
        sys.stdout.write(render_settings(settings, important_only=args.print_important))
        return 0
    if not settings.broker.namesrv_addr_list:
        log.warning("no name server (namesrvAddr, -n or NAMESRV_ADDR): clients cannot find me")
    config_path = Path(args.config) if args.config else None
    return run(lambda shutdown: _serve(shutdown, settings, config_path))


if __name__ == "__main__":
    sys.exit(main())
