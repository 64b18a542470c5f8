"""``python -m otel_llm.conformance``: see :mod:`otel_llm.conformance._cli`."""

import os
import sys

from otel_llm.conformance._cli import main

try:
    status = main()
    sys.stdout.flush()
except BrokenPipeError:  # the reader went away (``… --list | head``): end quietly
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
raise SystemExit(status)
