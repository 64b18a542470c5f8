"""The common subset of a chat request that crosses providers, read from the caller's
OpenAI-style request for an API that is not OpenAI's.

What crosses: text content (a string, or a list of ``{"type": "text"}`` parts), system prompts
(``system`` or ``developer`` messages before the conversation), the roles ``user`` and
``assistant``, and the generation settings every API has (``max_tokens`` or
``max_completion_tokens``, ``stop``; ``n`` of 1) — plus, per API, those it has too (Gemini:
``temperature``, ``top_p``, ``seed`` and the penalties; the Anthropic Messages API of the
version the client speaks has no sampling settings). Anything else — tools and tool results,
images and audio, ``response_format``, ``n > 1``, log probabilities, a message's ``name``, a
system message in mid-conversation — is refused with a :class:`~otel_llm.ConfigurationError`
naming the field, before anything is sent, rather than dropped (the answer would not be the one
asked for). A field set to ``None`` — of the request, a message or a content part — is not set,
as the SDKs read it (an assistant message echoed back as the openai SDK dumps it carries
``tool_calls=None``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from otel_llm._act._providers import API_LABELS, Api
from otel_llm._act._wire._format import EXTRA_BODY
from otel_llm._errors import ConfigurationError

if TYPE_CHECKING:
    from otel_llm._act._source import Source

Role = Literal["user", "assistant"]

COMMON_PARAMETERS: Final = frozenset({"max_tokens", "max_completion_tokens", "stop", "n"})
"""Generation settings every API has (``n`` only as 1)."""
IGNORED: Final = frozenset({"messages", "model", "stream_options", EXTRA_BODY})
"""Fields of a request that are not generation settings: the messages (translated), the model
(each source sends its own, as for chat completions) and the stream options (the client streams
as each API does)."""

_WHAT: Final[dict[str, str]] = {
    "tools": "tools",
    "tool_choice": "tools",
    "parallel_tool_calls": "tools",
    "functions": "tools",
    "function_call": "tools",
    "response_format": "a response format",
    "logprobs": "log probabilities",
    "top_logprobs": "log probabilities",
    "modalities": "output modalities",
    "audio": "audio output",
    "logit_bias": "logit biases",
    "prediction": "predicted outputs",
    "web_search_options": "web search",
    "temperature": "a sampling setting (temperature)",
    "top_p": "a sampling setting (top_p)",
}
"""How a refusal names a request field that does not cross (others by their own name)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of the conversation: its role and its text parts."""

    role: Role
    texts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Generation:
    """The generation settings of a request that cross providers (``None``: not set)."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None


@dataclass(frozen=True, slots=True)
class Translated:
    """A chat request in the common subset."""

    system: tuple[str, ...]
    turns: tuple[Turn, ...]
    generation: Generation


