"""The streaming-telemetry conformance scorecard (``otel_llm.conformance`` against every
instrumentation installed here)."""
