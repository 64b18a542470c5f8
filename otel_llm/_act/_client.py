"""``otel_llm.Client``: a resilient async client for OpenAI-compatible, Azure OpenAI, Anthropic and
Gemini sources that meters every call and hedges a late or stalled stream onto another source,
whatever API each speaks."""

from __future__ import annotations

import functools
import inspect
import random
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx2
from opentelemetry import metrics, trace

from otel_llm import _semconv as sc
from otel_llm._act._admission import Admission, LocalAdmission
from otel_llm._act._attempt import Attempt
from otel_llm._act._breaker import Breaker
from otel_llm._act._call import CallOutcome, CallRun, CallShared
from otel_llm._act._completion import Completion, Embeddings
from otel_llm._act._groups import PoolSettings
from otel_llm._act._hedge_budget import HedgeBudgets
from otel_llm._act._json import require_json
from otel_llm._act._legs import Request, UsageOf
from otel_llm._act._pool import Pool
from otel_llm._act._result import ChatResult, EmbeddingsResult
from otel_llm._act._settings import CLIENT_ARGUMENTS, ClientSettings, EmbeddingSettings
from otel_llm._act._source import Source
from otel_llm._act._source_state import SourceState
from otel_llm._act._stats import CallStats
from otel_llm._act._transport import embeddings_refused
from otel_llm._act._wire._format import EXTRA_BODY
from otel_llm._arguments import check_providers, type_name
from otel_llm._defaults import DEFAULTS
from otel_llm._env import scope_key, stall_threshold_key
from otel_llm._errors import InvalidRequest
from otel_llm._measure import _clock
from otel_llm._measure._call_span import CallSpan
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._response import ResponseFacts
from otel_llm._measure._stalls import to_ms, validate_threshold_ms
from otel_llm._version import __version__

T = TypeVar("T")


def _message_list(messages: object) -> list[Mapping[str, Any]]:
    """The chat's messages as a list: one or more objects (what is in each is the source's
    API's to judge, or the translation's). A string, a single message, nothing at all or not a
    list at all is refused before anything is sent — a string was sent as its characters."""
    if isinstance(messages, str | bytes | bytearray | Mapping) or not isinstance(
        messages, Iterable
    ):
        raise InvalidRequest(
            f"messages must be a list of messages (objects with a role and content), not "
            f"{type(messages).__name__}"
        )
    found = list(messages)
    if not found:
        raise InvalidRequest("messages is empty: a chat call sends at least one message")
    for index, message in enumerate(found):
        if not isinstance(message, Mapping):
            raise InvalidRequest(
                f"messages[{index}] is a {type(message).__name__}, not a message (an object "
                f"with a role and content)"
            )
    return found


def _check_chat(sources: Sequence[Source], payload: Mapping[str, Any]) -> None:
    """Refuse a chat request some source's API cannot take (translated), before anything is
    sent: any source may be tried, by failover or as a hedge."""
    for source in sources:
        source.wire.check(source, payload)


def _check_embeddings(sources: Sequence[Source], payload: Mapping[str, Any]) -> None:
    """Refuse an embeddings call when some source's API has no embeddings."""
    for source in sources:
        if not source.wire.embeddings:
            raise embeddings_refused(source)


async def _chat(attempt: Attempt, pool: Pool, payload: Mapping[str, Any]) -> Completion:
    return await attempt.run(pool, payload)


async def _embed(attempt: Attempt, pool: Pool, payload: Mapping[str, Any]) -> Embeddings:
    return await attempt.run_embeddings(pool, payload)


