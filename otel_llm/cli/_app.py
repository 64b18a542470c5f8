"""The typer application behind the ``otel-llm`` command."""

from __future__ import annotations

import asyncio
import importlib.util
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import duckdb
import typer
from rich.console import Console
from rich.markup import escape

from otel_llm._defaults import DEFAULTS
from otel_llm._env import OTEL_LLM_DB
from otel_llm._errors import OtelLLMError
from otel_llm._extras import install_hint
from otel_llm._show._store._access import check_store, read_again_after_damage, reader_sql
from otel_llm._show._store._breakdown import (
    below_floor_note,
    breakdown_sql,
    run_query,
    worst_stalls_sql,
)
from otel_llm._show._store._segments import SegmentStore
from otel_llm._telemetry import store_path
from otel_llm.cli import VERSION_FLAG, version_line
from otel_llm.cli._render import Format, Output

TUNE_SEED = 1
"""``otel-llm tune --seed`` when not given (``otel_llm._tune._replay.DEFAULT_SEED``)."""
DEMO_CALLS = 100
DEMO_CONCURRENCY = 50
DEMO_TIME_SCALE = 0.2

app = typer.Typer(
    name="otel-llm",
    help="Where the time of every streamed LLM call goes: first chunk, generation, stalls.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # docstrings are prose: their lines rewrap to the terminal
)

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help=f"The store (default: ${OTEL_LLM_DB} or ./{DEFAULTS.db_path})."),
]


def _db(path: Path | None) -> Path:
    return path or store_path()


def _need_simulator() -> None:
    """The simulated provider needs aiohttp, the ``testing`` extra: say so, not a traceback."""
    if importlib.util.find_spec("aiohttp") is None:
        raise _fail(
            f"the simulated provider needs aiohttp: {install_hint('testing')}",
        )


def _failed(exc: BaseException) -> typer.Exit:
    """:func:`_fail` with the error's text — but a reader that went away (``otel-llm query |
    head -1``: a broken pipe) is no error of the command's: it is raised on, and the command
    line ends quietly, as it does for any command whose output is cut short."""
    if isinstance(exc, BrokenPipeError):
        raise exc
    return _fail(str(exc))


