"""Validity cards: one per registered metric, the shipped file and docs/validity.md in step,
``assay metrics --validity`` printing them, and the rules that write findings and failure
modes (on hand-made cards). The committed JSON is the artifact: no model runs here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from assay.cli import app
from assay.metrics.base import Metric
from assay.metrics.registry import list_metrics
from assay.outputs.validity_cards import (
    NO_EVIDENCE,
    ONLY_TRAINING_DATA,
    failure_modes,
    load_cards,
    refresh,
    render_markdown,
)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "validity.md"
runner = CliRunner()


def test_every_registered_metric_has_a_card():
    assert list(load_cards()["cards"]) == [c.name for c in list_metrics()]


def test_cards_are_current_with_the_registry_and_docstrings():
    # failure modes, aliases, statuses and findings are rebuilt from the registry and the
    # evidence (a new metric, an edited "Weaknesses:" paragraph make them stale)
    doc = load_cards()
    stale = [n for n, card in refresh(doc)["cards"].items() if doc["cards"].get(n) != card]
    assert not stale, (
        f"stale validity cards: {stale}; run `python benchmarks/validity.py --cards --rows` "
        "(no file: nothing is measured) to rewrite the cards and docs/validity.md"
    )
    assert refresh(doc) == doc


def test_docs_page_is_generated_from_the_cards_file():
    assert DOC.read_text(encoding="utf-8") == render_markdown(load_cards())


def _stsb_spearman(card: dict[str, Any], estimator: str) -> dict[str, Any]:
    (entry,) = [
        e
        for e in card["evidence"]
        if e["dataset"]["id"] == "stsb-dev"
        and e["statistic"] == "spearman"
        and e["estimator"] == estimator
    ]
    return entry


def test_cli_shows_semantic_similarity_stsb_spearman_from_the_file():
    card = load_cards()["cards"]["semantic_similarity"]
    entry = _stsb_spearman(card, "use-multilingual-v3")
    result = runner.invoke(app, ["metrics", "--validity", "semantic_similarity"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert f"{entry['value']:.3f}" in out
    assert f"({entry['ci95'][0]:.2f}–{entry['ci95'][1]:.2f})" in out
    assert "STS Benchmark dev" in out and str(entry["n"]) in out
    assert "also reported as accuracy, factual_consistency, truthfulness" in out
    assert "semantic_similarity_percentage" not in out  # one card, not a prefix match


def test_cli_follows_an_alias_to_the_canonical_card():
    result = runner.invoke(app, ["metrics", "--validity", "truthfulness"])
    assert result.exit_code == 0, result.output
    assert result.output.split()[0] == "semantic_similarity"


def test_cli_says_when_a_metric_has_no_evidence():
    assert load_cards()["cards"]["ttft"]["status"] == NO_EVIDENCE
    result = runner.invoke(app, ["metrics", "--validity", "ttft"])
    assert result.exit_code == 0, result.output
    assert f"ttft (performance; lower is better): {NO_EVIDENCE}" in " ".join(result.output.split())


def test_cli_rejects_an_unknown_metric():
    result = runner.invoke(app, ["metrics", "--validity", "no_such_metric"])
    assert result.exit_code == 2
    assert "unknown metric 'no_such_metric'" in result.output


def test_source_grounding_card_states_its_finding_and_names_a_better_metric():
    card = load_cards()["cards"]["source_grounding"]
    below = [e for e in card["evidence"] if e["statistic"] == "auroc" and e["ci95"][1] < 0.5]
    assert below, "the checks found source_grounding below chance on some data set"
    text = " ".join(card["findings"])
    assert "below chance" in text and "Better on the same data" in text


def test_toxicity_numbers_on_its_training_data_are_not_counted_as_evidence():
    cards = load_cards()["cards"]
    card = cards["toxicity_score"]
    evidence = card["evidence"]
    # every number is cross-validated, from a source left out of the estimator's
    # training, or marked as in-sample: the shipped models on the tweets they learned
    kinds = [
        (e.get("cross_validated", False), e.get("left_out", False), e.get("trained_on", False))
        for e in evidence
    ]
    assert all(sum(k) == 1 for k in kinds)
    in_sample = {(e["dataset"]["id"], e["scored"]) for e in evidence if e.get("trained_on")}
    assert in_sample == {
        ("davidson-tweets", "toxicity_score"),
        ("davidson-tweets", "toxicity_score (profanity-check)"),
        ("davidson-tweets", "toxicity_score (profanity-check+head)"),
    }
    left_out = {
        (e["dataset"]["id"], e["scored"]): e["value"] for e in evidence if e.get("left_out")
    }
    assert {d for d, _ in left_out} == {"davidson-tweets", "stormfront", "toxigen-statements"}
    # the default (the mean) loses to alt-profanity-check on no source left out of both
    for source in ("stormfront", "toxigen-statements"):
        mean = left_out[(source, "toxicity_score (profanity-check+head)")]
        assert mean > left_out[(source, "toxicity_score (profanity-check)")]
        assert mean > left_out[(source, "toxicity_score (head)")]
    # the base install's default (the head with the keywords) loses to neither part
    for source in ("davidson-tweets", "stormfront", "toxigen-statements"):
        both = left_out[(source, "toxicity_score (head+keywords)")]
        assert both >= left_out[(source, "toxicity_score (head)")]
        assert both >= left_out[(source, "toxicity_score (keywords)")]
    assert card["status"] == "human-labelled evidence"
    assert cards["compliance_score"]["status"] == ONLY_TRAINING_DATA  # tweets only
    # the keyword list was not trained on the tweets: its numbers are evidence
    assert cards["toxicity_keywords"]["status"] == "human-labelled evidence"


def test_the_faithfulness_card_has_no_in_sample_number_and_the_left_out_comparison():
    card = load_cards()["cards"]["faithfulness"]
    on_head_data = [
        e for e in card["evidence"] if e["dataset"]["id"] in {"begin-wow-dev", "qags-cnndm-dev"}
    ]
    # the default (the graded support averaged with the entailment model, trained on
    # neither data set) and the graded support are fitted on none of them; the support
    # head's numbers are cross-validated or left out of its training, never in-sample
    assert not any(e.get("trained_on") for e in on_head_data)
    assert {e["estimator"] for e in on_head_data if e["scored"] == "faithfulness"} >= {
        "sentence_support+entailment",
        "support_head (nested grouped 5-fold CV)",
        "support_head (fitted on qags-cnndm-dev only)",
        "support_head (fitted on begin-wow-dev only)",
    }
    graded = {e["estimator"] for e in on_head_data if e["scored"].endswith("(graded))")}
    assert graded == {"sentence_support"}
    left_out = [f for f in card["findings"] if f.startswith("Left out of its training")]
    # on BEGIN and QAGS: the mean, the entailment model alone (each with both readings of
    # the premises) and the support head; on QAGS in 10,000-word documents (no head scored
    # there): the mean and the model alone, with both readings
    assert len(left_out) == 5 + 5 + 4
    assert sum("on QAGS CNN/DailyMail, each article in a 10,000-word" in f for f in left_out) == 4
    assert any("fitted on begin-wow-dev), on QAGS CNN/DailyMail" in f for f in left_out)


def test_a_left_out_number_is_compared_with_the_estimator_fitted_on_nothing():
    head = {**_entry("similar_demo", 0.7, [0.6, 0.8]), "left_out": True, "fitted_on": "other"}
    head["estimator"] = "a head (fitted on other only)"
    graded = {**_entry("similar_demo", 0.75, [0.7, 0.8]), "left_out": True}
    graded.update(fitted_on="nothing", estimator="graded")
    doc = {"cards": {"similar_demo": {"evidence": [head, graded]}}}
    (finding,) = refresh(doc, [_Similar])["cards"]["similar_demo"]["findings"]
    assert finding == (
        "Left out of its training (fitted on other), on Demo set dev, good vs bad "
        "answers: auroc 0.700 (0.60–0.80) with a head (fitted on other only), against 0.750 "
        "(0.70–0.80) with graded (fitted on nothing)."
    )


# ---- the rules, on hand-made metrics and evidence ---------------------------------------------


class _Similar(Metric):
    """Similarity of two texts.

    Formula: cosine. Weaknesses: misses negation (see "a; b"); confuses topics (e.g.
    sport and games). Under load it is slow.
    """

    name = "similar_demo"
    family = "demo"


class _Better(Metric):
    """A better similarity, stating no weakness."""

    name = "better_demo"
    family = "demo"
    aliases = ("better_alias",)


def _entry(scored: str, value: float, ci: list[float]) -> dict[str, Any]:
    return {
        "dataset": {"id": "d", "name": "Demo set", "split": "dev", "licence": "MIT"},
        "check": "demo",
        "compared": "good vs bad answers",
        "scored": scored,
        "estimator": "cosine" if scored == "similar_demo" else "-",
        "statistic": "auroc",
        "value": value,
        "ci95": ci,
        "n": 10,
        "na": 0,
        "note": "",
        "assay_version": "0.1.0",
        "measured": "2025-01-01",
    }


def test_failure_modes_are_the_weaknesses_clauses_of_the_docstring():
    # split at "; " and sentence ends outside brackets and quotes, trailing stops dropped
    assert failure_modes(_Similar) == [
        'misses negation (see "a; b")',
        "confuses topics (e.g. sport and games)",
        "Under load it is slow",
    ]
    assert failure_modes(_Better) == []


def test_findings_below_chance_and_better_metric_on_the_same_items():
    doc = {
        "cards": {
            "similar_demo": {"evidence": [_entry("similar_demo", 0.3, [0.2, 0.4])]},
            "better_demo": {"evidence": [_entry("better_demo", 0.9, [0.85, 0.95])]},
        }
    }
    cards = refresh(doc, [_Similar, _Better, type("_New", (_Better,), {"name": "new_demo"})])[
        "cards"
    ]
    assert cards["similar_demo"]["findings"] == [
        "On Demo set dev, good vs bad answers: auroc 0.300 (0.20–0.40) with cosine, below "
        "chance (0.5): it orders these items against the human labels more often than with "
        "them, so it measures something other than what its name suggests.",
        "Better on the same data (Demo set dev, good vs bad answers): better_demo, auroc "
        "0.900 (0.85–0.95) against 0.300 (0.20–0.40) with cosine.",
    ]
    assert cards["better_demo"]["findings"] == []
    assert cards["better_demo"]["aliases"] == ["better_alias"]
    # a metric with no entry gets a card saying so
    assert cards["new_demo"]["status"] == NO_EVIDENCE and cards["new_demo"]["evidence"] == []


def test_an_interval_touching_chance_is_reported_as_indistinguishable():
    doc = {"cards": {"similar_demo": {"evidence": [_entry("1 - similar_demo", 0.55, [0.48, 0.6])]}}}
    (finding,) = refresh(doc, [_Similar])["cards"]["similar_demo"]["findings"]
    assert finding == (
        "On Demo set dev, good vs bad answers: auroc 0.550 (0.48–0.60), not distinguishable "
        "from chance (0.5)."
    )


def test_rendered_markdown_has_a_family_table_and_the_card():
    doc = {
        "datasets": {
            "d": {
                "name": "Demo set",
                "split": "dev",
                "labels": "good/bad",
                "source": "S",
                "licence": "MIT",
            }
        },
        "cards": {
            "similar_demo": {
                "evidence": [
                    {**_entry("similar_demo", 0.3, [0.2, 0.4]), "baselines": {"reply words": 0.25}}
                ]
            }
        },
    }
    text = render_markdown(refresh(doc, [_Similar, _Better]))
    assert "Baselines on the same items:\n- demo auroc: reply words 0.250\n" in text
    assert "| Demo set | dev | good/bad | S; MIT |" in text
    assert (
        "| similar_demo | Demo set dev | good vs bad answers | similar_demo | cosine | auroc "
        "| 0.300 (0.20–0.40) | 10 |"
    ) in text
    assert f"| better_demo | {NO_EVIDENCE} |" in text
    assert "### similar_demo" in text and "- Under load it is slow" in text
