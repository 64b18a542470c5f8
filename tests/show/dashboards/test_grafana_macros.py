"""Grafana's expansion of a panel query (``otel_llm/_show/_sql/_grafana_macros.py``) against the
plugins' own test vectors — grafana-plugin-sdk-go's ``data/sqlutil/macros_test.go`` and
``backend/gtime`` (the DuckDB plugin's macros, with its own ``timeFrom``/``timeTo`` of
``pkg/plugin/duckdb_driver.go``), clickhouse-datasource's ``pkg/macros/macros_test.go`` and the
``$__conditionalAll`` cases of ``src/data/CHDatasource.test.ts`` — exact strings; the
variables as each plugin formats them; errors; and properties over every panel's query."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_llm._show._dashboards._panels import PANELS, worst_trace_ids
from otel_llm._show._sql._grafana_macros import (
    ALL,
    Engine,
    QueryContext,
    UnexpandedMacro,
    Variable,
    all_of,
    expand,
    format_interval,
    grafana_interval,
    interval_for,
)
from otel_llm._show._sql._panel_sql import (
    ALL_VALUE,
    CALL,
    CLICKHOUSE_PANELS,
    DUCKDB_PANELS,
    FILTERS,
    THRESHOLD,
    PanelDialect,
)

ZERO = datetime(1, 1, 1, tzinfo=UTC)
"""Go's zero time.Time, the range of sqlutil's vectors."""
SQLUTIL = QueryContext(ZERO, ZERO, timedelta(minutes=10))
"""sqlutil's TestInterpolate query: no range, a 10-minute interval."""
CH_FROM = datetime(2014, 11, 12, 11, 45, 26, 371000, tzinfo=UTC)
CH_TO = datetime(2015, 11, 12, 11, 45, 26, 371000, tzinfo=UTC)
"""clickhouse-datasource's range (2014-11-12T11:45:26.371Z to a year later)."""


def duck(sql: str, context: QueryContext = SQLUTIL) -> str:
    """The DuckDB plugin's expansion of a variable's query: its back end's macros, after
    ``interpolateVariable`` (no ``$__interval`` in scope, as sqlutil's own tests run)."""
    return expand(sql, context, "duckdb", variable_query=True)


def duck_panel(sql: str, context: QueryContext = SQLUTIL) -> str:
    """The DuckDB plugin's expansion of a panel's query (Grafana's ``sqlstring`` format)."""
    return expand(sql, context, "duckdb")


def clickhouse(sql: str, context: QueryContext) -> str:
    return expand(sql, context, "clickhouse")


# --- sqlutil (the DuckDB plugin's back end) -----------------------------------------------------


