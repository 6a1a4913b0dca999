"""Shared by the API tests (test_server_api.py, test_server_scoring.py, test_server_auth.py,
test_server_pages.py): the module-scoped ``client`` over the populated store
(``stocked_store``, from browser_conftest, which those modules also load), ``fresh_client``
over an empty store of its own (for writes), ``JSON`` (the content type every write
sends) and ``detail_text`` (a 422's messages). The test modules load it with
``pytest_plugins``."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.server import create_app
from assay.store.db import Store


def detail_text(response: Any) -> str:
    """A 422's messages, one after another (its detail is a list of {loc, msg, type})."""
    detail = response.json()["detail"]
    assert isinstance(detail, list) and all(set(d) == {"loc", "msg", "type"} for d in detail)
    return "; ".join(f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}" for d in detail)


#: the content type every write sends (the dashboard's import does too)
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def client(stocked_store: Store) -> TestClient:
    return TestClient(create_app(stocked_store, token=""), base_url="http://localhost")


@pytest.fixture()
def fresh_client(tmp_path: Any) -> TestClient:
    """An app over an empty store of its own (for writes)."""
    return TestClient(
        create_app(Store(str(tmp_path / "fresh.db")), token=""), base_url="http://localhost"
    )
