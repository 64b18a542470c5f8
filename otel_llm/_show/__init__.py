"""What shows the figures: where spans are kept and how they are read back.

- :mod:`._store` — the embedded segment store and its span exporter;
- :mod:`._ingest` — the Collector's OTLP files into the store;
- :mod:`._sql` — the table, the views and the panels' SQL, for DuckDB and ClickHouse;
- :mod:`._dashboards` — the Grafana dashboards built from the panels;
- :mod:`._report` — the panels run on the store, as one HTML file.

Lower rooms never import higher ones: ``_sql`` imports nothing here, ``_store`` and
``_ingest`` only ``_sql`` (and ``_store``), the dashboards and the report the rest.
"""
