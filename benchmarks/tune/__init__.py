"""``otel-llm tune`` against ground truth."""
