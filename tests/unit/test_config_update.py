"""What UPDATE_BROKER_CONFIG and UPDATE_NAMESRV_CONFIG share: the body, the black
list and the file merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.common.config_update import (
    black_listed,
    merge_into_properties_file,
    parse_update_body,
)


def test_body_is_properties_text() -> None:
    assert parse_update_body(b"a=1\nb : two\n") == {"a": "1", "b": "two"}
    for bad in (b"", None, b"# only a comment\n", b"\xff\xfe=1"):
        with pytest.raises(ValueError):
            parse_update_body(bad)


def test_black_list_is_semicolon_separated() -> None:
    black = "configBlackList; configStorePath;;kvConfigPath"
    assert black_listed({"kvConfigPath": "x", "a": "1", "configStorePath": "y"}, black) == [
        "configStorePath",
        "kvConfigPath",
    ]
    assert black_listed({"a": "1"}, "") == []


def test_merge_keeps_the_other_keys_and_creates_the_file(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "namesrv.properties"
    merge_into_properties_file(path, {"a": "1"})
    path.write_text(path.read_text() + "# comment\ntls.test.mode.enable=true\n")
    merge_into_properties_file(path, {"a": "2", "b": "3"})
    assert path.read_text() == "a=2\ntls.test.mode.enable=true\nb=3\n"
    assert not path.with_name("namesrv.properties.tmp").exists()
