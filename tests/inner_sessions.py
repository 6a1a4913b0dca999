"""The options of a pytest session run inside a test (pytester), like a user's test suite."""

from __future__ import annotations

#: ``-p no:`` for the plugins of this environment that an inner session has no use for: the
#: cache provider (it would write .pytest_cache), Playwright, and hypothesis, schemathesis,
#: pytest-benchmark and anyio, whose imports took about 1.3 s of an inner session's 1.8 s.
#: assay's own plugin still loads from its entry point, as in a user's suite.
PLAIN = (
    *("-p", "no:cacheprovider"),
    *("-p", "no:playwright"),
    *("-p", "no:hypothesispytest"),
    *("-p", "no:schemathesis"),
    *("-p", "no:benchmark"),
    *("-p", "no:anyio"),
)
