"""The client soak and the breaker's recovery."""
