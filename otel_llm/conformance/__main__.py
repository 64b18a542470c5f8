"""``python -m otel_llm.conformance``: see :mod:`otel_llm.conformance._cli`."""

from otel_llm.conformance._cli import main

raise SystemExit(main())
