"""How a panel's SQL names what Grafana fills in: the time range, the bucket interval, the
template variables and the threshold the stall figures are re-derived at.

A panel query (:mod:`otel_llm._show._dashboards._panels`) is written once against a
:class:`PanelDialect`; the DuckDB and the ClickHouse data source each get their own spelling of the
few constructs their plugins expand differently (:mod:`otel_llm._show._sql._grafana_macros` expands
both exactly as the plugins do):

- time range: ``$__timeFilter(col)`` in both; the lower bound alone is ``$__timeFrom()`` in the
  DuckDB plugin, ``$__fromTime`` in the ClickHouse plugin;
- bucket: DuckDB ``time_bucket`` over ``$__interval_ms``, ClickHouse ``$__timeInterval(col)``;
- a multi-value variable with "All": DuckDB compares against the custom all value
  :data:`ALL_VALUE`, ClickHouse uses its plugin's ``$__conditionalAll``;
- the threshold variable: :data:`AS_MEASURED` reads ``llm_attempts`` (each attempt at the
  threshold it was measured at), any other value ``llm_attempts_at(T)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from otel_llm._show._sql._views import (
    ATTEMPTS_AT,
    ATTEMPTS_VIEW,
    CLICKHOUSE,
    DUCKDB,
    THRESHOLD_PARAMETER,
    WINNERS_AT,
    WINNERS_VIEW,
    ClickHouse,
    Dialect,
)

ALL_VALUE: Final = "'__all__'"
"""The DuckDB dashboards' custom "All" value. Grafana inserts a custom all value as written,
without quoting it, so this is already a SQL literal."""

AS_MEASURED: Final = 0
"""The threshold variable's value for "as measured"."""

SERVICE: Final = "service"
MODEL: Final = "model"
SOURCE: Final = "source"
THRESHOLD: Final = "threshold"
CALL: Final = "trace_id"
"""The template variables, by name: the filters, the stall threshold, the chosen call."""

FILTERS: Final = (SERVICE, MODEL, SOURCE)
"""The multi-value variables every panel filters by (a view column of the same name)."""

DATASOURCE: Final = "datasource"
"""The data source variable every panel and variable names as its data source."""


