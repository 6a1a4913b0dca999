"""Shared fixtures. The whole suite runs with the network off: any connection to a
non-loopback address raises, which proves nothing phones home (only judge or embedding
endpoints a user configured are ever contacted, and tests run those on 127.0.0.1)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket

import pytest

pytest_plugins = ["pytester"]

# psycopg is imported before any test: the pytester fixture restores sys.modules after its
# test, dropping what the test imported first; psycopg's C extension (psycopg_binary)
# keeps raising the error classes of its first import, so a psycopg imported again raises
# errors that are not its own `psycopg.Error` and SQLAlchemy no longer wraps them (an
# unreachable PostgreSQL store then escaped as a bare psycopg.OperationalError).
with contextlib.suppress(ImportError):  # without the postgres extra those tests skip
    import psycopg  # noqa: F401

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


class NetworkBlocked(OSError):
    pass


def _check_address(address: object) -> None:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        try:
            ip = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            if host == "localhost":
                return
            raise NetworkBlocked(f"test suite is offline: connection to {host!r} refused") from None
        if not ip.is_loopback:
            raise NetworkBlocked(f"test suite is offline: connection to {host} refused")


def _guarded_connect(self: socket.socket, address: object) -> None:
    _check_address(address)
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    _check_address(address)
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the million-sample run in the background when its test is collected (it
    runs on the core the suite leaves idle; `large_runs`)."""
    from large_runs import LARGE_RUN_TEST, start_large_run

    if any(item.name == LARGE_RUN_TEST for item in session.items):
        start_large_run(1_000_000)


def pytest_sessionfinish(session: pytest.Session) -> None:
    from large_runs import stop_large_run

    stop_large_run()


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("assay-cache"))


@pytest.fixture(scope="session")
def resources(cache_dir: str):
    """One set of loaded models for the whole test session, caching under a temp dir."""
    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources, set_default_resources

    res = Resources(AssayConfig(cache_dir=cache_dir))
    set_default_resources(res)
    yield res
    set_default_resources(None)
    res.close()


@pytest.fixture()
def env(tmp_path, monkeypatch, cache_dir: str):
    """A temporary working directory for a CLI run, with the session's model cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASSAY_CACHE_DIR", cache_dir)
    return tmp_path
