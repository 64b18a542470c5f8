"""A scripted upstream for the client: answers served through ``httpx2.MockTransport``.

The simulated provider (real HTTP) covers timing; this covers stateful sequences — "429, then
an answer" — where each request must get a different answer, in memory (so it runs on virtual
time too).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

import httpx2

from otel_llm._errors import ConfigurationError

Handler = Callable[[httpx2.Request], Awaitable[httpx2.Response]]


def sse_answer(words: Iterable[str] = ("hello", " world"), *, model: str = "m") -> httpx2.Response:
    """A complete streamed answer."""
    events = []
    for word in words:
        chunk = {"id": "x", "model": model, "choices": [{"index": 0, "delta": {"content": word}}]}
        events.append(f"data: {json.dumps(chunk)}\n\n")
    finish = {
        "id": "x",
        "model": model,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    usage = {
        "id": "x",
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    events += [
        f"data: {json.dumps(finish)}\n\n",
        f"data: {json.dumps(usage)}\n\n",
        "data: [DONE]\n\n",
    ]
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text="".join(events))


def json_answer(text: str = "hello world", *, model: str = "m") -> httpx2.Response:
    """A complete non-streamed answer."""
    return httpx2.Response(
        200,
        json={
            "id": "x",
            "model": model,
            "choices": [{"index": 0, "message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    )


def error(
    status: int, code: str | None = None, *, retry_after: str | None = None
) -> httpx2.Response:
    """An OpenAI-style error answer."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    body = {"error": {"message": f"scripted {status}", "type": "error", "code": code}}
    return httpx2.Response(status, headers=headers, json=body)


class Scripted:
    """Answers each request with the next scripted response for its host's first label (the
    last one repeats): ``Scripted({"a": [error(429), sse_answer()]})`` answers
    ``http://a.test/v1`` first with a 429, then with a stream. ``seen`` lists the hosts asked,
    in order; ``client()`` is an ``httpx2.AsyncClient`` to pass as ``Client(http_client=…)``.
    Each host plays a copy of its list, so one list may serve several hosts, scripts or tests;
    an empty list, or a request to a host with none, is a
    :class:`~otel_llm.ConfigurationError`."""

    def __init__(self, answers: Mapping[str, Sequence[Handler | httpx2.Response]]) -> None:
        # each host plays its own copy: a list shared by two hosts, two scripts or two tests
        # is played from its start by each
        self.answers: dict[str, list[Handler | httpx2.Response]] = {
            host: list(queue) for host, queue in answers.items()
        }
        self.seen: list[str] = []
        for host, queue in self.answers.items():
            if not queue:
                raise ConfigurationError(
                    f"answers[{host!r}]", "needs at least one answer (the last one repeats)"
                )

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.host.split(".")[0]
        self.seen.append(host)
        queue = self.answers.get(host)
        if not queue:
            scripted = ", ".join(sorted(self.answers)) or "none"
            raise ConfigurationError(
                "answers",  # the URL without its query, which may carry a key
                f"no answers for host {host!r} ({request.method} {request.url.host}"
                f"{request.url.path}); scripted: {scripted}",
            )
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, httpx2.Response):
            return httpx2.Response(
                answer.status_code, headers=answer.headers, content=answer.content
            )
        return await answer(request)

    def __repr__(self) -> str:
        return f"Scripted(hosts={sorted(self.answers)}, seen={self.seen})"

    def client(self) -> httpx2.AsyncClient:
        """An ``httpx2.AsyncClient`` whose every request this script answers."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))
