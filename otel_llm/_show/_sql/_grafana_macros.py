"""Grafana's expansion of a panel query, as each data source plugin does it: the template
variables first (Grafana's front end), then the plugin's macros (its back end).

- Variables (Grafana ``templateSrv.replace``): ``$name``, ``${name}`` and
  ``${name:percentencode}`` (``encodeURIComponentStrict``; several values as ``{a,b}``); "All"
  with a custom all value inserts that value as written; otherwise the chosen values are
  formatted by the plugin. The DuckDB plugin formats a panel's query with Grafana's
  ``sqlstring`` (every value quoted, a single one too: ``'a'``, ``'a','b'``, ``'`` doubled,
  ``"`` as ``\\"``) and a
  variable's query with ``@grafana/plugin-ui``'s ``interpolateVariable`` (values of a
  multi-value or include-all variable quoted, a single one only escaped). The ClickHouse plugin
  joins a list as ``'a','b'`` and inserts a single value as it is. A panel's query also has
  ``$__interval_ms`` and ``$__interval`` in its scope, formatted the same way (the DuckDB
  plugin's back end then sees ``'60000'``). Before all that the ClickHouse plugin replaces
  ``$__conditionalAll(cond, $var)`` by ``1=1`` when "All" is chosen, else by ``cond``.
- DuckDB plugin (``sqlds``/``sqlutil`` default macros, its own ``timeFrom``/``timeTo``):
  ``$__timeFilter(c)`` → ``c >= '<from>' AND c <= '<to>'`` (RFC 3339, UTC, whole seconds),
  ``$__timeFrom()`` / ``$__timeTo()`` → ``'<from>'`` / ``'<to>'`` (no argument),
  ``$__interval_ms`` → the interval in milliseconds, ``$__interval`` → ``1m``, ``20s`` ….
- ClickHouse plugin (``pkg/macros``): ``$__timeFilter(c)`` → ``c >= toDateTime(<unix>) AND
  c <= toDateTime(<unix>)``, ``$__fromTime`` / ``$__toTime`` → ``toDateTime(<unix>)``,
  ``$__timeInterval(c)`` → ``toStartOfInterval(toDateTime(c), INTERVAL <s> second)`` with
  ``s`` = max(interval seconds, 1), ``$__interval_s`` → ``s``.

Only these macros are expanded; a query written with any other ``$__name``, or with a variable
that has no value, is an error (:class:`UnexpandedMacro`), so a panel cannot use a macro this
module does not know.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

Engine = Literal["duckdb", "clickhouse"]

ALL: Final = "$__all"
"""Grafana's value of the "All" option."""


class UnexpandedMacro(ValueError):
    """A query names a macro or variable that is not known, or calls one wrongly."""


@dataclass(frozen=True, slots=True)
class Variable:
    """A template variable as a dashboard defines it, with its current value."""

    value: str | tuple[str, ...]
    """The chosen value, or values (a multi-value variable); :data:`ALL` for "All"."""
    multi: bool = False
    include_all: bool = False
    all_value: str | None = None
    """A custom all value (inserted as written), or None: "All" means every option."""
    options: tuple[str, ...] = ()
    """Every option's value, for "All" without a custom all value."""

    @property
    def is_all(self) -> bool:
        values = self.value if isinstance(self.value, tuple) else (self.value,)
        return ALL in values


@dataclass(frozen=True, slots=True)
class QueryContext:
    """What Grafana sends with a query: the time range, the interval, the variables."""

    time_from: datetime
    time_to: datetime
    interval: timedelta
    variables: Mapping[str, Variable] = field(default_factory=dict)


_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)(?::(\w+))?\}")
"""Grafana's ``$name``, ``${name}`` and ``${name:format}``."""


def _percent_encode(value: str | tuple[str, ...], variable: Variable) -> str:
    """Grafana's ``percentencode`` format (``encodeURIComponentStrict``): every UTF-8 byte but
    letters, digits and ``-_.~`` as ``%XX``; several values as ``{a,b}``, encoded so."""
    del variable
    text = value if isinstance(value, str) else "{" + ",".join(value) + "}"
    return urllib.parse.quote(text, safe="-_.~")


