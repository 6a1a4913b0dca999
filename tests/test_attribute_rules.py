"""The attribute ruler's indexed matcher (assay.text.attribute_rules) against spaCy's own
``Matcher``: the same matches on real text, and by hand on rules of every plain kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.dev_data import dev_file

from assay.text.attribute_rules import IndexedRules, index_attribute_ruler

spacy = pytest.importorskip("spacy")
from spacy.pipeline.attributeruler import AttributeRuler  # noqa: E402
from spacy.tokens import Doc  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def nlp(resources):
    return resources.nlp


def _example_texts() -> list[str]:
    """Every text field of the shipped examples, and the help centre's pages."""
    texts: list[str] = []
    for path in sorted(EXAMPLES.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            for value in row.values():
                items = value if isinstance(value, list) else [value]
                texts += [v for v in items if isinstance(v, str) and v.strip()]
    texts += [p.read_text(encoding="utf-8") for p in sorted(EXAMPLES.glob("help_centre/*.md"))]
    return texts


def _same_matches(nlp, texts: list[str]) -> int:
    """Assert the indexed and spaCy's matches are equal on each text; the match count."""
    ruler = nlp.get_pipe("attribute_ruler")
    unannotated = ["attribute_ruler", "lemmatizer", "ner"]
    count = 0
    for doc in nlp.pipe(texts, disable=unannotated):
        ours = ruler.match(doc)
        assert ours == AttributeRuler.match(ruler, doc), doc.text[:80]
        count += len(ours)
    return count


def test_the_pipeline_ruler_is_indexed_and_matches_as_spacy_does(nlp):
    ruler = nlp.get_pipe("attribute_ruler")
    assert ruler.match.__self__.__class__ is IndexedRules
    odd = [
        "There is a cat, and there were two dogs.",
        "I didn't do it; he'd have had it; nothin' y' know.",
        "Gets got getting gotten.",
        "  spaced \t text \n\n\n here  ",
        "",
    ]
    assert _same_matches(nlp, _example_texts() + odd) > 4_000


def test_matches_as_spacy_does_on_news_articles(nlp):
    path = dev_file("qags-cnndm-dev.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()[:60]
    assert _same_matches(nlp, [json.loads(line)["article"] for line in lines]) > 10_000


def _ruler(rules: list[tuple[list, dict, int]]) -> AttributeRuler:
    ruler = AttributeRuler(spacy.blank("en").vocab, "attribute_ruler")
    for patterns, attrs, index in rules:
        ruler.add(patterns, attrs, index)
    return ruler


def test_every_plain_test_kind_by_hand():
    rules = [
        ([[{"TAG": "NN"}]], {"POS": "NOUN"}, 0),  # 0: equality
        ([[{"LOWER": {"IN": ["is", "was"]}, "DEP": {"NOT_IN": ["aux"]}}]], {"POS": "VERB"}, 0),
        ([[{"DEP": "expl"}, {"LOWER": {"IN": ["is", "are"]}}]], {"POS": "VERB"}, 1),  # 2
        ([[{"LOWER": {"REGEX": "^n'?t$"}}]], {"LEMMA": "not"}, 0),  # 3: unanchored
        ([[{"IS_SPACE": True}], [{"TAG": "_SP"}]], {"POS": "SPACE"}, 0),  # 4: two patterns
    ]
    ruler = _ruler(rules)
    words = ["There", "is", "n't", " ", "a", "cat", "Is"]
    tags = ["EX", "VBZ", "RB", "_SP", "DT", "NN", "VBZ"]
    deps = ["expl", "ROOT", "neg", "dep", "det", "attr", "aux"]
    heads = [1, 1, 1, 1, 5, 1, 1]
    doc = Doc(ruler.vocab, words=words, tags=tags, deps=deps, heads=heads)
    rules_index = IndexedRules.from_ruler(ruler)
    assert rules_index is not None
    ids = [ruler.vocab.strings[str(i)] for i in range(len(rules))]
    expected = [
        (0, ids[0], 5, 6),  # "cat" NN
        (1, ids[1], 1, 2),  # "is", not aux ("Is" is aux: no match)
        (2, ids[2], 0, 2),  # "There is"
        (3, ids[3], 2, 3),  # "n't"
        (4, ids[4], 3, 4),  # " ": both patterns match it, the rule's match counts once
    ]
    assert rules_index.match(doc) == AttributeRuler.match(ruler, doc)
    assert rules_index.match(doc) == sorted(expected)


def test_a_rule_with_an_operator_keeps_spacys_matcher():
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"LOWER": "very", "OP": "+"}, {"TAG": "JJ"}]], {"POS": "ADJ"})
    assert IndexedRules.from_ruler(ruler) is None
    assert index_attribute_ruler(nlp) is False
    assert "match" not in vars(ruler)  # the class's method: spaCy's Matcher
    assert index_attribute_ruler(spacy.blank("en")) is False  # no ruler at all