def _fail(message: str) -> typer.Exit:
    """Say what went wrong on standard error; the command exits with code 2."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"[bold red]error:[/bold red] {escape(message)}", markup=True
    )
    return typer.Exit(code=2)


FormatOption = Annotated[
    Format,
    typer.Option(
        "--format",
        case_sensitive=False,
        help="table (fits the terminal), csv (RFC 4180), json (one array of objects), markdown.",
    ),
]
WidthOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Cells a table may use (default: the terminal's width; in a pipe $COLUMNS, "
        "else no limit; 0: no limit).",
    ),
]


DEMO_TOO_BUSY_EXIT = 3
"""Exit code of a demo that ran but could not measure honestly (the machine was too busy)."""


@app.command()
def demo(
    db: Annotated[
        Path | None,
        typer.Option(
            "--db",
            help=f"The store to add this run's spans to; earlier runs stay in it, the demo's "
            f"tables show this run only (default: ${OTEL_LLM_DB} or ./{DEFAULTS.db_path}).",
        ),
    ] = None,
    calls: Annotated[
        int, typer.Option(min=1, max=10_000, help="Streamed calls to run.")
    ] = DEMO_CALLS,
    concurrency: Annotated[
        int, typer.Option(min=1, max=1000, help="Calls in flight at once.")
    ] = DEMO_CONCURRENCY,
    time_scale: Annotated[
        float,
        typer.Option(
            min=0.01,
            max=1.0,
            help="Real seconds per simulated second: 0.2 runs the providers 5x faster, 0.05 "
            "20x faster, 1 in real time. The stall threshold scales with it (1000 ms x F); a "
            "larger F takes longer and measures honestly on a busier machine.",
        ),
    ] = DEMO_TIME_SCALE,
    seed: Annotated[
        int,
        typer.Option(help="Seed of the simulated providers: the same seed draws the same calls."),
    ] = 1,
    output_format: Annotated[
        Format,
        typer.Option(
            "--format",
            case_sensitive=False,
            help="Of the tables: table, markdown, or csv / json (then the breakdown alone on "
            "standard output, everything else on standard error).",
        ),
    ] = Format.TABLE,
    width: WidthOption = None,
    via_collector: Annotated[
        bool,
        typer.Option(
            "--via-collector",
            help="Send the spans over OTLP through the OpenTelemetry Collector (built on "
            "first use), which lands them in the store, instead of writing the store here.",
        ),
    ] = False,
    report_path: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help=f"Where to write the report of the store after the run (default: "
            f"{DEFAULTS.report_name} beside the store).",
        ),
    ] = None,
    no_report: Annotated[
        bool, typer.Option("--no-report", help="Do not write the report.")
    ] = False,
    no_hedge: Annotated[
        bool,
        typer.Option(
            "--no-hedge",
            help="Do not hedge: record unhedged traffic, every completed call of which "
            "otel-llm tune can replay.",
        ),
    ] = False,
    providers: Annotated[
        str,
        typer.Option(
            "--providers",
            help="The APIs the two simulated providers speak, primary first, of openai "
            "(OpenAI-compatible chat completions), anthropic and gemini: openai,anthropic "
            "hedges and fails over from one API to the other.",
        ),
    ] = "openai,openai",
) -> None:
    """Run streamed calls against simulated providers and show where their time went.

    Checks the figures against what the providers scripted (exit code 3 when the machine was
    too busy to measure honestly) and writes the report of the store (`otel-llm report`)."""
    out = Output.stdout(output_format, width)
    console = Console(stderr=output_format.one_table)
    _need_simulator()
    from otel_llm.cli._demo import DemoOptions, run_demo, unwritable

    path = _db(db)
    problem = unwritable(path)
    if problem is not None:
        raise _fail(f"cannot write the demo's spans to {path}: {problem}; pass --db PATH")
    from otel_llm.cli._demo import parse_apis

    try:
        apis = parse_apis(providers)
    except ValueError as exc:
        raise _fail(f"--providers: {exc}") from None
    options = DemoOptions(
        path,
        calls,
        concurrency,
        time_scale,
        seed,
        via_collector=via_collector,
        hedge=not no_hedge,
        apis=apis,
    )
    if report_path is not None and no_report:
        raise _fail("--report and --no-report exclude each other")
    if not no_report:
        from otel_llm._show._report._html import check_runtime
        from otel_llm._show._report._write import check_output, default_output

        try:
            check_output(report_path or default_output(path))
        except OtelLLMError as exc:
            raise _fail(f"cannot write the demo's report: {exc}; pass --report PATH") from exc
        try:
            check_runtime()
        except OtelLLMError as exc:
            console.print(f"No report at the end: {escape(str(exc))}", soft_wrap=True)
            no_report = True
    try:
        honest = asyncio.run(run_demo(options, console, out))
    except (OtelLLMError, duckdb.Error) as exc:
        raise _failed(exc) from exc
    if not honest:
        raise typer.Exit(code=DEMO_TOO_BUSY_EXIT)
    if not no_report:
        written = _write_report(path, report_path)
        console.print(
            f"The report of every run in the store (open it in a browser, offline):\n"
            f"  [bold]{escape(str(written))}[/bold]\n"
            f"  (again, any time: otel-llm report --db {escape(str(path))})",
            soft_wrap=True,
        )


SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="The range to show: a duration back from now (15m, 6h, 7d) or an ISO 8601 time "
        "(2026-01-31T12:00Z); default: everything in the store.",
    ),
]


@app.command()
def query(
    sql: Annotated[str | None, typer.Argument(help="SQL to run; omit for the breakdown.")] = None,
    db: DbOption = None,
    threshold_ms: Annotated[
        int | None,
        typer.Option(help="Re-derive stalls at this threshold (ms) from the chunk events."),
    ] = None,
    worst_stalls: Annotated[
        bool,
        typer.Option(
            "--worst-stalls",
            help="Only the calls that lost the most time to stalls (csv and json print one "
            "table: the breakdown, or this).",
        ),
    ] = False,
    limit: Annotated[int, typer.Option(min=1, help="Rows of the worst stalls.")] = 5,
    since: SinceOption = None,
    output_format: FormatOption = Format.TABLE,
    width: WidthOption = None,
) -> None:
    """Print the wall / stall / net-generation breakdown, or run SQL on the spans."""
    from otel_llm._show._store._since import parse_since

    out = Output.stdout(output_format, width)
    if threshold_ms is not None:  # the argument first, before the store is looked at
        from otel_llm._measure._stalls import validate_threshold_ms

        try:
            validate_threshold_ms(threshold_ms, "--threshold-ms")
        except OtelLLMError as exc:
            raise _failed(exc) from exc
    path = _db(db)
    try:
        if sql is not None:
            if threshold_ms is not None or worst_stalls or since is not None:
                raise _fail(
                    "--threshold-ms, --worst-stalls and --since apply to the breakdown, not to SQL"
                )
            out.table(read_again_after_damage(path, lambda: run_query(path, sql)))
            return
        start = parse_since(since, datetime.now(UTC)) if since is not None else None
        label = f"at {threshold_ms} ms" if threshold_ms else "as measured"
        if start is not None:
            label += f", calls since {start.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        if threshold_ms is not None and (note := below_floor_note(path, threshold_ms)):
            typer.echo(note, err=True)
        stalls = worst_stalls_sql(limit, threshold_ms=threshold_ms, since=start)
        if not worst_stalls:
            breakdown = breakdown_sql(threshold_ms, since=start)
            table = read_again_after_damage(path, lambda: run_query(path, breakdown, canned=True))
            out.table(table, f"Breakdown ({label})")
            if not table.rows and (note := _none_answered_note(path, start)):
                typer.echo(note, err=True)
        if worst_stalls or not output_format.one_table:
            out.table(
                read_again_after_damage(path, lambda: run_query(path, stalls, canned=True)),
                f"Worst stalls ({label})",
            )
    except (OtelLLMError, duckdb.Error, OSError) as exc:
        raise _failed(exc) from exc


def _none_answered_note(path: Path, since: datetime | None) -> str | None:
    """Why the breakdown of a range whose calls all failed is empty (it counts the calls that
    answered), or ``None`` when the range holds no call at all."""
    from otel_llm._show._sql._views import CALLS_VIEW, DUCKDB

    where = f" WHERE started_at >= {DUCKDB.instant(since)}" if since is not None else ""
    count_sql = f"SELECT count(*) FROM {CALLS_VIEW}{where}"
    ((calls,),) = read_again_after_damage(
        path, lambda: run_query(path, count_sql, canned=True)
    ).rows
    if not calls:
        return None
    return (
        f"note: {calls:,} call{'s' if calls != 1 else ''} in this range, none answered (every "
        "attempt failed): the breakdown and the worst stalls count the calls that answered; "
        "their errors are in `otel-llm report` or "
        '`otel-llm query "SELECT * FROM llm_attempts WHERE error_type IS NOT NULL"`'
    )


def _write_report(
    store: Path, output: Path | None, since: str | None = None, threshold_ms: int | None = None
) -> Path:
    """Write the report; its path (library errors and DuckDB's become exit code 2)."""
    from otel_llm._show._report._write import write_report

    try:
        written = read_again_after_damage(
            store, lambda: write_report(store, output, since=since, threshold_ms=threshold_ms)
        )
        return written.path
    except (OtelLLMError, duckdb.Error, OSError) as exc:
        raise _failed(exc) from exc


@app.command()
def report(
    db: DbOption = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help=f"The HTML file to write (default: {DEFAULTS.report_name} beside the store).",
        ),
    ] = None,
    since: SinceOption = None,
    threshold_ms: Annotated[
        int | None,
        typer.Option(
            help="Re-derive the stall figures at this threshold (ms) from the chunk events "
            "(default: as measured)."
        ),
    ] = None,
) -> None:
    """Write the dashboards' panels, run on the store, into one HTML file.

    The file is self-contained (it opens offline: nothing is fetched); its path is printed."""
    typer.echo(_write_report(_db(db), output, since, threshold_ms))


