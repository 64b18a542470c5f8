"""``python -m otel_llm._show._dashboards``: write or check the dashboards' files."""

import sys

from otel_llm._show._dashboards._grafana import main

sys.exit(main())
