"""A conversation run and an agent run in the dashboard, in Debian's Chromium (Playwright):
the turns with their per-turn scores and intentions, the steps with the tool-call
matches, all stored payloads shown as text and never run. Values are worked out by hand
in tests/transcript_runs.py. Screenshots go to a temp dir (``ASSAY_SCREENSHOTS`` names
another). Skipped only when /usr/bin/chromium is absent (scripts/setup installs it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.server import create_app
from assay.server.live import running_server
from assay.store.db import Store
from transcript_runs import ARGUMENT_XSS, ERROR_XSS, REASON_XSS, TURN_XSS, store_transcript_runs

pytest_plugins = ["browser_conftest"]
pytest.register_assert_rewrite("browser_conftest")

from browser_conftest import BROWSER_MARKS  # noqa: E402

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = Store(str(tmp_path_factory.mktemp("transcripts") / "runs.db"))
    store_transcript_runs(store)
    with running_server(create_app(store, token="")) as url:
        yield url
    store.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("ASSAY_SCREENSHOTS")
    if chosen:
        Path(chosen).mkdir(parents=True, exist_ok=True)
        return Path(chosen)
    return tmp_path_factory.mktemp("screenshots")


def no_xss(dash_page: Any) -> None:
    dash_page.wait_for_timeout(200)  # let any <img onerror>/<b onmouseover> fire
    assert dash_page.evaluate("typeof window.__xss") == "undefined"
    assert dash_page.errors == []
    assert (
        dash_page.locator("main img, main b, main script:not([type='application/json'])").count()
        == 0
    )


def test_conversation_turns_with_their_scores(dash_page: Any, live_url: str, shots: Path) -> None:
    dash_page.goto(live_url + "/runs/chat-run")
    dash_page.click("#sample-0 > summary")
    turns = dash_page.locator("#sample-0 li.turn")
    assert turns.count() == 7
    roles = [turns.nth(i).get_attribute("data-role") for i in range(7)]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    turn = "#sample-0-turn-{} ".format
    assert (
        dash_page.inner_text(turn(1) + ".turn-content")
        == f"I'm vegetarian. Book dinner for 2. {TURN_XSS}"
    )
    # per-turn scores beside the assistant turns (0..1 shown as percentages)
    score = turn(6) + ".turn-score[data-metric='{}'] .score"
    assert dash_page.inner_text(score.format("knowledge_retention")) == "0.00%"
    assert dash_page.inner_text(score.format("role_adherence")) == "50.00%"
    assert dash_page.inner_text(
        turn(2) + ".turn-score[data-metric='knowledge_retention'] .score"
    ) == ("100.00%")
    assert (
        dash_page.inner_text(turn(2) + ".turn-score[data-metric='turn_relevancy'] .score") == "N/A"
    )
    retention = dash_page.inner_text(turn(6) + ".turn-score[data-metric='knowledge_retention']")
    assert REASON_XSS in retention and "forgotten:" in retention and "vegetarian" in retention
    assert dash_page.locator(turn(0) + ".turn-score").count() == 0
    # the intentions at the user turns that voiced them
    kept = dash_page.locator(turn(1) + ".intention")
    assert kept.get_attribute("data-satisfied") == "yes"
    assert "intention: book dinner for 2" in kept.inner_text()
    missed = dash_page.locator(turn(5) + ".intention")
    assert missed.locator(".score").inner_text() == "not satisfied"
    assert "never answered" in missed.inner_text()
    # the assistant's tool call, its arguments as a list; the tool's answer
    call = dash_page.inner_text(turn(2) + ".tool-call")
    assert "book_table" in call and "people: 2" in call and f"note: {ARGUMENT_XSS}" in call
    assert dash_page.inner_text(turn(3) + ".turn-content") == "confirmed #7"
    assert "result of call_1" in dash_page.inner_text(turn(3) + ".turn-head")
    assert "turn #9 · turn_relevancy: 100.00%" in dash_page.inner_text("#sample-0 .unplaced")
    # the metrics' table points to the turns instead of repeating them
    assert "turns: shown with the turns above" in dash_page.inner_text("#sample-0 table.evidence")
    dash_page.locator("#sample-0").screenshot(path=str(shots / "conversation.png"))
    no_xss(dash_page)


def test_agent_steps_and_tool_call_matches(dash_page: Any, live_url: str, shots: Path) -> None:
    dash_page.goto(live_url + "/runs/agent-run")
    dash_page.click("#sample-0 > summary")
    steps = dash_page.locator("#sample-0 table.steps tbody tr")
    assert steps.count() == 4
    cells = [steps.nth(i).locator("td").all_inner_texts() for i in range(4)]
    assert [c[:3] for c in cells] == [
        ["#0", "llm", "plan"],
        ["#1", "tool", "search_flights"],
        ["#2", "tool", "book_flight"],
        ["#3", "tool", "send_email"],
    ]
    assert cells[1][3].split("\n") == ["from: CDG", "to: JFK", "date: 2026-12-01"]
    assert cells[1][4:] == ["ok", "1.25 s", "3 flights"]
    assert cells[2][4] == f"failed\n{ERROR_XSS}"
    assert f"memo: {ARGUMENT_XSS}" in cells[2][3]
    assert cells[0][3] == "no arguments"
    accuracy = "#sample-0 table.matches[data-metric='tool_call_accuracy'] "
    first = dash_page.locator(accuracy + "tr.match[data-reference='0'] td").all_inner_texts()
    assert first[:3] == ["#0 search_flights", "step #1", "100.00%"]
    second = dash_page.locator(accuracy + "tr.match[data-reference='1'] td").all_inner_texts()
    assert second[:3] == ["#1 book_flight", "step #2", "50.00%"]
    assert "seats 0.00% · EXACT: '1' != '2'" in second[3]
    assert "memo not scored · not in the reference" in second[3]
    not_made = dash_page.locator(accuracy + "tr.unmatched-reference td").all_inner_texts()
    assert not_made[:2] == ["#2 cancel_hold", "not made"]
    not_expected = dash_page.locator(accuracy + "tr.unmatched-made td").all_inner_texts()
    assert not_expected[:2] == ["not expected", "step #3 send_email"]
    heading = dash_page.locator("#sample-0 .agent h4", has_text="tool_call_f1").inner_text()
    assert heading == "Tool-call matches · tool_call_f1 33.33%"  # F1 of P = R = 1/3
    expected = dash_page.locator("#sample-0 table.expected-calls tbody tr")
    assert expected.count() == 3
    dash_page.locator("#sample-0").screenshot(path=str(shots / "agent.png"))
    no_xss(dash_page)
