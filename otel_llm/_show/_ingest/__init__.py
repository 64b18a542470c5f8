"""OTLP into the store: the Collector's spool files read (:mod:`._otlp_files`, ``Spool``),
their protobuf decoded (:mod:`._otlp_wire`) and turned into the store's rows
(:mod:`._otlp_rows`). ``otel-llm collector`` imports ``Spool``; nothing else is for others."""