class TuneFormat(StrEnum):
    """``otel-llm tune --format``: for people, or one JSON document."""

    TABLE = "table"
    JSON = "json"


@app.command()
def tune(
    db: DbOption = None,
    source: Annotated[
        str | None,
        typer.Option(
            help="Replay the calls whose first attempt ran on this source (hedge legs are "
            "drawn from the other sources); default: every call."
        ),
    ] = None,
    service: Annotated[
        str | None,
        typer.Option(
            help="Replay the calls of this service (service.name) only; default: every "
            "service's (each call's hedge legs are drawn from its own service's sources)."
        ),
    ] = None,
    budget: Annotated[
        float,
        typer.Option(
            help="Requests per call the recommendation may cost: 1.25 = at most 25 % extra "
            "requests (hedges and retries)."
        ),
    ] = 1.0 + DEFAULTS.hedge_budget_ratio,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="The calls to replay: those that started after a duration back from now (6h, "
            "7d) or an ISO 8601 time (2026-01-31T12:00Z); default: the newest 10,000.",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed of the hedge legs' draws (same seed, same figures).")
    ] = TUNE_SEED,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="The client's TIMEOUT_S (read timeout, and the watchdog's fallback: a leg "
            "silent this long is killed even without a watchdog); no trigger or watchdog at "
            "or above it is tried. Not set: the defaults, "
            f"{DEFAULTS.timeout_s:g} s before the first chunk and "
            f"{DEFAULTS.inter_token_timeout_s:g} s between chunks.",
            show_default=False,
        ),
    ] = None,
    max_attempts: Annotated[
        int | None,
        typer.Option(
            "--max-attempts",
            help="The client's RETRY__MAX_ATTEMPTS: the rounds a call may run (a round whose "
            f"legs all fail is retried); not set: the default, {DEFAULTS.max_attempts}.",
            show_default=False,
        ),
    ] = None,
    output_format: Annotated[
        TuneFormat,
        typer.Option(
            "--format", case_sensitive=False, help="table (for people) or json (one document)."
        ),
    ] = TuneFormat.TABLE,
) -> None:
    """Replay the store's attempts through the hedging model and recommend a hedge setting.

    Prints the frontier of p99 against requests per call, and the setting to paste for a
    request budget (exit code 3 when the data are too few to recommend)."""
    from otel_llm._show._store._since import parse_since
    from otel_llm._tune._tuning import tune_store
    from otel_llm.cli._tune import TUNE_NOT_ENOUGH_EXIT, render_json, render_table

    out = Output.stdout(Format.TABLE, None)
    try:
        start = parse_since(since, datetime.now(UTC)) if since is not None else None
        path = _db(db)
        tuning = read_again_after_damage(
            path,
            lambda: tune_store(
                path,
                budget=budget,
                source=source,
                service=service,
                start=start,
                seed=seed,
                timeout_s=timeout,
                max_attempts=max_attempts,
            ),
        )
    except (OtelLLMError, duckdb.Error, OSError) as exc:
        raise _failed(exc) from exc
    if output_format is TuneFormat.JSON:
        render_json(tuning, out)
    else:
        render_table(tuning, out)
    if tuning.recommendation is None:  # the reason on standard error too, in either format
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"No recommendation: {tuning.verdict}", markup=False
        )
        raise typer.Exit(code=TUNE_NOT_ENOUGH_EXIT)


