"""Run the suite for one instrumentation: install it, play every case of its wire formats on
virtual time against the simulated provider, judge what it recorded, uninstall it.

One instrumentation per process (``python -m otel_llm.conformance`` starts one for each): the
virtual clocks are process-wide, and an instrumentation that patches an SDK is best measured in
a process no other instrumentation has touched.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from otel_llm.conformance._adapters import Adapter
from otel_llm.conformance._case import Case
from otel_llm.conformance._clocks import install as install_clocks
from otel_llm.conformance._drive import Driven, drive, sdk_for
from otel_llm.conformance._figures import Measured, Verdict, judge
from otel_llm.simulator import SimulatedProvider
from otel_llm.testing import VirtualTimeLoop


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case through one instrumentation, judged."""

    case: str
    wire: str
    kind: str
    verdicts: tuple[Verdict, ...]
    items: int
    """Items the SDK handed to the consumer."""
    raised: str | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the scorecard reads these back with :meth:`from_json`)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseResult:
        """The inverse of :meth:`to_json`."""
        verdicts = tuple(Verdict(**verdict) for verdict in data["verdicts"])
        return cls(
            data["case"], data["wire"], data["kind"], verdicts, data["items"], data["raised"]
        )


def judge_case(adapter: Adapter, case: Case, measured: Measured, driven: Driven) -> CaseResult:
    """What ``adapter`` read for ``case``, judged against the case's expected figures."""
    verdicts = judge(
        case.expected(), case.accepted_reasons(), measured, adapter.measures(case.wire)
    )
    return CaseResult(case.name, case.wire, case.kind, verdicts, driven.items, driven.raised)


async def _play(adapter: Adapter, cases: Sequence[Case], progress: Callable[[str], None]) -> Any:
    clocks = install_clocks()
    clocks.follow(asyncio.get_running_loop())
    telemetry = adapter.telemetry()
    uninstall = adapter.install(telemetry, frozenset(case.wire for case in cases))
    results: list[CaseResult] = []
    sdks: dict[str, Any] = {}
    try:
        async with SimulatedProvider(time_scale=1.0) as provider:
            try:
                for case in cases:
                    sdk = sdks.get(case.wire)
                    if sdk is None:
                        sdk = sdks[case.wire] = sdk_for(case, provider)
                    with telemetry.case(case.name) as recorded:
                        driven = await drive(case, sdk)
                    measured = adapter.read(recorded[0], case)
                    results.append(judge_case(adapter, case, measured, driven))
                    progress(case.name)
            finally:
                for sdk in sdks.values():
                    await sdk.close()
    finally:
        uninstall()
        telemetry.shutdown()
    return results


def run(
    adapter: Adapter, cases: Sequence[Case], progress: Callable[[str], None] = lambda _: None
) -> list[CaseResult]:
    """Every case of ``cases`` on a wire ``adapter`` instruments, judged (see the module)."""
    mine = [case for case in cases if case.wire in adapter.wires]
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(real_io=True)) as runner:
        results: list[CaseResult] = runner.run(_play(adapter, mine, progress))
    return results


def dump(results: Sequence[CaseResult]) -> str:
    """The results as JSON lines."""
    return "\n".join(json.dumps(result.to_json()) for result in results)
