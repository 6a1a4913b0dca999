"""Screenshots of every dashboard page for docs/dashboard.md.

Builds a demo results store in a temporary directory (three RAG runs tagged by method and
question type, a pytest run spread over two days, a conversation with per-turn scores and
an agent run with tool-call matches; values come from a random generator with a fixed
seed, so the pictures are the same every time), serves it on 127.0.0.1 and
drives Debian's Chromium through Playwright. Writes docs/screenshots/<page>.png.

    python scripts/screenshots.py [--out docs/screenshots] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import update

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.server import create_app
from assay.server.live import HEADLESS_CHROMIUM_ARGS, running_server
from assay.store.db import Store
from assay.store.models import MetricSnapshot, Run, utcnow

ROOT = Path(__file__).resolve().parents[1]
METHODS = {"local_search": 0.88, "basic_search": 0.55, "llm_with_context": 0.78}
QUESTION_TYPES = (
    "fact_retrieval",
    "complex_reasoning",
    "contextual_summarize",
    "creative_generation",
)
DIFFICULTY = {
    "fact_retrieval": 0.06,
    "complex_reasoning": -0.06,
    "contextual_summarize": 0.0,
    "creative_generation": -0.14,
}
QUESTIONS = [
    "What is the Cornish heath's Latin name?",
    "Who married Princess Frederica of Hanover?",
    "How do King Arthur and the Land of Lyonesse connect in the novel?",
    "What is the significance of the sea and the cove for Charles?",
]


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


def _rag_results(rng: np.random.Generator, quality: float) -> dict[str, MetricResult]:
    def ratio(name: str, centre: float, spread: float = 0.08, **details: object) -> MetricResult:
        return MetricResult(name, _clip(rng.normal(centre, spread)), details=dict(details))

    sim = _clip(rng.normal(quality, 0.08))
    label = "CORRECT" if sim >= 0.7 else ("DONT_KNOW" if sim < 0.45 else "WRONG")
    return {
        "semantic_similarity": MetricResult(
            "semantic_similarity", sim, details={"threshold": 0.7, "label": label}
        ),
        "bert_score_f1": ratio("bert_score_f1", quality - 0.05),
        "context_relevance": ratio("context_relevance", quality - 0.02),
        "context_coverage": ratio("context_coverage", quality - 0.1, 0.1),
        "rouge": ratio("rouge", quality - 0.25, 0.1),
        "output_validity": ratio("output_validity", 0.95, 0.04),
        "toxicity_score": ratio("toxicity_score", 0.03, 0.02, matched=[]),
        "compliance_score": ratio("compliance_score", 0.93, 0.05),
        "harmfulness_score": ratio("harmfulness_score", 0.02, 0.02),
        "e2e_latency": MetricResult(
            "e2e_latency",
            float(max(120.0, rng.normal(1800 - 600 * quality, 250))),
            method="measurement",
        ),
        "context_precision_at_k": MetricResult(
            "context_precision_at_k", None, reason="no contexts were retrieved"
        ),
    }


def _finish_at(store: Store, run_id: str, when: datetime) -> None:
    """Finish a run as if it had finished at ``when``: its metric snapshots (the history
    chart's metric points, stamped at finish time) are moved back to that moment."""
    before = utcnow()
    store.finish_run(run_id)
    with store.session() as session, session.begin():
        session.execute(
            update(MetricSnapshot).where(MetricSnapshot.timestamp >= before).values(timestamp=when)
        )
        session.execute(
            update(Run).where(Run.id == run_id).values(started_at=when, finished_at=when)
        )


def _turns(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": role, "content": content} for role, content in pairs]


def _transcript_runs(store: Store, now: datetime) -> None:
    """A support chat with per-turn scores and a travel agent scored by the tool-call
    metrics (arguments compared EXACT, so no model is needed)."""
    from assay.engine.resources import Resources
    from assay.metrics.registry import metric_class

    store.start_run("support-chat", name="support bot · conversations", source="cli")
    turns = _turns(
        ("system", "You are the support assistant of an online bookshop."),
        ("user", "Hi, I'm Ana. My order 1182 hasn't arrived and I need it by Friday."),
        ("assistant", "Sorry, Ana. Order 1182 left the depot on Monday; it arrives Thursday."),
        ("user", "Can you send it by express instead?"),
        ("assistant", "What is your order number?"),
        ("user", "1182, as I said."),
        ("assistant", "Express is booked for order 1182: it arrives Wednesday."),
    )
    per_turn = {
        "knowledge_retention": [
            (2, 1.0, "uses the order number"),
            (4, 0.0, "asks again for the order number given at turn 1"),
            (6, 1.0, "keeps it"),
        ],
        "turn_relevancy": [
            (2, 1.0, "answers the delivery question"),
            (4, 0.5, "on topic but does not answer"),
            (6, 1.0, "books the express delivery"),
        ],
    }
    results = {
        name: MetricResult(
            name,
            sum(score for _, score, _ in entries) / len(entries),
            method="llm",
            details={"turns": [{"turn": t, "score": v, "reason": r} for t, v, r in entries]},
        )
        for name, entries in per_turn.items()
    }
    results["conversation_completeness"] = MetricResult(
        "conversation_completeness",
        1.0,
        method="llm",
        details={
            "intentions": [
                {
                    "turn": 1,
                    "intention": "get order 1182 by Friday",
                    "satisfied": True,
                    "reason": "express booked, arrives Wednesday",
                },
                {
                    "turn": 3,
                    "intention": "switch to express",
                    "satisfied": True,
                    "reason": "booked at turn 6",
                },
            ]
        },
    )
    store.record(
        "support-chat",
        0,
        Sample(id="ana-1182", turns=turns),
        results,
        status="passed",
        duration=4.2,
        timestamp=now - timedelta(hours=2),
    )
    _finish_at(store, "support-chat", now - timedelta(hours=2))

    store.start_run("travel-agent", name="travel agent · tool calls", source="cli")
    agent = Sample(
        id="lisbon-trip",
        query="Book me a flight to Lisbon on 12 December and a hotel for two nights.",
        trace=[
            {"name": "plan", "kind": "llm", "latency": 0.8},
            {
                "name": "search_flights",
                "arguments": {"to": "LIS", "date": "2026-12-12"},
                "latency": 1.4,
                "result": "TP1351 09:40, FR8372 14:05",
            },
            {
                "name": "book_flight",
                "arguments": {"flight": "TP1351", "seats": 1},
                "latency": 0.9,
                "result": "booked, ref QX7",
            },
            {
                "name": "book_hotel",
                "arguments": {"city": "Lisbon", "nights": 3},
                "ok": False,
                "error": "no rooms for 3 nights",
                "latency": 2.1,
            },
        ],
        expected_tool_calls=[
            {"name": "search_flights", "arguments": {"to": "LIS", "date": "2026-12-12"}},
            {"name": "book_flight", "arguments": {"flight": "TP1351", "seats": 1}},
            {"name": "book_hotel", "arguments": {"city": "Lisbon", "nights": 2}},
            {"name": "send_itinerary", "arguments": {}},
        ],
    )
    exact = {a: "EXACT" for a in ("to", "date", "flight", "seats", "city", "nights")}
    resources = Resources()
    scored = {
        name: metric_class(name)(argument_strategies=exact).compute(agent, resources)
        for name in ("tool_call_accuracy", "tool_call_f1")
    }
    store.record(
        "travel-agent",
        0,
        agent,
        scored,
        status="failed",
        duration=5.2,
        timestamp=now - timedelta(hours=1),
    )
    _finish_at(store, "travel-agent", now - timedelta(hours=1))


def build_demo_store(path: Path) -> Store:
    """A store with three RAG runs (the RAG specification's methods x question types) and a
    pytest run."""
    store = Store(str(path))
    rng = np.random.default_rng(7)
    now = utcnow()
    for run_id, name, age_hours, shift in (
        ("rag-baseline", "llama3 RAG · baseline", 30, -0.08),
        ("rag-graph", "llama3 RAG · graph retrieval", 3, 0.0),
    ):
        store.start_run(
            run_id,
            name=name,
            source="cli",
            dataset="examples/rag_novels.jsonl",
            tags={"model": "llama3"},
        )
        index = 0
        for method, quality in METHODS.items():
            for qtype in QUESTION_TYPES:
                for k in range(2):
                    q = QUESTIONS[(index + k) % len(QUESTIONS)]
                    level = quality + DIFFICULTY[qtype] + shift
                    results = _rag_results(rng, level)
                    response = (
                        "The Cornish heath is Erica vagans, described in the novel as "
                        "'the lovely Cornish heath'."
                        if index % 5
                        else "<script>window.__xss=1</script> I don't know."
                    )
                    sample = Sample(
                        id=f"{method}-{qtype}-{k}",
                        query=q,
                        response=response,
                        expected="Erica vagans (the Cornish heath).",
                        tags={"method": method, "question_type": qtype},
                        duration=float(results["e2e_latency"].value or 0) / 1000.0,
                    )
                    sim = results["semantic_similarity"].value or 0.0
                    store.record(
                        run_id,
                        index,
                        sample,
                        results,
                        status="passed" if sim >= 0.7 else "failed",
                        timestamp=now - timedelta(hours=age_hours - index * 0.05),
                    )
                    index += 1
        _finish_at(store, run_id, now - timedelta(hours=age_hours - 1))
    # a pytest suite run every two hours over two days, for the hourly history
    for r in range(24):
        run_id = f"pytest-{r:02d}"
        hours_ago = 47.0 - r * 2
        store.start_run(run_id, name="chatbot regression suite", source="pytest")
        for i in range(6):
            recent = hours_ago < 24
            ok = rng.random() > (0.12 if recent else 0.3)
            duration = float(max(0.2, rng.normal(2.2 if recent else 3.1, 0.8)))
            if (r * 6 + i) % 37 == 0:
                duration = 34.0  # a timeout
            sample = Sample(
                id=f"test_answer_{i}",
                query="What are your opening hours?",
                response="We are open 9:00–17:00, Monday to Friday.",
                duration=duration,
            )
            results = {
                "semantic_similarity": MetricResult(
                    "semantic_similarity", _clip(rng.normal(0.82 if ok else 0.55, 0.06))
                ),
                "output_stability": MetricResult("output_stability", _clip(rng.normal(0.9, 0.05))),
                "schema_compliance": MetricResult("schema_compliance", 1.0 if ok else 0.0),
                "toxicity_score": MetricResult("toxicity_score", _clip(rng.normal(0.02, 0.02))),
                "compliance_score": MetricResult("compliance_score", _clip(rng.normal(0.95, 0.03))),
                "harmfulness_score": MetricResult(
                    "harmfulness_score", _clip(rng.normal(0.01, 0.01))
                ),
                "e2e_latency": MetricResult("e2e_latency", duration * 1000.0, method="measurement"),
            }
            store.record(
                run_id,
                i,
                sample,
                results,
                status="passed" if ok else ("skipped" if i == 5 else "failed"),
                test_name=f"tests/test_chatbot.py::test_answer[{i}]",
                timestamp=now - timedelta(hours=hours_ago - i * 0.01),
            )
        _finish_at(store, run_id, now - timedelta(hours=hours_ago - 0.1))
    _transcript_runs(store, now)
    store.put_strategy_config(
        "customer-records",
        {
            "customer_name": "FUZZY",
            "address_line_1": "SEMANTIC",
            "phone_number": "EXACT",
            "internal_notes": "IGNORE",
            "description": "SEMANTIC",
        },
    )
    return store


MAX_HEIGHT = 3000  # the run page lists every sample; the top shows what matters
PAGES = (
    ("overview", "/", None),
    ("history", "/history?hours=72", "[data-charts=ready]"),
    ("runs", "/runs", None),
    ("run_detail", "/runs/rag-graph", None),
    ("conversation", "/runs/support-chat", None),
    ("agent", "/runs/travel-agent", None),
    ("compare", "/compare?a=rag-baseline&b=rag-graph", "[data-charts=ready]"),
    ("field_strategies", "/config/field-strategies", "[data-ready=true]"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = build_demo_store(Path(tmp) / "demo.db")
        with running_server(create_app(store)) as url, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=HEADLESS_CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1360, "height": 900})
            for name, path, ready in PAGES:
                page.goto(url + path)
                if ready:
                    page.wait_for_selector(ready)
                if name in {"run_detail", "conversation", "agent"}:
                    page.click("#sample-0 > summary")
                if name == "field_strategies":
                    page.click("a[data-config=customer-records]")
                    page.wait_for_selector("tr.field-row")
                target = args.out / f"{name}.png"
                if name in {"conversation", "agent"}:  # the sample is what these show
                    page.locator("#sample-0").screenshot(path=str(target))
                    print(f"wrote {target}")
                    continue
                height = page.evaluate("document.documentElement.scrollHeight")
                page.screenshot(
                    path=str(target),
                    full_page=True,
                    clip={"x": 0, "y": 0, "width": 1360, "height": min(height, MAX_HEIGHT)},
                )
                print(
                    f"wrote {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}"
                )
            browser.close()
        store.close()


if __name__ == "__main__":
    main()