def _pool(settings: PoolSettings, http_client: object) -> Pool:
    """The client's pool: the user's ``http_client``, or clients made from ``settings``."""
    if http_client is None:
        limits = httpx2.Limits(
            max_connections=settings.max_connections,
            max_keepalive_connections=settings.max_keepalive_connections,
            keepalive_expiry=settings.keepalive_expiry_s,
        )
        return Pool(factory=lambda: httpx2.AsyncClient(limits=limits))
    if not isinstance(http_client, httpx2.AsyncClient):
        from otel_llm._errors import ConfigurationError

        raise ConfigurationError(
            "http_client",
            f"must be an httpx2.AsyncClient, got {type(http_client).__module__}."
            f"{type(http_client).__qualname__} (httpx 0.28 with httpcore 1.0.9 leaks a "
            "connection-pool slot on every cancelled request: encode/httpcore#1093)",
        )
    return Pool(client=http_client)


def _check_objects(
    sources: object,
    settings: object,
    scope: object,
    admission: object,
    tracer_provider: object,
    meter_provider: object,
    seed: object,
) -> None:
    """The arguments that are objects rather than settings keys, checked at construction (a
    wrong one would otherwise fail each call later, with Python's own error)."""
    from otel_llm._errors import ConfigurationError

    if sources is not None and (
        isinstance(sources, str | bytes)
        or not isinstance(sources, Sequence)
        or not all(isinstance(source, Source) for source in sources)
    ):
        found = (
            type_name(sources)
            if isinstance(sources, str | bytes) or not isinstance(sources, Sequence)
            else f"a {type_name(sources)} holding "
            + ", ".join(sorted({type_name(s) for s in sources if not isinstance(s, Source)}))
        )
        raise ConfigurationError("sources", f"must be a list of otel_llm.Source, got {found}")
    if settings is not None and not isinstance(settings, ClientSettings):
        raise ConfigurationError(
            "settings", f"must be an otel_llm.ClientSettings, got {type_name(settings)}"
        )
    if scope is not None and (not isinstance(scope, str) or not scope):
        raise ConfigurationError(
            "scope",
            f"must be a non-empty string such as 'LLM' or 'EMBEDDING', got {type_name(scope)}",
        )
    methods = ("acquire", "settle", "aclose")
    if admission is not None and not all(
        inspect.iscoroutinefunction(getattr(admission, method, None)) for method in methods
    ):
        hint = (
            " (for the shared Redis backend pass otel_llm.RedisAdmission(url), or set "
            "LLM__ADMISSION__BACKEND=redis and LLM__ADMISSION__REDIS_URL)"
            if isinstance(admission, str)
            else ""
        )
        raise ConfigurationError(
            "admission",
            "must be an admission backend with async acquire(), settle() and aclose() "
            f"(otel_llm.LocalAdmission, otel_llm.RedisAdmission), got {type_name(admission)}"
            + hint,
        )
    check_providers(tracer_provider=tracer_provider, meter_provider=meter_provider)
    if seed is not None and (type(seed) is bool or not isinstance(seed, int)):
        raise ConfigurationError("seed", f"must be an integer, got {type_name(seed)}")


@functools.cache
def _argument_kinds() -> dict[str, type]:
    """Per settings argument of :class:`Client`: ``float``, ``int`` or ``bool`` (its hint)."""
    hints = typing.get_type_hints(Client.__init__)
    kinds: dict[str, type] = {}
    for name in CLIENT_ARGUMENTS:
        (kind,) = [arg for arg in typing.get_args(hints[name]) if arg is not type(None)]
        kinds[name] = kind
    return kinds


def _check_types(given: Mapping[str, object], scope: str) -> None:
    """Settings given as arguments have their type: a number, not ``"1.5"``, which only the
    environment spells as text (where it is parsed)."""
    from otel_llm._errors import ConfigurationError

    kinds = _argument_kinds()
    for name, value in given.items():
        if value is None:
            continue
        kind = kinds[name]
        if kind is bool:
            ok = type(value) is bool
        elif kind is int:
            ok = isinstance(value, int) and type(value) is not bool
        else:
            ok = isinstance(value, int | float) and type(value) is not bool
        if not ok:
            wanted = {bool: "True or False", int: "an integer"}.get(kind, "a number")
            group, field = CLIENT_ARGUMENTS[name].split(".", 1)  # every key is in a group
            key = scope_key(scope, group, field)
            raise ConfigurationError(key, f"{name}= must be {wanted}, got {type_name(value)}")


