"""The segment store: spans as sealed Parquet segments in generations, written by any number
of processes and read by any DuckDB without a lock.

What the rest of otel-llm imports from here:

- :mod:`._access` — open, check and prepare a store (``open_store``, ``prepare_for_writing``,
  ``check_store``, ``reader_sql``);
- :mod:`._exporter` — ``SegmentSpanExporter``, the embedded span exporter ``init()`` uses;
- :mod:`._segments` — ``SegmentStore`` (writing, merging, quarantine; ``otel-llm compact``);
- :mod:`._breakdown` — the wall / stall / net breakdown ``otel-llm query`` prints;
- :mod:`._columns` — ``SegmentColumns``, spans as the store's Arrow columns (the Collector
  ingest builds segments with it).

The rest (:mod:`._records`, :mod:`._rows`, :mod:`._merge_plan`) is how those work.
"""