@dataclass(frozen=True, slots=True)
class PanelDialect:
    """A data source plugin's spelling of what a panel query leaves to Grafana."""

    plugin: str
    """The Grafana data source type."""
    sql: Dialect
    """How the engine spells the rest (views, quantiles, lambdas)."""
    rollup: bool = False
    """The over-time panels read the 1-minute rollups (ClickHouse,
    :mod:`otel_llm._show._sql._rollup`) when they can: as measured, in whole-minute buckets."""
    sqlstring: bool = False
    """The plugin formats a panel's chosen values with Grafana's ``sqlstring`` format, which
    writes a ``"`` in a value as ``\\"`` — two characters to DuckDB, which has no escapes in its
    string literals — so a column is compared in that spelling (the DuckDB plugin; its variable
    queries format values otherwise, keeping ``"``: :meth:`for_variables`)."""

    def for_variables(self) -> PanelDialect:
        """This dialect in a variable's own query, whose values the plugin formats itself."""
        return dataclasses.replace(self, sqlstring=False)

    @property
    def is_clickhouse(self) -> bool:
        return isinstance(self.sql, ClickHouse)

    def relation(self, name: str) -> str:
        return self.sql.relation(name)

    def time_filter(self, column: str) -> str:
        """``column`` within the dashboard's time range."""
        return f"$__timeFilter({column})"

    def since_start(self, column: str) -> str:
        """``column`` at or after the start of the time range."""
        if self.is_clickhouse:
            return f"{column} >= $__fromTime"
        return f"{column} >= $__timeFrom()"

    def bucket(self, column: str) -> str:
        """The start of the time bucket ``column`` falls in (Grafana's interval)."""
        if self.is_clickhouse:
            return f"$__timeInterval({column})"
        return f"time_bucket(to_milliseconds(CAST($__interval_ms AS BIGINT)), {column})"

    def variable(self, name: str) -> str:
        return "${" + name + "}"

    def values(self, name: str) -> str:
        """The chosen values of variable ``name``, whatever they hold (a dashboard URL sets any:
        ``var-source=…``), for the right of an ``IN``: in DuckDB a list of SQL string literals
        (one value in a repeated panel's copy), quoted by the plugin. Grafana has no
        ClickHouse-safe quoting (``singlequote`` leaves a backslash, which then escapes the
        closing quote), so in ClickHouse an array decoded from the ``percentencode`` format,
        which holds only letters, digits, ``-_.~`` and ``%XX``: ``{a,b}`` for several values
        (Grafana's spelling), the value alone for one (a repeated panel's copy). A name with a
        comma, or one in braces, cannot be chosen there (it is read as two, or unbraced), and no
        name changes the SQL."""
        if not self.is_clickhouse:
            return self.variable(name)
        text = "decodeURLComponent('${" + name + ":percentencode}')"
        listed = f"splitByChar(',', substring({text}, 2, length({text}) - 2))"
        braced = f"startsWith({text}, '{{') AND endsWith({text}, '}}')"
        return f"if({braced}, {listed}, [{text}])"

    def literal(self, name: str) -> str:
        """The single value of variable ``name`` as a SQL string literal, whatever it holds (a
        dashboard URL sets any value: ``var-trace_id=…``). The DuckDB plugin quotes every value
        of a panel's query itself (Grafana's ``sqlstring`` format: ``'`` doubled, and DuckDB's
        strings have no escapes). Grafana has no ClickHouse-safe quoting (``singlequote`` leaves
        a backslash, which then escapes the closing quote), so the ClickHouse panels ask for
        the ``percentencode`` format, whose output has only letters, digits, ``-_.~`` and
        ``%XX``: the value as it is when it is a trace id or a number, one that matches nothing
        otherwise, and never SQL."""
        if self.is_clickhouse:
            return "'${" + name + ":percentencode}'"
        if self.sqlstring:
            return self.variable(name)
        return f"'{self.variable(name)}'"  # a variable query's single value: escaped, unquoted

    def number(self, name: str) -> str:
        """The value of variable ``name`` as a 64-bit integer: an error, not SQL, when it is
        not a number (a dashboard URL sets any value: ``var-threshold=…``)."""
        if self.is_clickhouse:
            return f"toInt64({self.literal(name)})"
        return f"CAST({self.literal(name)} AS BIGINT)"

    def matches(self, column: str, name: str) -> str:
        """``column`` is one of the values chosen in the multi-value variable ``name``."""
        values = self.values(name)
        if self.is_clickhouse:
            return f"$__conditionalAll({column} IN ({values}), ${name})"
        return f"({ALL_VALUE} IN ({values}) OR {self.chosen(column, name)})"

    def chosen(self, column: str, name: str) -> str:
        """``column`` is one of the values of variable ``name``, "All" not considered."""
        if self.sqlstring:
            column = f"""replace({column}, '"', '\\"')"""
        return f"{column} IN ({self.values(name)})"

    def filters(self, alias: str = "", *, repeat: str | None = None) -> str:
        """Every filter variable, on the view columns of that name (``alias.`` prefixed).
        ``repeat``: the panel is repeated per value of that variable, which then holds one
        value in each copy (and the ClickHouse plugin's ``$__conditionalAll`` would read the
        dashboard's "All" instead of the copy's value)."""
        prefix = f"{alias}." if alias else ""
        return " AND ".join(
            self.chosen(f"{prefix}{name}", name)
            if name == repeat
            else self.matches(f"{prefix}{name}", name)
            for name in FILTERS
        )

    def attempts(self) -> str:
        """The attempts with their stall figures at the threshold variable."""
        return self._at_threshold(ATTEMPTS_VIEW, ATTEMPTS_AT)

    def winners(self) -> str:
        """Every call's winner with its stall figures at the threshold variable."""
        return self._at_threshold(WINNERS_VIEW, WINNERS_AT)

    def _at_threshold(self, view: str, at: str) -> str:
        """``view`` as measured, or ``at`` (the view re-derived) at the threshold variable."""
        t = self.number(THRESHOLD)
        measured = self.relation(view)
        if self.is_clickhouse:
            rederived = f"{self.relation(at)}({THRESHOLD_PARAMETER}={t})"
        else:
            rederived = f"{at}({t})"
        return (
            f"(SELECT * FROM {measured} WHERE {t} = {AS_MEASURED}\n"
            f"     UNION ALL\n"
            f"     SELECT * FROM {rederived} WHERE {t} <> {AS_MEASURED})"
        )

    def span_key(self, column: str) -> str:
        """A key equal for equal hex span ids and different for different ones: ClickHouse
        matches the id's 8 bytes as a UInt64 several times faster than its 16 characters."""
        return f"reinterpretAsUInt64(unhex({column}))" if self.is_clickhouse else column

    def unnest(self, array: str) -> str:
        """One row per element of ``array`` (in a SELECT list)."""
        return f"arrayJoin({array})" if self.is_clickhouse else f"unnest({array})"

    def total(self, expr: str) -> str:
        """``sum(expr)`` of integers as a 64-bit integer: DuckDB sums to HUGEINT, which the
        DuckDB plugin hands to Grafana as a string."""
        if self.is_clickhouse:
            return f"toInt64(sum({expr}))"
        return f"CAST(sum({expr}) AS BIGINT)"

    def timestamp(self, expr: str) -> str:
        """An instant at the precision both plugins read (DuckDB: TIMESTAMP, microseconds)."""
        return expr if self.is_clickhouse else f"CAST({expr} AS TIMESTAMP)"

    def to_double(self, expr: str) -> str:
        return f"toFloat64({expr})" if self.is_clickhouse else f"CAST({expr} AS DOUBLE)"


DUCKDB_PANELS: Final = PanelDialect("motherduck-duckdb-datasource", DUCKDB, sqlstring=True)
CLICKHOUSE_PANELS: Final = PanelDialect("grafana-clickhouse-datasource", CLICKHOUSE, rollup=True)
CLICKHOUSE_RAW_PANELS: Final = PanelDialect("grafana-clickhouse-datasource", CLICKHOUSE)
"""The ClickHouse panels reading the spans only (what the rollups are checked and timed
against)."""
PANEL_DIALECTS: Final = {"duckdb": DUCKDB_PANELS, "clickhouse": CLICKHOUSE_PANELS}
"""The two data sources, by the folder their dashboards go in."""
