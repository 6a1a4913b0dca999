"""The annotation queue as a person uses it: Debian's Chromium (Playwright) labels ten
samples with the keyboard only, and the labels are then read back from the store.

The run holds twelve samples whose faithfulness values sit 0.01, 0.02, ... 0.12 from the
run's threshold 0.5 (alternately above and below), so the uncertain order is sample 0, 1,
2, ... 11. The person types their name (kept in localStorage), then answers: 1 or 0 by
key, s to skip sample 2 (it comes back last), n to write a note whose text holds the keys
"1 0 s u" (typing in the note presses none of them), Enter to leave the note, and u to
undo one answer and give it again. Sample 1's response carries a script payload that must
show as text and never run. ``window.__queueSwitchMs`` holds the time from each key to the
next sample on screen (the target is under 200 ms; the samples come from the queue's
prefetch).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.server import create_app
from assay.server.live import running_server
from assay.store.db import Store

pytest_plugins = ["browser_conftest"]
pytest.register_assert_rewrite("browser_conftest")

from browser_conftest import BROWSER_MARKS  # noqa: E402

pytestmark = BROWSER_MARKS

RUN = "run-browser"
HOSTILE = '<img src=x onerror="window.__xss=1">'
#: sample i sits (i + 1) / 100 from the threshold, above it for even i, below for odd i
VALUES = [round(0.5 + (0.01 * (i + 1)) * (1 if i % 2 == 0 else -1), 2) for i in range(12)]
NAME = "Ada <i>"
NOTE = "claims 1 0 s u fine"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    opened = Store(str(tmp_path_factory.mktemp("queue-browser") / "queue.db"))
    opened.start_run(RUN, config={"thresholds": {"faithfulness": 0.5}})
    for i, value in enumerate(VALUES):
        sample = Sample(
            id=f"b{i}",
            query=f"Question {i}?",
            response=f"Answer {i}. {HOSTILE if i == 1 else ''}",
            contexts=[f"Context of question {i}."],
        )
        result = MetricResult("faithfulness", value, method="local")
        opened.record(RUN, i, sample, {"faithfulness": result}, status="passed")
    opened.finish_run(RUN)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def live_url(store: Store) -> Iterator[str]:
    with running_server(create_app(store, token="")) as url:
        yield url


def shown(page: Any) -> int:
    """The index of the sample on screen, once one is."""
    page.wait_for_selector('#item:not([data-index=""])')
    return int(page.get_attribute("#item", "data-index"))


def press_and_wait(page: Any, key: str) -> int:
    """Press ``key`` and return the index of the sample that then shows."""
    before = page.get_attribute("#item", "data-index")
    page.keyboard.press(key)
    page.wait_for_selector(f'#item:not([data-index="{before}"])', state="attached")
    return shown(page)


def test_ten_samples_labelled_with_the_keyboard_only(
    dash_page: Any, live_url: str, store: Store
) -> None:
    page = dash_page
    page.goto(f"{live_url}/runs/{RUN}/label?metric=faithfulness")
    page.keyboard.type(NAME)  # the name field has the focus on a first visit
    page.keyboard.press("Enter")
    assert shown(page) == 0
    assert "0.51" not in page.inner_text("#queue")  # the value is not on the page

    given: dict[int, str] = {}
    order = [0]
    plan = ["1", "0", "s", "n", "1", "0", "u", "1", "0", "1", "1", "0", "1", "0"]
    for key in plan:
        current = shown(page)
        if key == "n":  # a note, typed without triggering the verdict keys in it
            page.keyboard.press("n")
            page.keyboard.type(NOTE)
            page.keyboard.press("Enter")
            assert shown(page) == current and page.input_value("#note") == NOTE
            continue
        if key == "u":  # undo the last answer: its sample comes back
            undone = max(given, key=lambda i: order.index(i))
            page.keyboard.press("u")
            page.wait_for_selector(f'#item[data-index="{undone}"]')
            del given[undone]
            order.append(undone)
            continue
        if key != "s":
            given[current] = key
        order.append(press_and_wait(page, key))
        if len(given) == 10:
            break

    # the ten answers reach the store: one label each, by this annotator, in order
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        labels = [x for x in store.labels_for_run(RUN) if x.annotator == NAME]
        if len(labels) == 10:
            break
        time.sleep(0.05)
    by_index = {int(x.sample_id[1:]): x for x in labels}
    assert {i: str(int(x.value)) for i, x in by_index.items()} == given
    assert 2 not in by_index  # skipped, not labelled
    noted = [x for x in labels if x.note]
    assert [x.note for x in noted] == [NOTE]
    assert all(x.metric == "faithfulness" and x.run_id == RUN for x in labels)
    assert order[:4] == [0, 1, 2, 3]  # uncertain order; the skipped sample 2 comes last

    # the untrusted texts show as text and never run; the name is kept for the next visit
    page.wait_for_selector("#last-answer:not([hidden])")
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.evaluate("localStorage.getItem('assay-annotator')") == NAME
    assert NAME in page.inner_text("#annotator-shown")
    switches = page.evaluate("window.__queueSwitchMs")
    assert len(switches) >= 10
    print(f"key to next sample: max {max(switches):.1f} ms, values {switches}")
    assert max(switches) < 200
    assert page.errors == []
