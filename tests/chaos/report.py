"""The one-line report every chaos test prints: acknowledged, consumed, lost,
duplicated, time to resume.

Owns: ``ChaosReport`` (built from the acknowledged keys and a Counter of consumed
keys) and its printed form. Must not: assert anything (the tests do).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["REPORT_LINES", "ChaosReport", "report"]

#: Every report line of this test session, for the terminal summary (tests/chaos/
#: conftest.py): pytest captures the tests' output, the summary is always shown.
REPORT_LINES: list[str] = []


@dataclass(frozen=True)
class ChaosReport:
    """Figures of one chaos run.

    Attributes:
        name: the scenario.
        acknowledged: messages whose send returned SEND_OK.
        consumed: distinct keys consumed.
        lost: acknowledged keys never consumed.
        duplicated: deliveries beyond the first (at-least-once redeliveries).
        resume_s: the scenario's time to resume (None when not measured).
    """

    name: str
    acknowledged: int
    consumed: int
    lost: int
    duplicated: int
    resume_s: float | None

    def line(self) -> str:
        """``chaos <name>: acknowledged=... consumed=... lost=... duplicated=... resume=...``"""
        resume = "n/a" if self.resume_s is None else f"{self.resume_s:.3f}s"
        return (
            f"chaos {self.name}: acknowledged={self.acknowledged} consumed={self.consumed} "
            f"lost={self.lost} duplicated={self.duplicated} resume={resume}"
        )


def report(
    name: str, acked: Iterable[str], consumed: Counter[str], resume_s: float | None
) -> ChaosReport:
    """Build and print the report of ``name``; returns it for the assertions."""
    acked_set = set(acked)
    result = ChaosReport(
        name=name,
        acknowledged=len(acked_set),
        consumed=len(consumed),
        lost=len(acked_set - consumed.keys()),
        duplicated=sum(consumed.values()) - len(consumed),
        resume_s=resume_s,
    )
    print(f"\n{result.line()}")
    REPORT_LINES.append(result.line())
    return result
