"""The timeline a simulator script makes (what the model reads of a scripted attempt)."""

from __future__ import annotations

from otel_llm._tune._hedging_model import Timeline
from otel_llm.simulator._script import Script


def timeline_of(script: Script, floor_s: float = 1.0) -> Timeline:
    """``script``'s attempt as a :class:`Timeline`: its first chunk, every gap longer than
    ``floor_s`` (which must be above the script's chunk interval) and its last chunk."""
    interval = script.chunk_interval_s
    if interval > floor_s:
        raise ValueError(f"a chunk interval of {interval} s is above the floor of {floor_s} s")
    silence = _silence_after(script)
    gaps: list[tuple[float, float]] = []
    silent_before = 0.0
    for index, duration in sorted(silence.items()):
        before = script.first_chunk_delay_s + index * interval + silent_before
        if interval + duration > floor_s:
            gaps.append((before, interval + duration))
        silent_before += duration
    return Timeline(script.first_chunk_delay_s, script.nominal_duration_s, tuple(gaps))


def arrivals(script: Script) -> list[float]:
    """When each of ``script``'s chunks arrives, from the attempt's start (scripted seconds)."""
    silence = _silence_after(script)
    times = [script.first_chunk_delay_s]
    for index in range(script.chunk_count - 1):
        times.append(times[-1] + script.chunk_interval_s + silence.get(index, 0.0))
    return times


def _silence_after(script: Script) -> dict[int, float]:
    """The silence scripted after each chunk (by its index), summed."""
    silence: dict[int, float] = {}
    for item in script.silences:
        silence[item.after_chunk] = silence.get(item.after_chunk, 0.0) + item.duration_s
    return silence
