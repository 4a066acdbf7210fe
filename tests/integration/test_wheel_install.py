"""The wheel, installed as a user installs it, runs the README's Quickstart outside the checkout.

A module fixture copies what the distribution is built from (``pyproject.toml``,
``setup.py``, the package, README, LICENSE, NOTICE, CHANGELOG) to a temporary directory,
builds the wheel there with ``pip wheel`` (so no stale ``build/`` or in-place compiled
kernel of the checkout leaks in; the wheel compiles its own), creates a
fresh virtual environment (no system site-packages, no access to the project's
``.venv``) and installs the wheel with its runtime dependencies, plus pytest for the
plugin test. Every command then runs from a working directory outside the checkout,
with the fresh environment's ``bin`` first on ``PATH`` and no ``PYTHONPATH``.

* ``test_quickstart_runs_from_the_wheel`` runs the README's Quickstart blocks in order:
  ``mqcluster up --layout 1m`` (on a free port base), the producer and consumer
  scripts, ``mqadmin clusterList`` and ``topicStatus``, the dashboard (fetched once,
  then stopped), ``mqcluster status`` and ``mqcluster down``; a finally stops every
  node still running by PID.
* ``test_pytest_plugin_runs_a_user_test`` writes the README's plugin example to a user
  test file and runs pytest on it in the fresh environment.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiorocketmq.deploy.cluster import free_layout_base
from aiorocketmq.deploy.layout import load_layout
from aiorocketmq.deploy.process import pid_alive
from tests.support.sources import copy_sources
from tests.support.wait import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The files the distribution is built from (pyproject's readme and license-files).
#: The C kernels ``pip install`` compiles (setup.py) where a C compiler exists.
KERNELS = (
    "aiorocketmq.broker._send_kernels", "aiorocketmq.client._produce_kernels",
    "aiorocketmq.common._hash_kernels", "aiorocketmq.common._props_kernels",
    "aiorocketmq.common._record_kernels", "aiorocketmq.remoting._frame_kernels",
    "aiorocketmq.remoting._json_kernels", "aiorocketmq.remoting._observe_kernels",
    "aiorocketmq.store._dispatch_kernels", "aiorocketmq.store._index_kernels",
    "aiorocketmq.store._page_kernels", "aiorocketmq.store._scan_kernels",
)  # fmt: skip
EXAMPLE_NAMESRV = "127.0.0.1:9876"
COMMAND_TIMEOUT_S = 120
DASHBOARD_READY = re.compile(r"dashboard ready at (http://\S+/)")


@dataclass(frozen=True)
class Installed:
    """A fresh environment with the wheel installed, and where to run from."""

    venv: Path
    env: dict[str, str]
    seconds: float

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")


def readme_section(title: str) -> str:
    """The text of the README section ``## <title>`` (up to the next ``## ``)."""
    text = (REPO_ROOT / "README.md").read_text("utf-8")
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def code_blocks(section: str) -> list[tuple[str, str]]:
    """``(language, code)`` of each fenced block in ``section``, in order."""
    return re.findall(r"```(\w*)\n(.*?)```", section, re.S)


def clean_env(venv: Path) -> dict[str, str]:
    """This process's environment minus everything that points at the checkout."""
    project_bin = str(Path(sys.executable).parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "AIOROCKETMQ_"))
        and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
    }
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != project_bin]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command to completion; its stdout. A non-zero exit fails with stderr."""
    proc = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"{shlex.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Build the wheel and install it into a fresh venv (see the module docstring)."""
    base = tmp_path_factory.mktemp("wheel")
    started = time.monotonic()
    src = copy_sources(base / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    run([*pip, "wheel", "--no-deps", "--quiet", "-w", str(base / "dist"), str(src)], base)
    (wheel,) = (base / "dist").glob("aiorocketmq-*.whl")
    venv = base / "venv"
    # No ensurepip: this pip installs into the new interpreter (--python), which is faster.
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base)
    run([*pip, "--python", str(venv / "bin" / "python"), "install", "--quiet", str(wheel),
         "pytest"], base)  # fmt: skip
    seconds = time.monotonic() - started
    print(f"wheel built and installed with its dependencies in {seconds:.1f} s")
    return Installed(venv, clean_env(venv), seconds)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A user's working directory: outside the checkout, no deploy/ beside it."""
    path = tmp_path / "user"
    path.mkdir()
    assert not path.resolve().is_relative_to(REPO_ROOT)
    return path


