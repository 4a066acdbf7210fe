"""Broker addresses by the client's network (``routeByClientNetwork``, ours).

A broker advertises one address, ``brokerIP1:listenPort``, and RocketMQ's name server
hands that to every client. In a Docker bridge network no one address suits
everybody: a client on the host reaches a broker through a published port
(``127.0.0.1:10911``), a client container and a slave only through the broker's
address on the bridge. With ``routeByClientNetwork=true`` the name server answers
per client:

* a client on one of the name server's own networks (a directly connected IPv4
  subnet, not through its gateway) or on loopback gets each broker at the address
  the broker's registration came from, on the broker's own port;
* everyone else (the host through a published port arrives from the bridge's
  gateway; a LAN client from its own address) gets ``brokerIP1`` as registered.

Only brokers that registered from such a network get a second address; the rest are
answered as registered to everybody. Slaves learn their master's address the same
way (the REGISTER_BROKER reply), so their topic and offset sync reach it.

Owns: reading the name server's directly connected networks from Linux's
``/proc/net/route`` (re-read at most every ``REFRESH_S``, so a network attached
later counts), and the book of second addresses. Must not: touch the route tables
(``route_info.py``) or the wire (``processors.py`` applies what this returns).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from aiorocketmq.common.route import BrokerData, ClusterInfo, TopicRouteData

__all__ = ["BrokerAddressBook", "LocalNetworks", "split_host"]

#: Seconds a reading of the routing table is trusted.
REFRESH_S = 10.0

ROUTE_TABLE = Path("/proc/net/route")

_Net = ipaddress.IPv4Network


def split_host(address: str) -> str:
    """The host part of ``host:port`` (``[v6]:port`` too)."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return host.strip("[]")


def _le_ipv4(hex_le: str) -> ipaddress.IPv4Address:
    # /proc/net/route prints addresses as the kernel stores them: little-endian hex.
    return ipaddress.IPv4Address(bytes.fromhex(hex_le)[::-1])


def read_route_table(text: str) -> tuple[list[_Net], set[ipaddress.IPv4Address]]:
    """Directly connected subnets and gateway addresses from ``/proc/net/route``."""
    subnets: list[_Net] = []
    gateways: set[ipaddress.IPv4Address] = set()
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8:
            continue
        try:
            dest, gateway, mask = _le_ipv4(cols[1]), _le_ipv4(cols[2]), _le_ipv4(cols[7])
        except ValueError:
            continue
        if int(gateway):
            gateways.add(gateway)
        elif int(dest):
            subnets.append(_Net(f"{dest}/{mask}", strict=False))
    return subnets, gateways


class LocalNetworks:
    """Is a peer on one of this host's own networks (or loopback)?

    Args:
        read: Returns the routing table's text ('' where there is none: then only
            loopback peers are local).
        clock: Monotonic seconds, for the refresh.
    """

    def __init__(
        self,
        read: Callable[[], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read or _read_route_table
        self._clock = clock
        self._read_at = float("-inf")
        self._subnets: list[_Net] = []
        self._gateways: set[ipaddress.IPv4Address] = set()

    def is_local(self, host: str) -> bool:
        """True for loopback and for an address of a directly connected IPv4 subnet
        that is not a gateway (traffic through the gateway came from elsewhere)."""
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False
        if ip.is_loopback:
            return True
        if isinstance(ip, ipaddress.IPv6Address):
            mapped = ip.ipv4_mapped
            if mapped is None:
                return False
            ip = mapped
        self._refresh()
        return ip not in self._gateways and any(ip in net for net in self._subnets)

    def _refresh(self) -> None:
        now = self._clock()
        if now - self._read_at < REFRESH_S:
            return
        self._read_at = now
        self._subnets, self._gateways = read_route_table(self._read())


def _read_route_table() -> str:
    try:
        return ROUTE_TABLE.read_text("ascii")
    except OSError:
        return ""


class BrokerAddressBook:
    """Each broker's address on the name server's networks, by its advertised one.

    Attributes:
        generation: Bumped whenever an entry changes (the route cache's key).
    """

    def __init__(self, networks: LocalNetworks) -> None:
        self.networks = networks
        self._local: dict[str, str] = {}
        self.generation = 0

    def learn(self, broker_addr: str, peer: str) -> None:
        """A broker advertising ``broker_addr`` registered from ``peer`` (host:port)."""
        host = split_host(peer)
        port = broker_addr.rsplit(":", 1)[-1]
        local = f"{host}:{port}" if self.networks.is_local(host) else None
        if local is None or local == broker_addr:
            changed = self._local.pop(broker_addr, None) is not None
        else:
            changed = self._local.get(broker_addr) != local
            self._local[broker_addr] = local
        if changed:
            self.generation += 1

    def for_peer(self, peer: str) -> bool:
        """Whether a client at ``peer`` (host:port) is answered local addresses."""
        return bool(self._local) and self.networks.is_local(split_host(peer))

    def address(self, broker_addr: str) -> str:
        """The local address of ``broker_addr``, or itself."""
        return self._local.get(broker_addr, broker_addr)

    def _broker(self, data: BrokerData) -> BrokerData:
        addrs = {bid: self.address(addr) for bid, addr in data.broker_addrs.items()}
        return BrokerData(data.cluster, data.broker_name, addrs)

    def route(self, route: TopicRouteData) -> TopicRouteData:
        """A copy of ``route`` with local broker addresses."""
        return replace(route, broker_datas=[self._broker(b) for b in route.broker_datas])

    def cluster(self, info: ClusterInfo) -> ClusterInfo:
        """A copy of ``info`` with local broker addresses."""
        table = {name: self._broker(b) for name, b in info.broker_addr_table.items()}
        return ClusterInfo(table, info.cluster_addr_table)
