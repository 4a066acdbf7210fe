"""Chaos tests: their report lines are repeated in the terminal summary, so a plain
`make test` (output captured) still shows acknowledged / consumed / lost /
duplicated / time to resume for every scenario."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.report import REPORT_LINES


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if REPORT_LINES:
        terminalreporter.section("chaos reports")
        for line in REPORT_LINES:
            terminalreporter.write_line(line)
