"""The committed generated modules are exactly what the committed protos give."""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.proxy import codegen


def test_committed_gencode_matches_a_fresh_generation(tmp_path: Path) -> None:
    fresh = codegen.generate(tmp_path)
    assert {p.name for p in fresh} == {
        "definition_pb2.py",
        "definition_pb2.pyi",
        "service_pb2.py",
        "service_pb2.pyi",
    }
    for path in fresh:
        committed = codegen.OUT_DIR / path.name
        assert committed.read_text() == path.read_text(), (
            f"{committed} is stale: run `make proto` (python -m aiorocketmq.proxy.codegen)"
        )


def test_generated_modules_import_as_our_package() -> None:
    from aiorocketmq.proxy.v2 import definition_pb2, service_pb2

    assert service_pb2.DESCRIPTOR.services_by_name["MessagingService"].full_name == (
        "apache.rocketmq.v2.MessagingService"
    )
    assert definition_pb2.Code.Value("MESSAGE_NOT_FOUND") == 40401