ZERO_TEXT = "'0001-01-01T00:00:00Z'"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("select * from foo", "select * from foo"),
        (
            "select * from foo group by bin(time, $__interval)",
            "select * from foo group by bin(time, 10m)",
        ),
        (
            "select count(*) / $__interval_ms * 1000 as qps from foo",
            "select count(*) / 600000 * 1000 as qps from foo",
        ),
        (
            "select * from foo where $__timeFilter(time)",
            f"select * from foo where time >= {ZERO_TEXT} AND time <= {ZERO_TEXT}",
        ),
        (
            "select * from foo where $__timeFilter(cast(sth as timestamp))",
            f"select * from foo where cast(sth as timestamp) >= {ZERO_TEXT} "
            f"AND cast(sth as timestamp) <= {ZERO_TEXT}",
        ),
        (
            "select * from foo where $__timeFilter(cast(sth as timestamp) )",
            f"select * from foo where cast(sth as timestamp) >= {ZERO_TEXT} "
            f"AND cast(sth as timestamp) <= {ZERO_TEXT}",
        ),
        # the name of one macro is the start of another's
        ("select $__interval, $__interval_ms from foo", "select 10m, 600000 from foo"),
        # the same macro several times, with and without space between
        (
            "select '$__timeFrom()' from $__timeTo()",
            f"select '{ZERO_TEXT}' from {ZERO_TEXT}",
        ),
        ("select * from $__timeFrom()$__timeFrom()", f"select * from {ZERO_TEXT}{ZERO_TEXT}"),
        (
            "(select * from $__timeFilter(a) AND $__timeFilter(a))",
            f"(select * from a >= {ZERO_TEXT} AND a <= {ZERO_TEXT} AND "
            f"a >= {ZERO_TEXT} AND a <= {ZERO_TEXT})",
        ),
        (
            "select * from table where ( datetime >= $__timeFrom() ) AND "
            "( datetime <= $__timeTo() ) limit 100",
            f"select * from table where ( datetime >= {ZERO_TEXT} ) AND "
            f"( datetime <= {ZERO_TEXT} ) limit 100",
        ),
        # a function with a comma inside a macro's argument
        (
            "select * from foo where $__timeFilter(FUNC(foo, bar))",
            f"select * from foo where FUNC(foo, bar) >= {ZERO_TEXT} AND "
            f"FUNC(foo, bar) <= {ZERO_TEXT}",
        ),
        # arguments are not taken after a space or another character (sqlds#82)
        (
            "select * from foo where $__timeFrom > $__timeTo",
            f"select * from foo where {ZERO_TEXT} > {ZERO_TEXT}",
        ),
        (
            "select * from foo where $__interval_ms*(table.a + table.b) > 1000000",
            "select * from foo where 600000*(table.a + table.b) > 1000000",
        ),
    ],
)
def test_the_duckdb_plugin_expands_as_sqlutil(sql: str, expected: str) -> None:
    """sqlutil's TestInterpolate cases that use the DuckDB plugin's macros give its strings."""
    assert duck(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "select * from foo where $__timeFilter(whoops",
        "select * from foo where $__timeFilter(FUNC(foo, bar)",
        "select * from foo where $__timeFilter(FUNC(foo, bar)) > $__timeTo(uhoh",
    ],
)
def test_a_missing_close_bracket_is_an_error(sql: str) -> None:
    """A macro's argument list without its closing parenthesis fails (sqlutil errors too)."""
    with pytest.raises(UnexpandedMacro, match="closing parenthesis"):
        duck(sql)


def test_the_duckdb_plugins_time_from_takes_no_argument() -> None:
    """The DuckDB plugin replaces sqlutil's ``$__timeFrom(col)`` by an argument-less one:
    ``$__timeFrom()`` / ``$__timeTo()`` are the bounds as RFC 3339 literals in UTC, whole
    seconds (duckdb_driver.go); an argument, or ``$__timeFilter`` without one, is an error."""
    context = QueryContext(
        datetime(2026, 3, 4, 5, 6, 7, 891000, tzinfo=timezone(timedelta(hours=2))),
        datetime(2026, 3, 4, 9, 0, 0, tzinfo=UTC),
        timedelta(seconds=20),
    )
    assert (
        duck("$__timeFrom() $__timeTo", context) == "'2026-03-04T03:06:07Z' '2026-03-04T09:00:00Z'"
    )
    assert duck("$__timeFrom( )", context) == "'2026-03-04T03:06:07Z'"
    for sql in ("$__timeFrom(time)", "$__timeTo(a, b)", "$__timeFilter()", "$__timeFilter(a, b)"):
        with pytest.raises(UnexpandedMacro, match="argument"):
            duck(sql, context)
    with pytest.raises(UnexpandedMacro, match="argument"):
        duck("$__timeFilter (x)", context)  # sqlutil: a space before "(" means no arguments


@pytest.mark.parametrize(
    ("interval", "text"),
    [
        (timedelta(seconds=61), "1m"),
        (timedelta(milliseconds=30), "30ms"),
        (timedelta(hours=23), "23h"),
        (timedelta(hours=24), "1d"),
        (timedelta(days=367), "1y"),
        (timedelta(microseconds=10), "1ms"),
    ],
)
def test_the_interval_is_formatted_as_gtime(interval: timedelta, text: str) -> None:
    """``$__interval`` is gtime.FormatInterval's text (its TestFormatInterval cases)."""
    assert format_interval(interval) == text
    assert duck("$__interval", QueryContext(ZERO, ZERO, interval)) == text