_NAMED_FORMATS: Final = {"percentencode": _percent_encode}
"""The ``${name:format}`` formats the panels use (Grafana's registry has more; ``singlequote``
is not one: it leaves a backslash, which then escapes its closing quote in ClickHouse)."""


def _sql_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _format_duckdb(value: str | tuple[str, ...], variable: Variable) -> str:
    """``@grafana/plugin-ui`` ``SqlDatasource.interpolateVariable``: the DuckDB plugin's
    variable queries (``metricFindQuery``)."""
    if isinstance(value, str):
        if variable.multi or variable.include_all:
            return _sql_quote(value)
        return value.replace("'", "''")
    return ",".join(_sql_quote(v) for v in value)


def _sql_string(value: str | tuple[str, ...], variable: Variable) -> str:
    """Grafana's ``sqlstring`` format, which the DuckDB plugin's panel queries use
    (``DuckDBQueryModel.interpolate``): every value quoted, a single one too, ``'`` doubled and
    ``"`` as ``\\"``."""
    del variable
    values = (value,) if isinstance(value, str) else value
    return ",".join("'" + v.replace("'", "''").replace('"', '\\"') + "'" for v in values)


def _format_clickhouse(value: str | tuple[str, ...], variable: Variable) -> str:
    """The ClickHouse plugin's ``format``: a list as ``'a','b'``, a single value as it is."""
    del variable
    if isinstance(value, str):
        return value
    return "'" + "','".join(value) + "'"


Formatter = Callable[[str | tuple[str, ...], Variable], str]

_PANEL_FORMATS: Final[Mapping[Engine, Formatter]] = {
    "duckdb": _sql_string,
    "clickhouse": _format_clickhouse,
}
_VARIABLE_QUERY_FORMATS: Final[Mapping[Engine, Formatter]] = {
    "duckdb": _format_duckdb,
    "clickhouse": _format_clickhouse,
}
_SCOPED: Final = ("__interval_ms", "__interval")
"""The variables Grafana's front end adds to a panel query's scope (and formats as any other)."""


def _scoped(context: QueryContext) -> dict[str, Variable]:
    ms = str(int(context.interval / timedelta(milliseconds=1)))
    return {
        "__interval_ms": Variable(ms),
        "__interval": Variable(format_interval(context.interval)),
    }


def _replace_variables(
    sql: str, context: QueryContext, engine: Engine, *, variable_query: bool
) -> str:
    formats = _VARIABLE_QUERY_FORMATS if variable_query else _PANEL_FORMATS
    formatter = formats[engine]
    scoped = {} if variable_query else _scoped(context)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        variable: Variable | None
        if name in scoped:
            variable = scoped[name]
        elif name.startswith("__"):
            return match.group(0)  # a macro: the back end's
        else:
            variable = context.variables.get(name)
        if variable is None:
            raise UnexpandedMacro(f"no value for the template variable ${name}")
        format_name = match.group(3)
        if format_name is None:
            chosen = formatter
        elif format_name in _NAMED_FORMATS:
            chosen = _NAMED_FORMATS[format_name]
        else:
            raise UnexpandedMacro(f"the variable format :{format_name} is not one the panels use")
        if variable.is_all:
            if variable.all_value is not None:
                return variable.all_value  # a custom all value is inserted as written
            return chosen(variable.options, variable)
        return chosen(variable.value, variable)

    return _VARIABLE.sub(replace, sql)


def _arguments(sql: str, start: int) -> tuple[list[str], int]:
    """The arguments of a macro call at ``sql[start:]`` and the length of the call's
    parenthesis (0 and no arguments when no parenthesis follows), as sqlutil parses them."""
    if not sql.startswith("(", start):
        return [], 0
    depth = 0
    args: list[str] = []
    arg: list[str] = []
    for i in range(start, len(sql)):
        ch = sql[i]
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(arg).strip())
                return args, i + 1 - start
        elif ch == "," and depth == 1:
            args.append("".join(arg).strip())
            arg = []
            continue
        arg.append(ch)
    raise UnexpandedMacro("a macro's argument list has no closing parenthesis")


