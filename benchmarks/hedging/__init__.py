"""The hedging model, its frontier chart, and tail latency through the real client."""