# --- the ClickHouse plugin ----------------------------------------------------------------------


CH = QueryContext(CH_FROM, CH_TO, timedelta(seconds=20))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "select * from foo where $__timeFilter(cast(sth as timestamp))",
            "select * from foo where cast(sth as timestamp) >= toDateTime(1415792726) "
            "AND cast(sth as timestamp) <= toDateTime(1447328726)",
        ),
        (
            "select * from foo where $__timeFilter(cast(sth as timestamp) )",
            "select * from foo where cast(sth as timestamp) >= toDateTime(1415792726) "
            "AND cast(sth as timestamp) <= toDateTime(1447328726)",
        ),
        (
            "select * from foo where ( date >= $__fromTime and date <= $__toTime ) limit 100",
            "select * from foo where ( date >= toDateTime(1415792726) and "
            "date <= toDateTime(1447328726) ) limit 100",
        ),
        (
            "select * from foo where ( date >= $__fromTime ) and ( date <= $__toTime ) limit 100",
            "select * from foo where ( date >= toDateTime(1415792726) ) and "
            "( date <= toDateTime(1447328726) ) limit 100",
        ),
        ("$__timeInterval(col)", "toStartOfInterval(toDateTime(col), INTERVAL 20 second)"),
        ("$__interval_s", "20"),
    ],
)
def test_the_clickhouse_plugin_expands_as_its_tests(sql: str, expected: str) -> None:
    """macros_test.go: timeFilter, fromTime/toTime, timeInterval, interval_s."""
    assert clickhouse(sql, CH) == expected


def test_nested_clickhouse_macros_expand() -> None:
    """TestInterpolateNestedMacros: a macro inside another's argument expands too."""
    minute = QueryContext(CH_FROM, CH_TO, timedelta(minutes=1))
    assert (
        clickhouse("SELECT $__timeInterval($__fromTime) AS from_time", minute)
        == "SELECT toStartOfInterval(toDateTime(toDateTime(1415792726)), INTERVAL 60 second) "
        "AS from_time"
    )
    assert (
        clickhouse("select * from foo where $__timeFilter(coalesce(closed_at, $__toTime))", minute)
        == "select * from foo where coalesce(closed_at, toDateTime(1447328726)) >= "
        "toDateTime(1415792726) AND coalesce(closed_at, toDateTime(1447328726)) <= "
        "toDateTime(1447328726)"
    )


def test_the_clickhouse_interval_is_at_least_a_second() -> None:
    """TimeInterval takes max(interval seconds, 1)."""
    short = QueryContext(CH_FROM, CH_TO, timedelta(milliseconds=200))
    assert clickhouse("$__timeInterval(t) $__interval_s", short).endswith("INTERVAL 1 second) 1")


@pytest.mark.parametrize("sql", ["$__timeFilter()", "$__timeFilter", "$__timeInterval(a, b)"])
def test_clickhouse_macros_check_their_arity(sql: str) -> None:
    """TestMacroErrorsAreDownstream: timeFilter and timeInterval take one argument."""
    with pytest.raises(UnexpandedMacro, match="argument"):
        clickhouse(sql, CH)


# --- $__conditionalAll (CHDatasource.test.ts) ---------------------------------------------------


def picked(*values: str) -> Variable:
    return Variable(tuple(values), multi=True, include_all=True)


def test_conditional_all_is_true_when_all_is_chosen() -> None:
    """'should replace $__conditionalAll with 1=1 when all is selected'."""
    context = QueryContext(CH_FROM, CH_TO, CH.interval, {"fieldVal": Variable(ALL)})
    sql = "select stuff from table where $__conditionalAll(fieldVal in ($fieldVal), $fieldVal);"
    assert clickhouse(sql, context) == "select stuff from table where 1=1;"


