"""The command-line habits of RocketMQ operators, against real processes.

- ``mqadmin`` alone lists the commands (Java's MQAdminStartup.printHelp), ``mqadmin
  help <command>`` shows one command's flags, an unknown one is named.
- ``clusterRT`` is Java's name of the send-RT command; ``clusterSendMsgRT`` still works.
- ``mqshutdown broker`` / ``mqshutdown namesrv`` stop real processes cleanly (exit 0
  on SIGTERM, as the fixtures check), limited here with ``--match`` to this test's
  processes so that nothing else on the host is touched.
- ``mqnamesrv -p`` prints the configuration and exits, as Java's; ``-p 9876`` (this
  command's old port flag) is refused with the way to set the port.
- A ``broker.conf`` saved by a Latin-1 editor, with a ``\\uXXXX`` escape, starts a
  broker as it would start Java's (it was read as UTF-8 and refused).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.cli.admin import main
from aiorocketmq.cli.shutdown import find_processes, is_server
from tests.support.cluster import (
    BROKER_READY,
    NAMESRV_READY,
    broker_properties,
    start_broker,
    wait_route,
)
from tests.support.mqadmin import Admin
from tests.support.procs import ManagedProcess

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]


def test_mqadmin_alone_lists_the_commands_and_help_shows_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 0
    listing = capsys.readouterr().out
    assert listing.startswith("The most commonly used mqadmin commands are:\n")
    assert "   clusterRT " in listing and "   updateTopic " in listing
    assert "clusterSendMsgRT" not in listing  # an alias, not a second command
    assert listing.rstrip().endswith(
        "See 'mqadmin help <command>' for more information on a specific command."
    )
    assert main(["help"]) == 0
    assert capsys.readouterr().out == listing
    assert main(["help", "updateTopic"]) == 0
    usage = capsys.readouterr().out
    assert usage.startswith("usage: mqadmin updateTopic") and "--clusterName" in usage
    assert main(["help", "noSuchCommand"]) == 2
    assert "The sub command noSuchCommand not exist." in capsys.readouterr().err
    assert main(["help", "UPDATETOPIC"]) == 0  # Java finds commands ignoring case
    assert capsys.readouterr().out == usage


async def start_namesrv_in(
    start_process: StartProcess, tmp_path: Path
) -> tuple[ManagedProcess, str]:
    """A name server whose command line names a file under ``tmp_path`` (for --match)."""
    conf = tmp_path / "ns.properties"
    conf.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n")
    proc = start_process(
        ["-m", "aiorocketmq.cli.namesrv", "-c", str(conf)],
        name="namesrv",
        ready=NAMESRV_READY,
        wait=False,
        env={"HOME": str(tmp_path)},
    )
    return proc, (await proc.wait_ready_async())["addr"]


async def test_cluster_rt_under_both_names_then_mqshutdown(
    start_process: StartProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns_proc, namesrv = await start_namesrv_in(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, "broker-a")
    admin = Admin(capsys, namesrv)
    for name in ("clusterRT", "clusterSendMsgRT"):
        row = await admin.json(name, "-a", "3", "--rounds", "1")  # one broker set, one round
        assert row["brokerName"] == "broker-a" and row["successCount"] == 3, row

    assert find_processes("broker", str(tmp_path)) == [broker.proc.pid]
    assert find_processes("namesrv", str(tmp_path)) == [ns_proc.pid]
    for role, proc in (("broker", broker.proc), ("namesrv", ns_proc)):
        shutdown = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiorocketmq.cli.shutdown", role, "--match", str(tmp_path),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(shutdown.communicate(), 90)
        assert shutdown.returncode == 0, err.decode()
        script = "mqbroker" if role == "broker" else "mqnamesrv"
        assert out.decode().splitlines() == [
            f"The {script}({proc.pid}) is running...",
            f"Send shutdown request to {script}({proc.pid}) OK",
        ]
        # mqshutdown waited for the exit: the child is done, and exited cleanly.
        assert await asyncio.to_thread(proc.popen.wait, 5) == 0
    again = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiorocketmq.cli.shutdown", "broker", "--match", str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await again.communicate()
    assert again.returncode == 1 and out.decode().strip() == "No mqbroker running."


def test_is_server_knows_both_ways_of_starting() -> None:
    assert is_server(["/venv/bin/python", "/venv/bin/mqbroker", "-c", "b.conf"], "broker")
    assert is_server(["python3", "-m", "aiorocketmq.cli.namesrv"], "namesrv")
    assert not is_server(["python3", "-m", "aiorocketmq.cli.namesrv"], "broker")
    assert not is_server(["vim", "notes-about-mqbroker.txt"], "broker")
    assert not is_server(["python", "-m", "pytest", "-k", "mqbroker"], "broker")


async def _run(*argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_mqnamesrv_p_prints_the_config_as_java(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=19876\n")
    code, out, _err = await _run("-m", "aiorocketmq.cli.namesrv", "-c", str(conf), "-p")
    assert code == 0 and "listenPort=19876\n" in out and "kvConfigPath=" in out
    code, out, err = await _run("-m", "aiorocketmq.cli.namesrv", "-p", "9876")
    assert code == 2 and not out
    assert "-p prints the configuration" in err and "--listenPort 9876" in err


async def test_a_latin1_broker_conf_with_escapes_starts_a_broker(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv_in(start_process, tmp_path)
    conf = broker_properties(tmp_path / "brokers", "broker-x", namesrv)
    text = conf.read_text("utf-8").replace("brokerName=broker-x", "brokerName=broker-\\u0078")
    conf.write_bytes(b"# r\xe9glages du courtier (Latin-1)\n" + text.encode("ascii"))
    proc = start_process(
        ["-m", "aiorocketmq.cli.broker", "-c", str(conf)],
        name="broker-x", ready=BROKER_READY, wait=False, env={"HOME": str(tmp_path)},
    )  # fmt: skip
    ready = await proc.wait_ready_async()
    assert ready["name"] == "broker-x"
    route = await wait_route(namesrv, "TBW102", lambda r: bool(r.broker_datas))
    assert [b.broker_name for b in route.broker_datas] == ["broker-x"]