@app.command()
def views(db: DbOption = None) -> None:
    """Print the SQL that makes a DuckDB read the store.

    Grafana's DuckDB data source runs it as its initSql (with an empty database path); any
    DuckDB 1.4 or later can paste it."""
    path = _db(db)
    try:
        check_store(path)
        if not path.is_dir():
            raise _fail(f"{path} is a single-file store: DuckDB opens it directly")
    except OtelLLMError as exc:
        raise _failed(exc) from exc
    typer.echo(reader_sql(path))


@app.command()
def dashboards(
    directory: Annotated[Path, typer.Argument(help="Where to write them (created if missing).")],
    force: Annotated[
        bool, typer.Option("--force", help="Replace files that differ from the shipped ones.")
    ] = False,
) -> None:
    """Copy the Grafana dashboards and their provisioning files into a directory.

    The same files as the repository's dashboards/ folder: a dashboard per data source (the
    DuckDB store, ClickHouse, Prometheus), each also as a file for Grafana's import page, and
    the provisioning of the data sources and of the dashboards."""
    from otel_llm._packaged import DASHBOARDS, packaged

    try:
        shipped = packaged(DASHBOARDS, "provisioning/dashboards/otel-llm.yaml")
    except OtelLLMError as exc:
        raise _failed(exc) from exc
    files = sorted(p for p in shipped.rglob("*") if p.is_file())
    targets = [(source, directory / source.relative_to(shipped)) for source in files]
    try:
        differ = [
            str(target)
            for source, target in targets
            if not force and target.exists() and target.read_bytes() != source.read_bytes()
        ]  # --force replaces whatever is there: nothing to read
    except OSError as exc:  # a directory where a file goes, a file that cannot be read
        raise _fail(f"cannot read {exc.filename or directory}: {exc.strerror or exc}") from exc
    if differ:
        raise _fail(f"these files exist and differ (--force replaces them): {', '.join(differ)}")
    try:
        for source, target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            typer.echo(str(target))
    except OSError as exc:
        raise _fail(f"cannot write {exc.filename or directory}: {exc.strerror or exc}") from exc