def _admission(settings: ClientSettings) -> Admission:
    if settings.admission.backend == "redis":
        from otel_llm._act._redis_admission import RedisAdmission

        assert settings.admission.redis_url is not None
        prefix = settings.admission.key_prefix
        if settings.scope != DEFAULTS.scope:  # its sources' names are the chat scope's too
            prefix = f"{prefix}:{settings.scope.lower()}"
        return RedisAdmission(settings.admission.redis_url.get_secret_value(), key_prefix=prefix)
    return LocalAdmission()


class Client:
    """Calls sources — OpenAI-compatible, Azure OpenAI, Anthropic, Gemini, each in its own API —
    with retries, failover, circuit breaking, admission, a streaming watchdog and hedged
    requests (across APIs too), and returns the whole answer with its :class:`CallStats`.

    Configuration comes from ``{scope}__*`` environment keys, then ``settings``, then the
    arguments here (an explicit argument wins). ``scope`` is ``LLM`` for chat and ``EMBEDDING``
    for embeddings. Use ``async with Client(...) as client``.
    """

    def __init__(
        self,
        sources: Sequence[Source] | None = None,
        *,
        settings: ClientSettings | None = None,
        scope: str | None = None,
        stall_threshold_ms: int | None = None,
        hedge_after_s: float | None = None,
        hedge_stall_after_s: float | None = None,
        hedge_budget_ratio: float | None = None,
        hedge_budget_burst: float | None = None,
        hedge_first_token_burst: float | None = None,
        max_attempts: int | None = None,
        call_deadline_s: float | None = None,
        stall_window_s: float | None = None,
        backoff_base_s: float | None = None,
        backoff_max_s: float | None = None,
        rate_limit_wait_s: float | None = None,
        same_source_retries: int | None = None,
        rate_limit_max_wait_s: float | None = None,
        failover_on_content_filter: bool | None = None,
        failover_on_context_length: bool | None = None,
        breaker_failure_threshold: int | None = None,
        breaker_first_cooldown_s: float | None = None,
        breaker_cooldown_s: float | None = None,
        pool_max_connections: int | None = None,
        pool_max_keepalive_connections: int | None = None,
        pool_keepalive_expiry_s: float | None = None,
        admission: Admission | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        http_client: httpx2.AsyncClient | None = None,
        seed: int | None = None,
    ) -> None:
        _check_objects(sources, settings, scope, admission, tracer_provider, meter_provider, seed)
        given = {name: value for name, value in locals().items() if name in CLIENT_ARGUMENTS}
        chosen = {  # the keys' arguments, as given (None: not given)
            CLIENT_ARGUMENTS[name]: value for name, value in given.items()
        }
        if settings is None:
            settings_cls = ClientSettings.for_scope(scope) if scope else ClientSettings
            settings = settings_cls()
        _check_types(given, settings.scope)
        if stall_threshold_ms is not None:  # from code, taken as given: "100" is not a number
            validate_threshold_ms(stall_threshold_ms, stall_threshold_key(settings.scope))
        self.settings = settings.merged(
            sources=tuple(sources) if sources is not None else None, **chosen
        )
        if not self.settings.sources:
            from otel_llm._errors import ConfigurationError

            raise ConfigurationError(
                f"{self.settings.scope}__{{PROVIDER}}__{{N}}__BASE_URL",
                "no source configured (pass sources=[...] or set the per-source keys)",
            )
        names = [source.name for source in self.settings.sources]
        if len(set(names)) != len(names):
            from otel_llm._errors import ConfigurationError

            raise ConfigurationError("sources", f"source names must be unique, got {names}")
        if self.settings.scope == EmbeddingSettings.scope:
            _check_embeddings(self.settings.sources, {})
        breaker = self.settings.breaker
        self._metrics = LlmMetrics(meter_provider)
        self._states = [
            SourceState(
                source,
                Breaker(
                    failure_threshold=breaker.failure_threshold,
                    first_cooldown_s=breaker.effective_first_cooldown_s,
                    max_cooldown_s=breaker.cooldown_s,
                    on_change=functools.partial(self._metrics.record_breaker_state, source.name),
                ),
            )
            for source in sorted(self.settings.sources, key=lambda source: source.priority)
        ]
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("otel_llm", __version__)
        self._pool = _pool(self.settings.pool, http_client)
        self._admission = admission or _admission(self.settings)
        self._owns_admission = admission is None
        hedge = self.settings.hedge
        both = hedge.after_s is not None and hedge.stall_after_s is not None
        self._hedge_budgets = HedgeBudgets(
            hedge.budget_ratio, hedge.budget_burst, hedge.first_token_burst, both
        )
        self._rng = random.Random(seed)

    # --- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections and the admission backend the client opened."""
        await self._pool.aclose()
        if self._owns_admission:
            await self._admission.aclose()

    def __repr__(self) -> str:
        return f"Client(scope={self.settings.scope!r}, sources={[s.name for s in self.sources]!r})"

    @property
    def sources(self) -> tuple[Source, ...]:
        """The sources, in priority order."""
        return tuple(state.source for state in self._states)

    @property
    def pool_replacements(self) -> int:
        """How often the client replaced a connection pool that could not serve (see
        :mod:`otel_llm._act._pool`); 0 on a healthy client."""
        return self._pool.replacements

    def breaker_state(self, source: str) -> str:
        """The circuit-breaker state of ``source`` (``closed``, ``open``, ``half_open``)."""
        for state in self._states:
            if state.name == source:
                return state.breaker.state.value
        raise KeyError(source)

    # --- calls --------------------------------------------------------------------------------

    def _shared(self) -> CallShared:
        return CallShared(
            pool=self._pool,
            tracer=self._tracer,
            settings=self.settings,
            states=self._states,
            admission=self._admission,
            hedge_budget=self._hedge_budgets,
            rng=self._rng,
            metrics=self._metrics,
        )

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        stream: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> ChatResult:
        """Run one chat call. With ``stream=True`` the client consumes the stream itself, so a
        mid-stream switch to the hedge leg never reaches the caller; the whole answer comes back
        once the winning stream ended. ``params`` go to the provider (``max_tokens`` …),
        translated for a source of another API where they cross (or refused before anything is
        sent); ``extra_body`` fields are set as they are in the body sent to whichever source
        answers (options of one provider's API, which otel-llm does not translate)."""
        payload: dict[str, Any] = {"messages": _message_list(messages), **params}
        if extra_body is not None:
            if not isinstance(extra_body, Mapping) or not all(
                isinstance(key, str) for key in extra_body
            ):
                raise InvalidRequest(
                    f"extra_body must be a mapping of field names to values, not "
                    f"{type(extra_body).__name__}"
                )
            if "stream" in extra_body:  # the answer would come in the mode the client does not read
                raise InvalidRequest(
                    "extra_body['stream'] would change how the answer comes back, which the "
                    "client reads as it asked: use chat(stream=True or False) instead"
                )
            payload[EXTRA_BODY] = dict(extra_body)
        outcome, stats = await self._call(
            sc.OPERATION_CHAT,
            payload,
            stream=stream,
            request=_chat,
            usage_of=lambda completion: completion.usage,
            facts_of=lambda completion: completion.facts,
            output_of=lambda completion: (completion.text, completion.finish_reason),
            check=_check_chat,
        )
        return ChatResult.of(outcome.answer, outcome.winner.state.name, stats)

    async def embed(self, input: str | Sequence[str], **params: Any) -> EmbeddingsResult:
        """Embed ``input`` (non-streaming; same retries and failover, never hedged)."""
        outcome, stats = await self._call(
            sc.OPERATION_EMBEDDINGS,
            {"input": input, **params},
            stream=False,
            request=_embed,
            usage_of=lambda answer: answer.usage,
            facts_of=lambda answer: answer.facts,
            check=_check_embeddings,
        )
        return EmbeddingsResult.of(outcome.answer, outcome.winner.state.name, stats)

    async def _call(
        self,
        operation: str,
        payload: Mapping[str, Any],
        *,
        stream: bool,
        request: Request[T],
        usage_of: UsageOf[T],
        facts_of: Callable[[T], ResponseFacts],
        output_of: Callable[[T], tuple[str, str | None]] | None = None,
        check: Callable[[Sequence[Source], Mapping[str, Any]], None],
    ) -> tuple[CallOutcome[T], CallStats]:
        """One call with its span, stats and metrics (chat is hedged, embeddings never).
        ``check`` refuses, before any request, what some source cannot take. With content
        capture on, the span records the prompt (``payload["messages"]``) and the winner's
        answer (``output_of``: its text and finish reason)."""
        call = CallSpan(
            self._tracer,
            self._metrics,
            operation=operation,
            model=self.sources[0].model,
            stream=stream,
            request=payload,
            secrets=[secret for source in self.sources for secret in source.secrets()],
            messages=payload.get("messages"),
        )
        # The metering clock (call_ms and the figures on one clock), read once the span has
        # started: the duration metric's interval lies within the span's, whatever starting
        # the span cost on a busy machine.
        started = _clock.now_ns()
        run: CallRun[T] | None = None
        try:
            require_json(payload)
            check(self.sources, payload)
            run = CallRun(
                self._shared(),
                payload=payload,
                stream=stream,
                hedge=operation == sc.OPERATION_CHAT,
                request=request,
                usage_of=usage_of,
                context=call.context,
                operation=operation,
            )
            outcome = await run.run()
            stats = self._stats(outcome, started)
            winner = outcome.winner
            source = winner.state.source
            call.set_provider(
                source.provider_name, {sc.ATTEMPT_SOURCE: source.name}, model=source.model
            )
            call.record_response(facts_of(outcome.answer))
            if output_of is not None:
                call.record_output(*output_of(outcome.answer))
            call.record_counts(
                attempts=stats.attempts,
                hedges=stats.hedges,
                sources_tried=stats.sources_tried,
                hedge_won=stats.hedge_won,
                winner=winner.attempt.number,
                hedge_waste_tokens=stats.hedge_waste_tokens,
                hedge_waste_chunks=stats.hedge_waste_chunks,
            )
        except BaseException as exc:  # the span ends on every path, with how far the call got
            tried = run.tried if run is not None else []
            last = self._source(tried[-1]) if tried else self.sources[0]
            call.set_provider(last.provider_name, model=last.model)
            call.record_counts(
                attempts=run.attempts if run is not None else 0,
                hedges=run.hedges if run is not None else 0,
                sources_tried=tuple(tried),
            )
            call.end(duration_s=to_ms(_clock.now_ns() - started) / 1000, error=exc)
            raise
        call.end(duration_s=(stats.call_ms or 0) / 1000, figures=winner.attempt.figures)
        return outcome, stats

    def _source(self, name: str) -> Source:
        return next(state.source for state in self._states if state.name == name)

    def _stats(self, outcome: CallOutcome[Any], started_ns: int) -> CallStats:
        figures = outcome.winner.attempt.figures
        assert figures is not None
        return CallStats.from_winner(
            figures,
            attempts=outcome.attempts,
            hedges=outcome.hedges,
            hedge_won=outcome.winner.is_hedge,
            sources_tried=outcome.sources_tried,
            retries=outcome.retries,
            backoff_ms=int(outcome.backoff_s * 1000),
            hedge_waste_tokens=outcome.hedge_waste_tokens,
            hedge_waste_chunks=outcome.hedge_waste_chunks,
            call_ms=to_ms(_clock.now_ns() - started_ns),
            waited_ms=int(outcome.waited_s * 1000),
        )
