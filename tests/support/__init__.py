"""What the tests share: servers they start (Redis, the simulated provider's processes), stores
and spans they build, a browser for the report, and the benchmarks loaded as modules. A test
file never imports another test file; it imports from here."""
