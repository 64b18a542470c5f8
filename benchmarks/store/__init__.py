"""The embedded store, the dashboard queries, the Collector ingest, the report size."""
