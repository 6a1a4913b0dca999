"""The pytest plugin's ``assay_target`` fixture: the application under test, called as
``assay run`` calls it, so a test can ask it and check the answer::

    def test_refund_answer(assay_target, assay):
        answered = assay_target.ask("Can I return an item after 30 days?")
        assert answered.target_call.status == "ok"
        assay.check(answered, metrics=["answer_relevance"])

The target comes from ``--assay-target SPEC`` (or ``ASSAY_TARGET``), with
``--assay-target-model`` (``ASSAY_TARGET_MODEL``) for an ``openai:`` target,
``--assay-target-key-env`` naming the variable that holds its key, and
``--assay-target-timeout`` seconds (default 30); the spec is ``assay run``'s
(`assay.inputs.targets`). A test that asks for the fixture with no target configured
fails, saying how to give one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

from assay.core.sample import Sample

if TYPE_CHECKING:
    from assay.inputs.targets import Target, TargetSettings

__all__ = ["TargetAsker", "add_target_options", "assay_target"]


class TargetAsker:
    """Asks the configured target: `ask` one query (or sample fields), `ask_all` many."""

    def __init__(self, target: Target, settings: TargetSettings) -> None:
        self.target = target
        self.settings = settings

    def ask(self, query: str | None = None, **fields: Any) -> Sample:
        """The sample ``query`` (and ``fields``: turns, expected, ...) as the target
        answered it: ``response``, ``duration``, ``first_token_time``, ``target_call``."""
        return self.ask_all([Sample(query=query, **fields)])[0]

    def ask_all(self, samples: Sequence[Sample | dict[str, Any]]) -> list[Sample]:
        """Each sample answered (concurrently, with ``assay run``'s timeouts and retries)."""
        from assay.inputs.targets import call_target

        given = [s if isinstance(s, Sample) else Sample.model_validate(s) for s in samples]
        return call_target(given, self.target, self.settings)


def add_target_options(group: Any) -> None:
    """The fixture's command-line options, in the plugin's option group."""
    group.addoption(
        "--assay-target",
        default=None,
        metavar="SPEC",
        help="The application under test for the assay_target fixture, as assay run takes "
        "it: openai:BASE_URL, http(s)://URL or python:MODULE:FUNCTION (else ASSAY_TARGET).",
    )
    group.addoption("--assay-target-model", default=None, help="The model an openai: target asks.")
    group.addoption(
        "--assay-target-key-env",
        default=None,
        metavar="VAR",
        help="The environment variable holding an openai: target's key.",
    )
    group.addoption(
        "--assay-target-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="Seconds a call may take (default 30).",
    )


@pytest.fixture(scope="session")
def assay_target(request: pytest.FixtureRequest) -> TargetAsker:
    """The application under test (see the module docstring)."""
    from assay.inputs.targets import TargetError, TargetSettings, parse_target

    option = request.config.getoption
    spec = option("--assay-target") or os.environ.get("ASSAY_TARGET")
    if not spec:
        pytest.fail(
            "the assay_target fixture needs a target: --assay-target SPEC or ASSAY_TARGET "
            "(openai:BASE_URL, http(s)://URL or python:MODULE:FUNCTION)",
            pytrace=False,
        )
    try:
        target = parse_target(
            spec,
            model=option("--assay-target-model") or os.environ.get("ASSAY_TARGET_MODEL"),
            key_env=option("--assay-target-key-env"),
        )
    except TargetError as exc:
        pytest.fail(f"--assay-target: {exc}", pytrace=False)
    return TargetAsker(target, TargetSettings(timeout=option("--assay-target-timeout")))
