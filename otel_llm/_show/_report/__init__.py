"""``otel-llm report``: the dashboards' panels run on the store (:mod:`._data`: ``collect``,
``TimeRange``), drawn into one self-contained HTML page (:mod:`._html`, :mod:`._charts`,
:mod:`._hedging`) and written whole (:mod:`._write`: ``write_report``). Others import
:mod:`._write` and :mod:`._data` only."""
