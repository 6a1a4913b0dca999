"""The OpenAPI document is true: schemathesis generates requests for every operation
from the schema and runs all its default checks (no 5xx, every status code documented,
bodies matching their declared schemas, content types, ...) against the app."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from assay.server.app import create_app
from assay.store.db import Store


def _app(tmp_path_factory: pytest.TempPathFactory):
    store = Store(str(tmp_path_factory.mktemp("schema") / "schema.db"))
    store.start_run("run-1", metrics=["exact_match"])
    store.finish_run("run-1", status="finished")
    store.put_strategy_config("invoices", {"total": "EXACT"})
    # "testserver" is the Host name of schemathesis' in-process ASGI client
    return create_app(store, token="", max_samples=5, allowed_hosts=["testserver"])


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory):
    return schemathesis.openapi.from_asgi("/openapi.json", _app(tmp_path_factory))


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_every_operation_keeps_the_documented_contract(case) -> None:
    if case.operation.label != "POST /api/evaluate":
        case.call_and_validate()
        return
    # the schema says a sample is an object of any keys (field names, their aliases, and
    # unknown keys kept as metadata); the server validates each sample's fields and says
    # which are wrong with a 422 (a list for a text, a negative duration, two names of one
    # field with different values): a rejection of a schema-valid request that is a
    # documented per-sample error, not a broken contract
    response = case.call_and_validate(excluded_checks=[positive_data_acceptance])
    if response.status_code == 422 and case.meta.generation.mode.is_positive:
        detail = response.json()["detail"]
        assert isinstance(detail, list) and detail
        assert all(
            error["loc"][:2] in (["body", "samples"], ["body", "tags"]) for error in detail
        ), detail