def test_conditional_all_keeps_the_condition_otherwise() -> None:
    """'…with arg when anything else is selected' and 'should replace all $__conditionalAll'
    (then the variables are formatted: a list as 'a','b'); an empty choice counts as All."""
    variables = {"fieldVal": picked("val1", "val2"), "fieldVal2": all_of(("x", "y"))}
    context = QueryContext(CH_FROM, CH_TO, CH.interval, variables)
    sql = (
        "select stuff from table where $__conditionalAll(fieldVal in ($fieldVal), $fieldVal) "
        "and $__conditionalAll(fieldVal in ($fieldVal2), ${fieldVal2});"
    )
    assert (
        clickhouse(sql, context)
        == "select stuff from table where fieldVal in ('val1','val2') and 1=1;"
    )
    assert clickhouse("$__conditionalAll(foo, $fieldVal)", context) == "foo"
    empty = QueryContext(CH_FROM, CH_TO, CH.interval, {"v": Variable(())})
    assert clickhouse("$__conditionalAll(c IN ($v), $v)", empty) == "1=1"


def test_conditional_all_needs_a_condition_and_a_known_variable() -> None:
    """Two arguments, the second a variable with a value."""
    context = QueryContext(CH_FROM, CH_TO, CH.interval, {"v": picked("a")})
    with pytest.raises(UnexpandedMacro, match="condition and a variable"):
        clickhouse("$__conditionalAll(c IN ($v))", context)
    with pytest.raises(UnexpandedMacro, match=r"\$nope"):
        clickhouse("$__conditionalAll(c IN ($nope), $nope)", context)


# --- the variables --------------------------------------------------------------------------------


def test_duckdb_quotes_each_value_of_a_multi_value_variable() -> None:
    """@grafana/plugin-ui's interpolateVariable: each value of a multi-value or include-all
    variable quoted, quotes doubled; a single value of a plain variable escaped, not quoted;
    "All" with a custom all value inserts it as written, without one every option."""
    variables = {
        "m": picked("a", "it's"),
        "one": Variable("it's", multi=True),
        "plain": Variable("it's"),
        "all": all_of(("x", "y"), all_value=ALL_VALUE),
        "every": all_of(("x", "o'k")),
    }
    context = QueryContext(ZERO, ZERO, SQLUTIL.interval, variables)
    assert duck("($m) $one $plain ${all} ($every)", context) == (
        "('a','it''s') 'it''s' it''s '__all__' ('x','o''k')"
    )


def test_duckdb_panels_quote_every_value_as_sqlstring() -> None:
    """A panel's query goes through DuckDBQueryModel.interpolate, Grafana's ``sqlstring``
    format (its formatValue tests): every value quoted, a single one of a plain variable too,
    ``'`` doubled, ``"`` as ``\\"``; the scoped ``$__interval_ms`` and ``$__interval`` as well;
    a custom all value still as written."""
    variables = {
        "m": picked("test", "test'value2", 'test"value3'),
        "plain": Variable("test'value"),
        "dq": Variable('test"value'),
        "all": all_of(("x", "y"), all_value=ALL_VALUE),
    }
    context = QueryContext(ZERO, ZERO, SQLUTIL.interval, variables)
    assert duck_panel("($m) $plain ${dq} $all $__interval_ms $__interval", context) == (
        "('test','test''value2','test\\\"value3') 'test''value' 'test\\\"value' '__all__' "
        "'600000' '10m'"
    )
    assert duck("$plain $__interval_ms", context) == "test''value 600000"


def test_clickhouse_joins_values_as_its_format_does() -> None:
    """CHDatasource.format: a list as 'a','b' (values inserted as they are: the plugin does
    not escape them), a single value as it is; "All" without a custom value: every option."""
    variables = {"m": picked("a", "b"), "one": Variable("7"), "all": all_of(("x", "y"))}
    context = QueryContext(CH_FROM, CH_TO, CH.interval, variables)
    assert clickhouse("$m ${one} $all", context) == "'a','b' 7 'x','y'"
    quoted = QueryContext(CH_FROM, CH_TO, CH.interval, {"m": picked("it's")})
    assert clickhouse("$m", quoted) == "'it's'"


