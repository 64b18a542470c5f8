"""The scripted ground truth of one answer: what an honest meter must measure for a script.

A meter that receives a scripted stream on time measures the gaps between the chunk events it
receives (each wait in real seconds is ``time_scale ×`` the scripted one, at most
:data:`MAX_WAIT_S`), so its figures at a threshold follow from the script alone (a stall is a gap
strictly longer than the threshold). Every wire format plays a script on the same timeline; a
format that does not send some scripted chunks as chunk events (Gemini's tool call, see
``Wire.chunk_indices``) has fewer chunks whose gaps add up the gaps between them — ``wire`` says
which format is measured. A loaded machine delivers late: a measured gap may differ from the
scripted one by the scheduler's delay, so a scripted gap within ``band_s`` of the threshold may be
counted either way — :class:`ScriptedFigures` says how many there are instead of pretending to a
precision the machine cannot give.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from otel_llm.simulator._script import Script
from otel_llm.simulator._server import MAX_WAIT_S, WIRES
from otel_llm.simulator._wire import WireName


@dataclass(frozen=True, slots=True)
class ScriptedFigures:
    """The figures a script dictates at one stall threshold, in real seconds."""

    wall_s: float
    """Request to the end of the stream: hold, first-chunk delay, every gap, a tail silence."""
    stall_s: float
    """Sum of the scripted gaps strictly longer than the threshold."""
    stall_count: int
    """Number of those gaps."""
    longest_gap_s: float
    """The longest scripted gap (0 for a stream of fewer than two chunks)."""
    near_count: int
    """Scripted gaps closer than ``band_s`` to the threshold: a meter may count these either
    way."""
    near_s: float
    """Sum of those gaps."""
    near_stall_count: int
    """How many of the near gaps are scripted stalls (longer than the threshold)."""
    near_stall_s: float
    """Sum of those."""
    chunk_count: int
    """Chunk events of the whole answer on the wire format measured (on chat completions, one
    per choice at each scripted chunk: the gaps between the choices' chunks of one moment are
    zero, so the stall figures are those of one choice)."""
    ttft_s: float | None
    """Request to the first chunk event (hold included); ``None`` without a chunk."""

    @property
    def stall_count_range(self) -> tuple[int, int]:
        """Fewest and most stalls a meter within the band can count."""
        return self.stall_count - self.near_stall_count, (
            self.stall_count - self.near_stall_count + self.near_count
        )


def _real(scripted_s: float, time_scale: float) -> float:
    return min(MAX_WAIT_S, scripted_s * time_scale)


def chunk_indices(script: Script, wire: WireName = "chat") -> tuple[int, ...]:
    """The scripted chunks ``wire`` sends as chunk events (every one, but for Gemini's tool
    call)."""
    return WIRES[wire].chunk_indices(script)


def sent_chunks(script: Script) -> tuple[int, bool]:
    """How many of the scripted chunks a provider sends, and whether the stream runs to its
    end: an error answer (``error_status``) sends none; a ``truncate``, ``error`` or ``reset``
    fault ends the stream right after chunk ``fault_after_chunk`` (none for -1), before any
    silence after it; a ``malformed`` line cuts nothing from what is sent (a client that gives
    the attempt up at it, as otel-llm's ``Client`` does, sees chunks 0…k only)."""
    if script.error_status is not None:
        return 0, False
    if script.fault in ("truncate", "error", "reset"):
        return script.fault_after_chunk + 1, False
    return script.chunk_count, True


def scripted_figures(
    script: Script,
    *,
    threshold_s: float,
    time_scale: float = 1.0,
    band_s: float = 0.0,
    wire: WireName = "chat",
) -> ScriptedFigures:
    """The stall figures ``script`` dictates at ``threshold_s`` (real seconds) when served at
    ``time_scale`` on ``wire``, up to where a fault ends the stream (:func:`sent_chunks`);
    gaps within ``band_s`` of the threshold are counted apart as *near*."""
    after: dict[int, list[float]] = {}
    for silence in script.silences:
        after.setdefault(silence.after_chunk, []).append(_real(silence.duration_s, time_scale))
    interval = _real(script.chunk_interval_s, time_scale)
    count, whole = sent_chunks(script)
    scripted = [interval + sum(after.get(index, ())) for index in range(max(0, count - 1))]
    tail = sum(after.get(count - 1, ())) if count and whole else 0.0
    start = _real(script.hold_s, time_scale)
    if script.error_status is None:
        start += _real(script.first_chunk_delay_s, time_scale)
    wall = start + sum(scripted) + tail
    sent = [index for index in chunk_indices(script, wire) if index < count]
    gaps = [sum(scripted[earlier:later]) for earlier, later in itertools.pairwise(sent)]
    stalls = [gap for gap in gaps if gap > threshold_s]
    near = [gap for gap in gaps if abs(gap - threshold_s) < band_s]
    near_stalls = [gap for gap in near if gap > threshold_s]
    return ScriptedFigures(
        wall_s=wall,
        stall_s=sum(stalls),
        stall_count=len(stalls),
        longest_gap_s=max(gaps, default=0.0),
        near_count=len(near),
        near_s=sum(near),
        near_stall_count=len(near_stalls),
        near_stall_s=sum(near_stalls),
        chunk_count=len(sent) * (script.choices if wire == "chat" else 1),
        ttft_s=start + sum(scripted[: sent[0]]) if sent else None,
    )