@app.command()
def compact(
    db: DbOption = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Also read every segment whole, verifying each page's checksum, and move the "
            "damaged ones to quarantine (reads the whole store). Finds a flipped bit that "
            "still decodes, which queries read as wrong values.",
        ),
    ] = False,
) -> None:
    """Merge the store's small segments now.

    Writers also do it on their own, every half minute. Waits for no one: a store being read
    or merged is left for later (with --verify, exit code 2 when damage found cannot be moved
    out now)."""
    path = _db(db)
    verified: int | None = None
    try:
        check_store(path)
        if not path.is_dir():
            raise _fail(f"{path} is a single-file store: nothing to merge")
        store = SegmentStore(path)
        store.create()  # a store of the first layout is migrated first
        before = set(store.quarantined())
        merged = store.compact(min_segments=2, max_merges=None)  # until nothing is due
        if verify:
            verified = len(store.segments())
            found = store.damaged()
            if found and store.quarantine(found, wait=False) is None:
                raise _fail(
                    f"{path} has damaged segments ({', '.join(sorted(found))}) that cannot be "
                    "moved to quarantine now: another otel-llm process is reading or merging "
                    "the store; run `otel-llm compact --verify` again when it is done"
                )
        damaged = sorted(set(store.quarantined()) - before)
    except (OtelLLMError, OSError, ValueError) as exc:  # ValueError: Arrow's errors
        raise _failed(exc) from exc
    typer.echo(f"merged {merged} segments" if merged else "nothing to merge (or the store is busy)")
    if verified is not None:
        typer.echo(
            f"verified the page checksums of {verified} segment{'s' if verified != 1 else ''}"
        )
    if damaged:
        typer.echo(
            f"quarantined {len(damaged)} damaged segment{'s' if len(damaged) > 1 else ''} "
            f"(moved to {store.quarantine_dir}, each with a .why note): "
            + ", ".join(p.name for p in damaged)
        )


@app.command()
def provider(
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free).")
    ] = 8080,
    preset: Annotated[
        str | None, typer.Option(help="Behaviour of unknown models (e.g. measured, stall).")
    ] = None,
    time_scale: Annotated[
        float,
        typer.Option(
            min=0.0001,
            max=100.0,
            help="Multiplies every scripted duration: 0.1 runs 10x faster, 2 twice as slow.",
        ),
    ] = 1.0,
    seed: Annotated[
        int, typer.Option(help="Seed of the scripted draws (same seed, same answers).")
    ] = 0,
    stall_probability: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=1.0, help="Share of calls with a long silence in measured/oracle."
        ),
    ] = None,
) -> None:
    """Serve the simulated provider (OpenAI, Azure OpenAI, Anthropic, Gemini) until Ctrl-C."""
    console = Console()
    _need_simulator()
    import socket

    from otel_llm.simulator import measured, oracle, serve

    scripts = (
        {"measured": measured(stall_probability), "oracle": oracle(stall_probability)}
        if stall_probability is not None
        else None
    )
    try:
        serve(
            host,
            port,
            preset=preset,
            time_scale=time_scale,
            seed=seed,
            scripts=scripts,
            announce=console.print,
        )
    except socket.gaierror as exc:  # the bare resolver error names no host
        raise _fail(f"--host {host!r}: no address to listen on ({exc.strerror})") from exc
    except (ValueError, OSError) as exc:
        raise _failed(exc) from exc