def test_unknown_macros_and_variables_are_errors() -> None:
    """A macro the plugin does not have, or a variable without a value, fails the expansion
    instead of reaching the database."""
    for engine, sql in (
        ("duckdb", "$__timeGroup(t, 1m)"),
        ("duckdb", "$__fromTime"),
        ("duckdb", "$__conditionalAll(a, $b)"),
        ("clickhouse", "$__timeFrom()"),
        ("clickhouse", "$__timeFilterEpoch(t)"),
    ):
        with pytest.raises(UnexpandedMacro, match="is not a macro"):
            expand(sql, SQLUTIL, engine)  # type: ignore[arg-type]
    for engine in ("duckdb", "clickhouse"):
        with pytest.raises(UnexpandedMacro, match=r"\$missing"):
            expand("select ${missing}", SQLUTIL, engine)  # type: ignore[arg-type]


def test_a_value_is_inserted_once_not_expanded_again() -> None:
    """Grafana replaces the variables in one pass: a value that looks like a variable stays
    text (in its quotes)."""
    context = QueryContext(ZERO, ZERO, SQLUTIL.interval, {"m": picked("$m", "a$b")})
    assert duck("x IN ($m)", context) == "x IN ('$m','a$b')"


def test_interval_for_rounds_up_to_a_round_interval() -> None:
    """At most about 120 buckets over the range, on a round interval."""
    day = datetime(2026, 1, 1, tzinfo=UTC)
    assert interval_for(day, day + timedelta(hours=24)) == timedelta(minutes=15)
    assert interval_for(day, day + timedelta(hours=6)) == timedelta(minutes=5)
    assert interval_for(day, day) == timedelta(seconds=1)


# --- properties over every panel ----------------------------------------------------------------


hostile = st.lists(
    st.sampled_from([*"ab'\"\\;-/*()[]{},%_ \n\t", "é", "--", "/*", "')", "' OR 1=1 --"]),
    max_size=8,
).map("".join)
"""Values with quotes, comment markers, parentheses, an injection attempt."""
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


def _variables(engine: Engine, chosen: dict[str, list[str]], threshold: int) -> dict[str, Variable]:
    all_value = ALL_VALUE if engine == "duckdb" else None
    found = {
        name: (
            Variable(tuple(chosen[name]), True, True, all_value)
            if chosen.get(name)
            else all_of(("x",), all_value=all_value)
        )
        for name in FILTERS
    }
    found[THRESHOLD] = Variable(str(threshold))
    found[CALL] = Variable("0af7651916cd43dd8448eb211c80319c")
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=moments,
    span=st.integers(1, 30 * 86_400),
    chosen=st.dictionaries(
        st.sampled_from(FILTERS), st.lists(hostile.filter(lambda v: "$" not in v), max_size=3)
    ),
    threshold=st.integers(0, 60_000),
)
def test_every_panel_expands_fully(
    start: datetime, span: int, chosen: dict[str, list[str]], threshold: int
) -> None:
    """Whatever the range, interval, filters and threshold, every panel's query (and the
    chosen-call variable's) expands in both plugins to SQL with no ``$`` left; DuckDB parses
    each one as a single statement (the values quoted, not injected)."""
    end = start + timedelta(seconds=span)
    engines: list[tuple[Engine, PanelDialect]] = [
        ("duckdb", DUCKDB_PANELS),
        ("clickhouse", CLICKHOUSE_PANELS),
    ]
    for engine, dialect in engines:
        context = QueryContext(
            start, end, interval_for(start, end), _variables(engine, chosen, threshold)
        )
        queries = [(panel.sql(dialect), False) for panel in PANELS]
        for sql, variable_query in [*queries, (worst_trace_ids(dialect), True)]:
            expanded = expand(sql, context, engine, variable_query=variable_query)
            assert "$" not in expanded
            if engine == "duckdb":
                assert len(duckdb.extract_statements(expanded)) == 1