def _conditional_all(sql: str, context: QueryContext) -> str:
    """The ClickHouse plugin's ``applyConditionalAll``, before the variables."""
    macro = "$__conditionalAll"
    while (at := sql.rfind(macro + "(")) != -1:
        args, length = _arguments(sql, at + len(macro))
        if len(args) != 2:
            raise UnexpandedMacro(f"{macro} takes a condition and a variable, not {args}")
        name = args[1].strip().lstrip("$").strip("{}")
        variable = context.variables.get(name)
        if variable is None:
            raise UnexpandedMacro(f"no value for the template variable ${name}")
        phrase = "1=1" if variable.is_all or variable.value in ("", ()) else args[0]
        sql = sql[:at] + phrase + sql[at + len(macro) + length :]
    return sql


def _rfc3339(moment: datetime) -> str:
    """Go's ``Format(time.RFC3339)`` of the UTC time: whole seconds, a four-digit year."""
    return moment.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


def _unix(moment: datetime) -> int:
    return int(moment.timestamp())


def format_interval(interval: timedelta) -> str:
    """Grafana's ``gtime.FormatInterval``: the largest whole unit (``1m``, ``20s``, ``500ms``)."""
    ms = int(interval / timedelta(milliseconds=1))
    for unit, size in (("y", 365 * 86_400_000), ("d", 86_400_000), ("h", 3_600_000)):
        if ms >= size:
            return f"{ms // size}{unit}"
    for unit, size in (("m", 60_000), ("s", 1000), ("ms", 1)):
        if ms >= size:
            return f"{ms // size}{unit}"
    return "1ms"


Macro = Callable[[QueryContext, list[str]], str]


def _arity(name: str, args: list[str], want: int) -> None:
    got = 0 if args in ([], [""]) else len(args)
    if got != want:
        raise UnexpandedMacro(f"$__{name} takes {want} argument(s), not {got}")


def _duckdb_macros() -> dict[str, Macro]:
    def time_filter(c: QueryContext, args: list[str]) -> str:
        _arity("timeFilter", args, 1)
        col = args[0]
        return f"{col} >= '{_rfc3339(c.time_from)}' AND {col} <= '{_rfc3339(c.time_to)}'"

    def time_from(c: QueryContext, args: list[str]) -> str:
        _arity("timeFrom", args, 0)
        return f"'{_rfc3339(c.time_from)}'"

    def time_to(c: QueryContext, args: list[str]) -> str:
        _arity("timeTo", args, 0)
        return f"'{_rfc3339(c.time_to)}'"

    return {
        "interval_ms": lambda c, _: str(int(c.interval / timedelta(milliseconds=1))),
        "interval": lambda c, _: format_interval(c.interval),
        "timeFilter": time_filter,
        "timeFrom": time_from,
        "timeTo": time_to,
    }


def _seconds(c: QueryContext) -> int:
    return max(int(c.interval.total_seconds()), 1)


def _clickhouse_macros() -> dict[str, Macro]:
    def time_filter(c: QueryContext, args: list[str]) -> str:
        _arity("timeFilter", args, 1)
        col = args[0]
        return (
            f"{col} >= toDateTime({_unix(c.time_from)}) AND {col} <= toDateTime({_unix(c.time_to)})"
        )

    def time_interval(c: QueryContext, args: list[str]) -> str:
        _arity("timeInterval", args, 1)
        return f"toStartOfInterval(toDateTime({args[0]}), INTERVAL {_seconds(c)} second)"

    return {
        "timeFilter": time_filter,
        "timeInterval": time_interval,
        "fromTime": lambda c, _: f"toDateTime({_unix(c.time_from)})",
        "toTime": lambda c, _: f"toDateTime({_unix(c.time_to)})",
        "interval_s": lambda c, _: str(_seconds(c)),
    }


_MACROS: Final[Mapping[Engine, Mapping[str, Macro]]] = {
    "duckdb": _duckdb_macros(),
    "clickhouse": _clickhouse_macros(),
}


def _expand_macros(sql: str, context: QueryContext, engine: Engine) -> str:
    """Longest name first, every call of a name replaced by its expansion (sqlutil's order)."""
    macros = _MACROS[engine]
    for name in sorted(macros, key=len, reverse=True):
        pattern = re.compile(rf"\$__{name}\b")
        while match := pattern.search(sql):
            args, length = _arguments(sql, match.end())
            call = sql[match.start() : match.end() + length]
            sql = sql.replace(call, macros[name](context, args))
    return sql


