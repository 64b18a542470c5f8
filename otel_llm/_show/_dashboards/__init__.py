"""The Grafana dashboards: the panels (:mod:`._panels`, the one specification the report runs
too) and the dashboard and provisioning files built from them (:mod:`._grafana`).

``python -m otel_llm._show._dashboards [ROOT] [--check]`` writes (or checks) ``dashboards/``.
"""
