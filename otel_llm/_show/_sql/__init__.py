"""The SQL over the spans, for both engines (DuckDB on the store, ClickHouse behind the
Collector), with no I/O of its own.

- :mod:`._table` — the ``otel_traces`` table's columns: the one owner of every column name;
- :mod:`._views` — the views (``llm_calls``, ``llm_attempts``, …) in either dialect;
- :mod:`._schema` — the DuckDB schema and its migrations;
- :mod:`._clickhouse`, :mod:`._exporter_sql` — the ClickHouse schema the Collector writes to;
- :mod:`._exporter_versions` — the exporter versions supported and the check of their columns;
- :mod:`._rollup` — ClickHouse's 1-minute rollups, their views and how a state is read back;
- :mod:`._panel_sql` — the panels' SQL fragments; :mod:`._grafana_macros` — Grafana's macros,
  expanded the way the plugins do (the report runs the dashboards' SQL with them).
"""