_FRONT_END_MACROS: Final[Mapping[Engine, frozenset[str]]] = {
    "duckdb": frozenset(),
    "clickhouse": frozenset({"conditionalAll"}),
}


def _check_macros(sql: str, engine: Engine) -> None:
    """Every ``$__name`` the query is written with is a macro of the data source. (A variable's
    value is not checked: Grafana inserts it as it is, and the plugin leaves a ``$__`` it does
    not know in place.)"""
    known = _MACROS[engine].keys() | _FRONT_END_MACROS[engine]
    for match in re.finditer(r"\$__(\w+)", sql):
        if match.group(1) not in known:
            raise UnexpandedMacro(f"{match.group(0)} is not a macro of the {engine} data source")


def expand(sql: str, context: QueryContext, engine: Engine, *, variable_query: bool = False) -> str:
    """``sql`` as the ``engine`` data source runs it in Grafana: a panel's query, or
    (``variable_query``) a template variable's, which the DuckDB plugin formats differently."""
    _check_macros(sql, engine)
    if engine == "clickhouse":
        sql = _conditional_all(sql, context)
    replaced = _replace_variables(sql, context, engine, variable_query=variable_query)
    return _expand_macros(replaced, context, engine)


_NICE_SECONDS: Final = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800)
NICE_INTERVALS: Final = tuple(
    timedelta(seconds=s) for s in (*_NICE_SECONDS, 21600, 43200, 86400, 7 * 86400)
)


def interval_for(time_from: datetime, time_to: datetime, max_points: int = 120) -> timedelta:
    """An interval giving at most about ``max_points`` buckets, rounded up to a round one
    (Grafana's own ``roundInterval`` rounds to the nearest step instead: the report never
    draws more than ``max_points`` buckets)."""
    span = max(time_to - time_from, timedelta(seconds=1))
    raw = span / max_points
    return next((nice for nice in NICE_INTERVALS if nice >= raw), NICE_INTERVALS[-1])


_ROUNDED_MS: Final = (
    (10, 1),
    (15, 10),
    (35, 20),
    (75, 50),
    (150, 100),
    (350, 200),
    (750, 500),
    (1_500, 1_000),
    (3_500, 2_000),
    (7_500, 5_000),
    (12_500, 10_000),
    (17_500, 15_000),
    (25_000, 20_000),
    (45_000, 30_000),
    (90_000, 60_000),
    (210_000, 120_000),
    (450_000, 300_000),
    (750_000, 600_000),
    (1_050_000, 900_000),
    (1_500_000, 1_200_000),
    (2_700_000, 1_800_000),
    (5_400_000, 3_600_000),
    (9_000_000, 7_200_000),
    (16_200_000, 10_800_000),
    (32_400_000, 21_600_000),
    (86_400_000, 43_200_000),
    (604_800_000, 86_400_000),
    (1_814_400_000, 604_800_000),
    (3_628_800_000, 2_592_000_000),
)
"""Grafana's ``rangeutil.roundInterval``: below the first figure (ms), the second; a year
(:data:`_ROUNDED_ABOVE_MS`) above the last."""
_ROUNDED_ABOVE_MS: Final = 31_536_000_000


def grafana_interval(
    time_from: datetime,
    time_to: datetime,
    max_data_points: int,
    min_interval: timedelta | None = None,
) -> timedelta:
    """The interval Grafana gives a panel's query (``rangeutil.calculateInterval``): the range
    over the panel's data points (its width in pixels unless it sets ``maxDataPoints``), rounded
    to the nearest step of its table (6 h over 1,000 px: 21.6 s → 20 s), and never below the
    panel's min interval (``interval`` in its JSON) when it has one."""
    raw_ms = (time_to - time_from) / timedelta(milliseconds=1) / max(max_data_points, 1)
    rounded = next((ms for below, ms in _ROUNDED_MS if raw_ms < below), _ROUNDED_ABOVE_MS)
    interval = timedelta(milliseconds=rounded)
    return max(interval, min_interval) if min_interval is not None else interval


def all_of(options: Sequence[str], *, all_value: str | None = None) -> Variable:
    """A multi-value, include-all variable with "All" chosen."""
    return Variable(ALL, multi=True, include_all=True, all_value=all_value, options=tuple(options))