def test_the_install_is_the_wheel_with_the_runtime_only(
    installed: Installed, workdir: Path
) -> None:
    out = run(
        [installed.python, "-c", (
            "import importlib.metadata as md, importlib.util as u, aiorocketmq\n"
            "print(aiorocketmq.__file__)\n"
            "print(md.version('aiorocketmq'), aiorocketmq.__version__)\n"
            "print(sorted(f.as_posix() for f in md.files('aiorocketmq') if f.name in "
            "('LICENSE', 'NOTICE', 'py.typed')))\n"
            "print([m for m in ('pyspark', 'mypy', 'rocketmq', 'pyarrow') if u.find_spec(m)])\n"
        )],
        workdir, installed.env,
    )  # fmt: skip
    location, versions, files, extras = out.splitlines()
    assert Path(location).is_relative_to(installed.venv), location
    version, attr = versions.split()
    assert version == attr
    version_dir = f"aiorocketmq-{version}.dist-info"
    # py.typed at the root covers every subpackage; the licenses ship in the metadata.
    assert {"aiorocketmq/py.typed", f"{version_dir}/licenses/LICENSE",
            f"{version_dir}/licenses/NOTICE"} <= set(ast.literal_eval(files)), files  # fmt: skip
    assert extras == "[]"  # analytics and dev extras are not part of a plain install
    analytics = subprocess.run(
        ["mqanalytics", "report", "--store", str(workdir)], cwd=workdir, env=installed.env,
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert analytics.returncode == 1, analytics.stderr
    assert "pip install 'aiorocketmq[analytics]'" in analytics.stderr  # no traceback
    assert installed.seconds < 120, f"the install took {installed.seconds:.0f} s"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: the kernels are optional")
def test_the_wheel_compiled_the_c_kernels(installed: Installed, workdir: Path) -> None:
    """``pip`` built every kernel from setup.py with the machine's compiler."""
    out = run(
        [installed.python, "-c", (
            "from aiorocketmq.common.kernels import load_kernel\n"
            f"print([k for k in {KERNELS!r} if load_kernel(k) is None])\n"
        )],
        workdir, installed.env,
    )  # fmt: skip
    assert out.strip() == "[]", f"kernels not built: {out}"


def _pids(run_dir: Path) -> list[int]:
    pids = []
    for pid_file in (run_dir / "run").glob("*.pid"):
        text = pid_file.read_text().strip()
        if text.isdigit():
            pids.append(int(text))
    return pids


def _stop_leftovers(installed: Installed, workdir: Path) -> None:
    """``mqcluster down``, then SIGKILL by PID whatever still runs."""
    if (workdir / "data" / "cluster.json").exists():
        subprocess.run(
            ["mqcluster", "down"], cwd=workdir, env=installed.env, capture_output=True,
            timeout=COMMAND_TIMEOUT_S, check=False,
        )  # fmt: skip
    for pid in _pids(workdir / "data"):
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


async def _dashboard(args: list[str], installed: Installed, workdir: Path, cluster: str) -> None:
    """Start the dashboard, read its cluster page once, stop it by PID."""
    proc = await asyncio.create_subprocess_exec(
        *args, cwd=workdir, env=installed.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = None
        while url is None:
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line, "the dashboard exited before it was ready"
            if found := DASHBOARD_READY.search(line.decode()):
                url = found.group(1)
        host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        page = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        await writer.wait_closed()
        assert page.startswith(b"HTTP/1.1 200"), page[:200]
        assert b"broker-a" in page and cluster.encode() in page
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        await asyncio.wait_for(proc.wait(), 30)


async def _run_block(
    lang: str, code: str, installed: Installed, workdir: Path, base: int, namesrv: str
) -> list[str]:
    """Run one Quickstart block; the stdout of each command it ran."""
    code = code.replace(EXAMPLE_NAMESRV, namesrv)
    if lang == "python":
        script = workdir / "example.py"
        script.write_text(code, "utf-8")
        args = [installed.python, str(script)]
        return [await asyncio.to_thread(run, args, workdir, installed.env)]
    assert lang in ("bash", "sh"), f"Quickstart block of unknown language {lang!r}"
    outputs = []
    for line in code.splitlines():
        args = shlex.split(line, comments=True)
        if not args:
            continue
        if args[:2] == ["mqcluster", "up"]:
            args += ["--port-base", str(base)]
        if args[:2] == ["mqadmin", "dashboard"]:
            port = args.index("--port")
            args[port + 1] = "0"  # the README's 8080 may be taken here
            await _dashboard(args, installed, workdir, "DefaultCluster")
            outputs.append("")
            continue
        outputs.append(await asyncio.to_thread(run, args, workdir, installed.env))
    return outputs


async def test_quickstart_runs_from_the_wheel(installed: Installed, workdir: Path) -> None:
    blocks = code_blocks(readme_section("Quickstart"))
    assert [lang for lang, _ in blocks] == ["bash", "python", "python", "bash"]
    base = free_layout_base(load_layout("1m"))
    namesrv = f"127.0.0.1:{base}"
    started = time.monotonic()
    outputs: list[str] = []
    try:
        for lang, code in blocks:
            outputs += await _run_block(lang, code, installed, workdir, base, namesrv)
    finally:
        await asyncio.to_thread(_stop_leftovers, installed, workdir)
    up, sent, consumed, cluster_list, topic_status, _dash, status, _down = outputs
    assert f"NAMESRV_ADDR={namesrv}" in up
    assert sent.count("SEND_OK") == 10, sent
    assert len(consumed.splitlines()) == 10, consumed
    bodies = {line.split(" ", 2)[2] for line in consumed.splitlines()}
    assert bodies == {f"b'hello {i}'" for i in range(10)}
    assert "DefaultCluster" in cluster_list and "broker-a" in cluster_list
    queues = [line.split() for line in topic_status.splitlines() if line.startswith("broker-a")]
    assert sum(int(q[3]) for q in queues) == 10, topic_status  # #Max Offset over the queues
    # #Metrics, #gRPC (the wheel's broker serves RocketMQ 5 clients too), #PID
    row = r"broker-a\s+ASYNC_MASTER\s+127\.0\.0\.1:\d+\s+\d+\s+\d+\s+\d+\s+running"
    assert re.search(row, status), status  # with its own metrics port and PID
    await wait_until(
        lambda: not any(pid_alive(p) for p in _pids(workdir / "data")),
        timeout=30, what="every node gone after mqcluster down",
    )  # fmt: skip
    print(f"Quickstart ran in {time.monotonic() - started:.1f} s")


def test_pytest_plugin_runs_a_user_test(installed: Installed, workdir: Path) -> None:
    examples = [
        code
        for lang, code in code_blocks(readme_section("Running clusters"))
        if lang == "python" and "rocketmq_cluster" in code
    ]
    assert len(examples) == 1
    (workdir / "test_user.py").write_text(examples[0], "utf-8")
    out = run(
        [installed.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        workdir, installed.env,
    )  # fmt: skip
    assert re.search(r"\b1 passed\b", out), out