@settings(max_examples=100, deadline=None)
@given(values=st.lists(hostile, min_size=1, max_size=4), other=hostile)
def test_hostile_values_are_quoted_by_duckdb(values: list[str], other: str) -> None:
    """A multi-value variable's values reach DuckDB as the literals they are: ``v IN ($var)``
    is true for each chosen value and false for any other, however the value is spelled."""
    context = QueryContext(ZERO, ZERO, SQLUTIL.interval, {"v": picked(*values)})
    conn = duckdb.connect()
    listed = duck("SELECT ? IN ($v), ? IN ($v)", context)
    (chosen, unchosen) = conn.execute(listed, [values[0], other]).fetchone() or ()
    assert chosen is True
    assert unchosen is (other in values)
    conn.close()


@settings(max_examples=100, deadline=None)
@given(values=st.lists(hostile.filter(lambda v: '"' not in v), min_size=1, max_size=4))
def test_duckdb_panels_compare_the_chosen_values(values: list[str]) -> None:
    """In a panel's query, ``col IN ($var)`` matches exactly the chosen values and
    ``col = $one`` the single one, however they are spelled (but for ``"``: Grafana's
    ``sqlstring`` writes it as ``\\"``, which DuckDB reads as two characters)."""
    context = QueryContext(
        ZERO, ZERO, SQLUTIL.interval, {"v": picked(*values), "one": Variable(values[0])}
    )
    conn = duckdb.connect()
    sql = duck_panel("SELECT list_sort([x FOR x IN ? IF x IN ($v)]), ? = $one", context)
    (matched, same) = conn.execute(sql, [values, values[0]]).fetchone() or ()
    assert matched == sorted(values)
    assert same is True
    conn.close()


@settings(max_examples=100, deadline=None)
@given(values=st.lists(hostile, min_size=1, max_size=4), other=hostile)
def test_duckdb_panel_filters_match_names_with_any_character(values: list[str], other: str) -> None:
    """The panels' filter (:meth:`PanelDialect.matches`, and a repeated copy's) matches exactly
    the chosen names, ``"`` too, which Grafana's ``sqlstring`` writes as ``\\"``; a variable's
    own query, whose values the plugin formats otherwise, matches them as well."""
    conn = duckdb.connect()
    for chosen in (values, [values[0]]):
        context = QueryContext(ZERO, ZERO, SQLUTIL.interval, {"v": picked(*chosen)})
        for dialect, expand_as in (
            (DUCKDB_PANELS, duck_panel),
            (DUCKDB_PANELS.for_variables(), duck),
        ):
            for condition in (dialect.matches("x", "v"), dialect.chosen("x", "v")):
                sql = expand_as(f"SELECT list_sort([x FOR x IN ? IF {condition}])", context)
                (matched,) = conn.execute(sql, [[*values, other]]).fetchone() or ()
                want = sorted(x for x in [*values, other] if x in chosen)
                assert matched == want, (dialect.sqlstring, condition, sql)
    conn.close()


@pytest.mark.parametrize(
    ("raw_ms", "rounded_ms"),
    [
        (9, 1),
        (14, 10),
        (89_999, 60_000),
        (90_000, 120_000),
        (27_000_000, 21_600_000),
        (32_399_999, 21_600_000),
        (32_400_000, 43_200_000),
        (86_400_000, 86_400_000),
        (604_800_000, 604_800_000),
        (1_814_400_000, 2_592_000_000),
        (3_628_800_000, 31_536_000_000),
    ],
)
def test_grafana_rounds_the_interval_by_its_own_table(raw_ms: int, rounded_ms: int) -> None:
    """``rangeutil.roundInterval``'s steps, at their edges (one data point over the range)."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(milliseconds=raw_ms)
    assert grafana_interval(start, end, 1) == timedelta(milliseconds=rounded_ms)