COLLECTOR_PROBLEM_EXIT = 1
"""Exit code of ``otel-llm collector`` when it kept a damaged file or the collector died."""


@app.command()
def collector(
    db: DbOption = None,
    config: Annotated[
        str,
        typer.Option(
            help="duckdb (OTLP into the store), clickhouse (OTLP into ClickHouse), or the path "
            "of a collector config."
        ),
    ] = "duckdb",
    grpc_port: Annotated[
        int, typer.Option(min=1, max=65535, help="OTLP/gRPC port on 127.0.0.1.")
    ] = DEFAULTS.collector_grpc_port,
    http_port: Annotated[
        int, typer.Option(min=1, max=65535, help="OTLP/HTTP port on 127.0.0.1.")
    ] = DEFAULTS.collector_http_port,
    health_port: Annotated[
        int, typer.Option(min=1, max=65535, help="Health check port on 127.0.0.1.")
    ] = DEFAULTS.collector_health_port,
) -> None:
    """Run the OpenTelemetry Collector until Ctrl-C, its spans where its config sends them.

    With the duckdb config they go straight into the store; clickhouse, or a config of your
    own, sends them where it says. The Collector is built on first use (minutes, once per
    machine; it needs Go)."""
    from otel_llm._show._store._access import prepare_for_writing
    from otel_llm.cli._collector import (
        CollectorRun,
        Ports,
        collector_binary,
        config_path,
        run_until_stopped,
        stop_on_signals,
        where_spans_land,
    )

    console = Console(stderr=True, highlight=False, soft_wrap=True)

    def say(message: str) -> None:
        console.print(message, markup=False)

    try:
        ports = Ports(grpc_port, http_port, health_port)  # each refused before a build of
        chosen = config_path(config)  # minutes, as the config and the store are
        lands = where_spans_land(chosen)
        store = _db(db) if lands != "elsewhere" else None  # claimed only when it is written
        if store is not None:
            prepare_for_writing(store)
        with stop_on_signals() as stop:
            binary = collector_binary(say)
            run = CollectorRun(binary, chosen, store=store, ports=ports)
            run.start()
            into = {
                "store": f"spans into {store}",
                "spool": f"spans into {store} through spool files",
                "elsewhere": f"spans where {config} sends them, not into the store --db names",
            }[lands]
            say(
                f"collector up: OTLP gRPC 127.0.0.1:{ports.grpc}, HTTP 127.0.0.1:{ports.http} "
                f"({ports.traces_url}); {into}; Ctrl-C stops it"
            )
            for problem in run.report.problems:  # found by the ingest before the start
                say(f"kept a damaged file: {problem}")
            code = run_until_stopped(run, stop, say)
    except (OtelLLMError, duckdb.Error, OSError) as exc:
        raise _failed(exc) from exc
    report = run.report
    landed = {
        "store": f"spans went straight into {store}",
        "spool": f"{report.spans} spans ingested into {store} from spool files",
        "elsewhere": f"spans went where {config} sends them",
    }[lands]
    if report.files and lands == "store":
        landed += f"; {report.spans} spans ingested from spool files of an earlier version"
    say(f"collector stopped (exit code {code}); {landed}")
    for problem in report.problems:
        console.print(f"[bold red]kept:[/bold red] {escape(problem)}")
    if report.problems or (code not in (0, None) and not stop.is_set()):
        raise typer.Exit(code=COLLECTOR_PROBLEM_EXIT)


def _version(shown: bool) -> None:
    if shown:  # ``otel-llm --version`` alone never gets here (``otel_llm.cli.main``)
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            VERSION_FLAG, callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Where the time of every streamed LLM call goes: first chunk, generation, stalls."""
