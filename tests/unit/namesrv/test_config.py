"""NamesrvConfig, the .properties reader, and mqnamesrv's command line (no process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.cli import namesrv as cli
from aiorocketmq.common.properties_file import (
    format_properties,
    format_properties_file,
    parse_properties,
    parse_properties_bytes,
)
from aiorocketmq.namesrv.config import (
    ConfigError,
    NamesrvConfig,
    config_items,
    load_namesrv_config,
)

pytestmark = pytest.mark.timeout(30)


def test_defaults_are_rocketmqs() -> None:
    c = NamesrvConfig()
    assert c.listen_port == 9876
    assert c.kv_config_path == "~/namesrv/kvConfig.json"
    assert c.order_message_enable is False
    assert c.broker_scan_interval_millis == 10_000
    assert c.broker_channel_expired_millis == 120_000
    assert c.config_black_list == "configBlackList;configStorePath;kvConfigPath"
    with pytest.raises(ValueError, match="frozen"):
        c.listen_port = 1  # type: ignore[misc]


def test_one_file_fills_both_models_and_reports_unknown_keys() -> None:
    props = parse_properties(
        "# a stock namesrv.properties plus our keys\n"
        "listenPort = 0\n"
        "orderMessageEnable=true\n"
        "serverChannelMaxIdleTimeSeconds: 30\n"
        "brokerChannelExpiredMillis 500\n"
        "rocketmqHome=/opt/rocketmq\n"
        "typoKey=1\n"
    )
    namesrv, remoting, unknown = load_namesrv_config(props)
    assert namesrv.listen_port == 0 and remoting.listen_port == 0
    assert namesrv.order_message_enable is True
    assert namesrv.broker_channel_expired_millis == 500
    assert remoting.server_channel_max_idle_time_seconds == 30
    assert unknown == ["typoKey"]


def test_overrides_win_over_the_file() -> None:
    namesrv, remoting, _ = load_namesrv_config(
        {"listenPort": "1234", "listenHost": "10.0.0.1"}, {"listen_port": 0, "listen_host": "::1"}
    )
    assert (namesrv.listen_port, namesrv.listen_host) == (0, "::1")
    assert (remoting.listen_port, remoting.listen_host) == (0, "::1")


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"listenPort": "ninety"}, "listenPort='ninety'"),
        ({"listenPort": "70000"}, "listenPort='70000'"),
        ({"orderMessageEnable": "maybe"}, "orderMessageEnable"),
        ({"frameMaxLength": "1"}, "frameMaxLength"),
    ],
)
def test_a_bad_value_names_its_key(props: dict[str, str], key: str) -> None:
    """The error names the key as the file spelled it."""
    with pytest.raises(ConfigError, match=key):
        load_namesrv_config(props)


def test_properties_parser_follows_java_rules() -> None:
    text = (
        "  # comment\n"
        "! another\n"
        "a=1\n"
        "b : two words  \n"
        "c three\n"
        "d=multi\\\n"
        "   line\n"
        "e\\=x=y\n"
        "f=tab\\tand\\u0041\n"
        "g=\n"
        "a=again\n"
        "path=C:\\\\dir\n"
    )
    assert parse_properties(text) == {
        "a": "again",
        "b": "two words",
        "c": "three",
        "d": "multiline",
        "e=x": "y",
        "f": "tab\tandA",
        "g": "",
        "path": "C:\\dir",
    }
    with pytest.raises(ValueError, match="escape"):
        parse_properties("k=\\uZZZZ")


def test_format_properties_and_config_items() -> None:
    assert format_properties({"a": True, "b": 3}) == "a=true\nb=3\n"
    namesrv, remoting, _ = load_namesrv_config({})
    items = dict(config_items(namesrv, remoting))
    assert items["listenPort"] == 9876
    assert items["serverChannelMaxIdleTimeSeconds"] == 120
    assert items["kvConfigPath"] == "~/namesrv/kvConfig.json"


def test_cli_loads_file_flags_and_environment(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=1111\nkvConfigPath=~/kv/kvConfig.json\n")
    args = cli.parse_args(["-c", str(conf), "--listenPort", "0", "--bindAddress", "127.0.0.1"])
    namesrv, remoting, unknown = cli.load_config(args, {"ROCKETMQ_HOME": "/opt/rmq"})
    assert (namesrv.listen_port, namesrv.listen_host) == (0, "127.0.0.1")
    assert remoting.listen_port == 0
    assert not namesrv.kv_config_path.startswith("~")
    assert namesrv.kv_config_path.endswith("kv/kvConfig.json")
    assert namesrv.rocketmq_home == "/opt/rmq"
    assert unknown == []


def test_cli_reports_a_missing_file_and_bad_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["-c", str(tmp_path / "missing.properties")]) == cli.EXIT_BAD_CONFIG
    assert "cannot read" in capsys.readouterr().err
    assert cli.main(["--listenPort", "-5"]) == cli.EXIT_BAD_CONFIG
    assert "listen_port" in capsys.readouterr().err


def test_cli_prints_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--print-config", "--listenPort", "0"]) == 0
    out = capsys.readouterr().out
    assert "listenPort=0\n" in out
    assert "brokerChannelExpiredMillis=120000\n" in out
    assert cli.main(["--print-important"]) == 0
    important = capsys.readouterr().out
    assert "listenPort=9876\n" in important
    assert "productEnvName" not in important


def test_cli_flags_are_java_namesrvstartups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=0\nbindAddress=127.0.0.1\n")
    # -c file, -p print every setting and exit, -n accepted and unused: as Java.
    assert cli.main(["-c", str(conf), "-p", "-n", "10.0.0.1:9876"]) == 0
    out = capsys.readouterr().out
    assert "listenPort=0\n" in out and "listenHost=127.0.0.1\n" in out
    assert cli.main(["--configFile", str(conf), "--printConfigItem"]) == 0
    assert "listenPort=0\n" in capsys.readouterr().out
    assert cli.main(["-m"]) == 0  # important ones only, as mqbroker -m
    assert "productEnvName" not in capsys.readouterr().out


def test_cli_old_port_flag_is_refused_with_the_way_to_set_the_port(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_args(["-p", "9876"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "-p prints the configuration" in err and "--listenPort 9876" in err
    with pytest.raises(SystemExit):
        cli.parse_args(["--bogus"])
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_properties_files_load_as_java_iso_8859_1_with_unicode_escapes(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    # Latin-1 bytes (a Java-edited file), \\u escapes (native2ascii), a comment in
    # UTF-8 that Java reads byte by byte: all load, as in Java.
    conf.write_bytes(
        b"# r\xc3\xa9sum\xc3\xa9 in UTF-8\n"
        b"productEnvName=caf\xe9\n"
        b"kvConfigPath=/data/\\u6d4b\\u8bd5/kv.json\n"
        b"listenPort=0\n"
    )
    args = cli.parse_args(["-c", str(conf)])
    namesrv, _, unknown = cli.load_config(args, {})
    assert namesrv.product_env_name == "caf\u00e9"
    assert namesrv.kv_config_path == "/data/\u6d4b\u8bd5/kv.json"
    assert unknown == []


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "C:\\temp\\new",
        " leading",
        "a=b:c#d!e",
        "caf\u00e9",
        "\u6d4b\u8bd5",
        "\U0001f600",
        "tab\tnl\nend",
    ],
)
def test_files_we_write_read_back_the_same_and_are_ascii(value: str) -> None:
    text = format_properties_file({"key with=sep": value})
    assert text.isascii()
    assert parse_properties_bytes(text.encode("ascii")) == {"key with=sep": value}
