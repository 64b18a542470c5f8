"""``otel-llm report --threshold-ms`` below the store's chunk-event floor: the page carries the
note ``otel-llm query`` prints, and the timeline does not read unknown figures as no stall."""

from __future__ import annotations

from pathlib import Path

from otel_llm._show._report._write import write_report
from otel_llm._show._store._breakdown import below_floor_note
from tests.support.tune_store import Scripted, TuneStore, stream


def _store(path: Path) -> Path:
    """One call recorded at a 1,000 ms threshold (chunk events kept for gaps above 100 ms)
    with a 3 s stall."""
    store = TuneStore(path)
    try:
        arrivals = stream(500.0, 20, 25.0, {5: 3000.0})
        store.call([Scripted(arrivals, arrivals[-1] + 5)])
    finally:
        store.close()
    return path


def test_below_the_floor_the_page_has_the_note_and_says_figures_are_unknown(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path / "s")
    note = below_floor_note(store, 50)
    assert note is not None
    page = write_report(store, tmp_path / "r.html", threshold_ms=50).path.read_text()
    assert "cannot be re-derived" in page
    assert "note: 1 attempts recorded chunk events only for gaps above 100 ms" in page
    assert "No call in this range stalled" not in page
    assert "No chosen call: at 50 ms some calls' stall figures are unknown" in page


def test_at_the_floor_the_stalled_call_is_chosen_and_no_note_is_shown(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    page = write_report(store, tmp_path / "r.html", threshold_ms=100).path.read_text()
    assert "cannot be re-derived" not in page
    assert "the worst stalled call of this range" in page
