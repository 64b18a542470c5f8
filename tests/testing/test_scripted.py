"""The scripted upstream (``otel_llm.testing.Scripted``): each host plays its own copy of its
answers, and a script with nothing to answer says so in the library's own words."""

from __future__ import annotations

import pytest

from otel_llm import ChatResult, ConfigurationError
from otel_llm.testing import Scripted, Spans, error, run_virtual, sse_answer
from tests.support.scripted_clients import MESSAGES, client, source

FLAKY = [error(503), sse_answer()]
"""A module-level sequence, as a test file would share one: each script plays it from the start."""


def call(script: Scripted, spans: Spans, *hosts: str) -> ChatResult:
    async def main() -> ChatResult:
        async with client(script, spans, *(source(host) for host in hosts)) as c:
            return await c.chat(MESSAGES)

    return run_virtual(main())


@pytest.mark.parametrize("run", [1, 2])
def test_a_shared_answer_list_is_played_from_its_start_by_every_script(
    spans: Spans, run: int
) -> None:
    """The same list given to two scripts (or to two hosts of one) is not consumed by the first:
    each plays 503, then the answer (the second run got the answer at once)."""
    script = Scripted({"a": FLAKY})
    result = call(script, spans, "a")
    assert (result.stats.attempts, script.seen) == (2, ["a", "a"]), f"run {run}"
    assert len(FLAKY) == 2


def test_two_hosts_given_one_list_each_play_it_whole(spans: Spans) -> None:
    """``{"a": flaky, "b": flaky}``: b's first answer is its own 503, not what a left over."""
    flaky = [error(503), sse_answer()]
    script = Scripted({"a": flaky, "b": flaky})
    call(script, spans, "a")
    result = call(script, spans, "b")
    assert (result.stats.attempts, script.seen) == (2, ["a", "a", "b", "b"])


def test_a_host_without_answers_is_refused_when_the_script_is_made() -> None:
    """An empty list is a ConfigurationError naming the host, not an IndexError at a request."""
    with pytest.raises(ConfigurationError, match=r"answers\['a'\].*at least one answer"):
        Scripted({"a": []})


def test_a_request_to_a_host_without_a_script_names_the_host(spans: Spans) -> None:
    """A request to an unscripted host is a ConfigurationError naming it and the scripted ones
    (it was a bare KeyError)."""
    script = Scripted({"b": [sse_answer()]})
    with pytest.raises(ConfigurationError, match=r"no answers for host 'a'.*scripted: b"):
        call(script, spans, "a")


async def test_the_error_for_an_unscripted_host_leaves_out_the_query() -> None:
    """The request named in the error has no query: a key passed there (``?key=…``) stays
    out of the message."""
    script = Scripted({"b": [sse_answer()]})
    async with script.client() as http:
        with pytest.raises(ConfigurationError) as caught:
            await http.post("http://a.test/v1beta/models/m:generateContent?key=sk-secret-42")
    assert "sk-secret-42" not in str(caught.value)
    assert "POST a.test/v1beta/models/m:generateContent" in str(caught.value)
