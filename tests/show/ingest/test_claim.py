"""The claim ``otel-llm collector`` holds on its store: taken once, read by applications while
it is held, and not refused because an application was looking at it that instant."""

from __future__ import annotations

import fcntl
import socket
import threading
from pathlib import Path

import pytest

from otel_llm import _env as env
from otel_llm._show._ingest._claim import (
    SPOOL_LOCK,
    LiveCollector,
    StoreClaimed,
    announce,
    claim,
    live_collector,
    spool_path,
)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    spool_path(path).mkdir()
    return path


def test_a_claim_is_read_while_held_and_taken_once(store: Path) -> None:
    assert live_collector(store) is None
    handle = claim(store)
    announce(handle, (4317, 4318))
    assert live_collector(store) == LiveCollector((4317, 4318))
    with pytest.raises(StoreClaimed):
        claim(store)
    handle.close()
    assert live_collector(store) is None
    claim(store).close()


def test_an_application_looking_does_not_keep_the_collector_from_its_claim(store: Path) -> None:
    """``init()`` holds the lock shared for an instant to see whether a collector runs; a
    collector starting in that instant waits it out instead of saying another one runs."""
    looking = (spool_path(store) / SPOOL_LOCK).open("a+b")
    fcntl.flock(looking.fileno(), fcntl.LOCK_SH)
    released = threading.Timer(0.1, looking.close)
    released.start()
    try:
        claim(store).close()
    finally:
        released.join()