class Translation:
    """Reads a request for one source whose API is ``api``, refusing what does not cross."""

    def __init__(self, source: Source, api: Api, *, extra: frozenset[str] = frozenset()) -> None:
        self.source = source
        self.api = api
        self.extra = extra
        """Generation settings beyond :data:`COMMON_PARAMETERS` this API has."""

    def refuse(self, key: str, what: str) -> ConfigurationError:
        """The error for a request field ``key`` that cannot be sent to the source."""
        return ConfigurationError(
            key,
            f"{what} cannot be sent to source {self.source.name!r}, which speaks "
            f"{API_LABELS[self.api]}: text messages, system prompts, max_tokens and stop "
            "cross providers; nothing was sent",
        )

    def read(self, payload: Mapping[str, Any]) -> Translated:
        """The request in the common subset, or the ConfigurationError of its first field
        that does not cross."""
        for key, value in payload.items():
            if value is None:  # not set (``temperature=None``), as the SDKs read it
                continue
            if key not in IGNORED and key not in COMMON_PARAMETERS and key not in self.extra:
                raise self.refuse(_cut(key), _WHAT.get(key, f"the request field {_named(key)}"))
        system, turns = self._messages(payload.get("messages"))
        return Translated(system, turns, self._generation(payload))

    # --- messages -------------------------------------------------------------------------------

    def _messages(self, messages: Any) -> tuple[tuple[str, ...], tuple[Turn, ...]]:
        if not isinstance(messages, list | tuple):
            raise self.refuse("messages", "messages that are not a list")
        system: list[str] = []
        turns: list[Turn] = []
        for position, message in enumerate(messages):
            at = f"messages[{position}]"
            if not isinstance(message, Mapping):
                raise self.refuse(at, "a message that is not an object")
            for key, value in message.items():
                if key not in ("role", "content") and value is not None:  # None: not set
                    what = "tool calls" if key in ("tool_calls", "function_call") else None
                    named = f"a message's {_named(key)}"
                    raise self.refuse(f"{at}.{_cut(str(key))}", what or named)
            role = message.get("role")
            texts = self._texts(message.get("content"), f"{at}.content")
            if role in ("system", "developer"):
                if turns:
                    raise self.refuse(
                        f"{at}.role", f"a {role} message after the conversation started"
                    )
                system.extend(texts)
            elif role == "user" or role == "assistant":
                turns.append(Turn(role, texts))
            elif role in ("tool", "function"):
                raise self.refuse(f"{at}.role", "tool results")
            else:
                raise self.refuse(f"{at}.role", f"the role {_named(role)}")
        if not turns:  # both APIs answer 400 to a request with no turn to answer
            raise self.refuse("messages", "a request with no user or assistant message")
        return tuple(system), tuple(turns)

    def _texts(self, content: Any, at: str) -> tuple[str, ...]:
        if isinstance(content, str):
            return (content,)
        if not isinstance(content, list | tuple):
            what = "a message without content" if content is None else "content of that type"
            raise self.refuse(at, what)
        texts = []
        for position, part in enumerate(content):
            where = f"{at}[{position}]"
            if not isinstance(part, Mapping):
                raise self.refuse(where, "a content part that is not an object")
            kind = part.get("type")
            if kind != "text":
                what = {
                    "image_url": "images",
                    "input_audio": "audio",
                    "file": "files",
                    "refusal": "a refusal part",
                }.get(
                    kind if isinstance(kind, str) else "",
                    f"a content part of type {_named(kind)}",
                )
                raise self.refuse(where, what)
            text = part.get("text")
            others = {key for key, value in part.items() if value is not None} - {"type", "text"}
            if not isinstance(text, str) or others:
                raise self.refuse(where, "a text part with fields other than its text")
            texts.append(text)
        return tuple(texts)

    # --- generation settings ------------------------------------------------------------------

    def _generation(self, payload: Mapping[str, Any]) -> Generation:
        n = payload.get("n")
        if n is not None and (type(n) is not int or n != 1):
            raise self.refuse("n", "several choices (n > 1)" if _whole(n) else "n other than 1")
        key = (
            "max_completion_tokens"
            if payload.get("max_completion_tokens") is not None
            else "max_tokens"
        )
        limit = payload.get(key)  # one set to None is not set: the other one is the limit
        if limit is not None and not (_whole(limit) and limit >= 1):
            raise self.refuse(key, "max_tokens other than a whole number >= 1")
        temperature = self._number(payload, "temperature", 0.0, 2.0)
        top_p = self._number(payload, "top_p", 0.0, 1.0)
        stop = payload.get("stop")
        if isinstance(stop, str):
            stops: tuple[str, ...] = (stop,)
        elif stop is None:
            stops = ()
        elif isinstance(stop, list | tuple) and all(isinstance(item, str) for item in stop):
            stops = tuple(stop)
        else:
            raise self.refuse("stop", "stop other than a string or a list of strings")
        seed = payload.get("seed")
        if seed is not None and not _whole(seed):
            raise self.refuse("seed", "a seed other than a whole number")
        return Generation(
            max_tokens=limit,
            temperature=temperature,
            top_p=top_p,
            stop=stops,
            seed=seed,
            presence_penalty=self._number(payload, "presence_penalty", -2.0, 2.0),
            frequency_penalty=self._number(payload, "frequency_penalty", -2.0, 2.0),
        )

    def _number(
        self, payload: Mapping[str, Any], key: str, low: float, high: float
    ) -> float | None:
        value = payload.get(key)
        if value is None:
            return None
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or not low <= value <= high:
            raise self.refuse(key, f"{key} outside {low:g}..{high:g} (this API's range)")
        return float(value)


_SHOWN: Final = 40
"""Characters of a value the caller wrote that a refusal shows (it names the value, never
repeats a megabyte of it)."""


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…"


def _named(value: Any) -> str:
    """A value the caller wrote (a role, a part's type, a field name) as a refusal names it."""
    return _cut(repr(value))


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
