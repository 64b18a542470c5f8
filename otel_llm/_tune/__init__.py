"""Hedge settings from recorded traffic: the zero-overhead hedging model and ``otel-llm tune``."""