@pytest.mark.parametrize(
    ("url", "reached"),
    [
        ("http://127.0.0.1:4318/v1/traces", True),
        ("http://localhost:4318", True),
        ("http://localhost:4317", True),
        ("http://[::1]:4317", False),  # it listens on 127.0.0.1 only
        ("http://127.0.0.2:4318", False),
        ("http://LOCALHOST:4318", True),
        ("https://127.0.0.1:4318/v1/traces", False),  # it speaks no TLS
        ("https://localhost:4317", False),
        ("127.0.0.1:4317", False),  # gRPC without a scheme speaks TLS (unless *_INSECURE=true)
        ("http://127.0.0.1:9999/v1/traces", False),
        ("http://collector.internal:4318/v1/traces", False),
        ("http://127.0.0.1/v1/traces", False),
        ("http://127.0.0.1:99999/v1/traces", False),
    ],
)
def test_which_endpoints_reach_the_collector(
    url: str, reached: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint the collector would refuse (another address, TLS, which it does not speak)
    is not taken for it: an application sending to https:// or to host:port over gRPC
    (TLS) was told its spans went to the collector, its embedded store was left off, and
    every span was lost (0 of 9 stored, with the real collector)."""
    for variable in (env.OTEL_EXPORTER_OTLP_INSECURE, env.OTEL_EXPORTER_OTLP_TRACES_INSECURE):
        monkeypatch.delenv(variable, raising=False)
    assert LiveCollector((4317, 4318)).receives(url) is reached


@pytest.mark.parametrize(
    ("variable", "value", "reached"),
    [
        (env.OTEL_EXPORTER_OTLP_INSECURE, "true", True),
        (env.OTEL_EXPORTER_OTLP_TRACES_INSECURE, "TRUE", True),
        (env.OTEL_EXPORTER_OTLP_INSECURE, "false", False),
    ],
)
def test_grpc_without_a_scheme_reaches_it_when_told_to_speak_no_tls(
    variable: str, value: str, reached: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (env.OTEL_EXPORTER_OTLP_INSECURE, env.OTEL_EXPORTER_OTLP_TRACES_INSECURE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, value)
    assert LiveCollector((4317,)).receives("localhost:4317") is reached
    assert LiveCollector((4317,)).receives("https://localhost:4317") is False


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "127.0.0.2"])
def test_an_endpoint_is_taken_for_the_collector_only_where_it_connects(host: str) -> None:
    """The collector listens on 127.0.0.1 alone: an application sending to [::1] or
    127.0.0.2 was told its spans went to the collector and its embedded store was left off,
    and then every span was refused (connection refused) and lost."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        try:
            socket.create_connection((host.strip("[]"), port), timeout=5).close()
            connects = True
        except OSError:
            connects = False
    assert LiveCollector((port,)).receives(f"http://{host}:{port}/v1/traces") is connects


def test_the_spool_of_a_store_named_by_dots_is_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--db .` (the working directory is the store) once raised ValueError from pathlib, a
    traceback; `..` and `a/..` named a folder `...otlp` inside the working directory, so the
    claim of `--db ..` was not found by an application naming the same store another way."""
    inside = tmp_path / "store" / "sub"
    inside.mkdir(parents=True)
    monkeypatch.chdir(inside.parent)
    beside = tmp_path / "store.otlp"
    assert spool_path(Path(".")) == beside
    assert spool_path(Path("sub/..")) == beside
    assert spool_path(inside / "..") == beside
    assert spool_path(tmp_path / "store") == beside
    monkeypatch.chdir(inside)
    assert spool_path(Path("..")) == beside
    assert spool_path(Path("../sub")) == inside.with_name("sub.otlp")


def test_a_store_named_by_dots_is_claimed_where_applications_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim `otel-llm collector --db .` takes is the one init() finds for the store's
    absolute path."""
    store = tmp_path / "store"
    store.mkdir()
    monkeypatch.chdir(store)
    spool_path(Path(".")).mkdir()
    handle = claim(Path("."))
    try:
        announce(handle, (4317, 4318))
        assert live_collector(store.absolute()) == LiveCollector((4317, 4318))
        assert live_collector(store / "sub" / "..") == LiveCollector((4317, 4318))
    finally:
        handle.close()


def test_an_endpoint_on_the_other_protocols_port_is_not_the_collector(store: Path) -> None:
    """OTLP/HTTP sent to the collector's gRPC port (4317, the port most guides name) or gRPC to
    its HTTP port fails every export; with the protocol the exporter speaks, such an endpoint
    is not taken for the collector (it was: the embedded store was left off and every span
    lost, 0 of 9 with the real collector). The claim says which port speaks which protocol;
    without a protocol, or from a claim that does not say, either port counts, as before."""
    handle = claim(store)
    try:
        announce(handle, (4317, 4318), protocols={"grpc": 4317, "http/protobuf": 4318})
        collector = live_collector(store)
        assert collector is not None
        assert collector.receives("http://127.0.0.1:4318/v1/traces", "http/protobuf")
        assert not collector.receives("http://127.0.0.1:4317/v1/traces", "http/protobuf")
        assert collector.receives("http://localhost:4317", "grpc")
        assert not collector.receives("http://localhost:4318", "grpc")
        assert not collector.receives("https://localhost:4318/v1/traces", "http/protobuf")
        assert collector.receives("http://127.0.0.1:4317/v1/traces")  # protocol not known
        announce(handle, (4317, 4318))  # a claim of an earlier version
        earlier = live_collector(store)
        assert earlier is not None
        assert earlier.receives("http://127.0.0.1:4317/v1/traces", "http/protobuf")
    finally:
        handle.close()


@pytest.mark.parametrize("linked", ["store", "parent"])
def test_a_store_reached_through_a_symlink_is_claimed_under_its_real_path(
    tmp_path: Path, linked: str
) -> None:
    """`--db /link/store` and `init(db_path="/real/store")` name one store: its spool folder
    and claim are named from its real path, so each sees the other's claim (named from the path
    as written, each looked in a folder of its own and every span was stored twice)."""
    real = tmp_path / "real" / "store"
    real.mkdir(parents=True)
    if linked == "store":
        link = tmp_path / "link"
        link.symlink_to(real, target_is_directory=True)
    else:
        (tmp_path / "linked").symlink_to(real.parent, target_is_directory=True)
        link = tmp_path / "linked" / "store"
    assert spool_path(link) == spool_path(real) == real.with_name("store.otlp")
    for claimed, looked in ((link, real), (real, link)):
        spool_path(claimed).mkdir(exist_ok=True)
        handle = claim(claimed)
        try:
            announce(handle, (4317, 4318))
            assert live_collector(looked) == LiveCollector((4317, 4318))
        finally:
            handle.close()
