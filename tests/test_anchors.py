"""Claim anchors and evidence matching (assay.text.anchors), on the shipped spaCy model."""

from __future__ import annotations

import pytest

from assay.engine import Answers, parse_ask
from assay.metrics.grounding import topic_overlap
from assay.text import anchors as anchors_module
from assay.text.anchors import (
    ALL_KINDS,
    PIPELINE_KINDS,
    analyse,
    anchor_texts,
    build_evidence,
    extract_anchors,
    joined_evidence,
    parse_texts,
    passages_evidence,
)
from assay.text.numbers import NumberMention, parse_numbers
from assay.text.parses import Parses


@pytest.fixture(scope="module")
def nlp(resources):
    return resources.nlp


def anchors_of(nlp, text: str, kinds=ALL_KINDS):
    return extract_anchors(nlp(text), kinds)


def checked(nlp, response: str, *contexts: str, kinds=ALL_KINDS):
    """[(kind, text, supported)] of the response's anchors against the contexts."""
    docs = parse_texts(nlp, anchor_texts([response], [list(contexts)]))
    [(anchors, evidence)] = analyse(docs, [response], [list(contexts)], kinds=kinds)
    return [(a.kind, a.text, evidence.supports(a)) for a in anchors]


# ---- numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,200 workers", [NumberMention(1200.0)]),
        ("1200 workers", [NumberMention(1200.0)]),
        ("one thousand two hundred", [NumberMention(1200.0)]),
        ("$5 million", [NumberMention(5e6, "USD")]),
        ("5 million dollars", [NumberMention(5e6, "USD")]),
        ("5,000,000", [NumberMention(5e6)]),
        ("$5m", [NumberMention(5e6, "USD")]),
        ("€3.5bn", [NumberMention(3.5e9, "EUR")]),
        ("5k runners", [NumberMention(5000.0)]),
        ("45%", [NumberMention(45.0, percent=True)]),
        ("45 per cent", [NumberMention(45.0, percent=True)]),
        ("twenty-five", [NumberMention(25.0)]),
        ("two hundred thousand", [NumberMention(2e5)]),
        ("a million", [NumberMention(1e6)]),
        ("3 cats and 4 dogs", [NumberMention(3.0), NumberMention(4.0)]),
        ("a cat", []),
        # superscript and circled digits are digits (str.isdigit) but not numbers: they
        # are skipped, where they used to raise ValueError
        ("5² = 25", [NumberMention(5.0), NumberMention(25.0)]),
        ("step ① and step ②", []),
        ("in 2020¹", [NumberMention(2020.0)]),
        ("٣ تفاحات", [NumberMention(3.0)]),  # Arabic-Indic digits are decimal digits
    ],
)
def test_parse_numbers(text, expected):
    assert parse_numbers(text) == expected


def test_number_mentions_match_on_value_and_compatible_currency():
    assert NumberMention(5e6, "USD").matches(NumberMention(5e6))  # one side names no currency
    assert not NumberMention(5e6, "USD").matches(NumberMention(5e6, "EUR"))
    assert not NumberMention(5e6).matches(NumberMention(5.1e6))


def test_numbers_normalise_across_writings(nlp):
    # "1,200" in the response, "1200" in the context: the same number
    assert ("number", "1,200", True) in checked(
        nlp, "The factory employs 1,200 people.", "The factory employs 1200 people."
    )
    # "$5 million" against "5 million dollars" and "5,000,000"; not against euros
    assert checked(nlp, "It cost $5 million.", "It cost 5 million dollars.", kinds=["number"]) == [
        ("number", "$5 million", True)
    ]
    assert checked(nlp, "It cost $5 million.", "The price: 5,000,000.", kinds=["number"]) == [
        ("number", "$5 million", True)
    ]
    assert checked(nlp, "It cost $5 million.", "It cost 5 million euros.", kinds=["number"]) == [
        ("number", "$5 million", False)
    ]


# ---- dates -----------------------------------------------------------------------------


def test_date_anchors_keys_and_relative_dates_dropped(nlp):
    anchors = anchors_of(
        nlp,
        "The meeting is today. The meeting was last year. "
        "The meeting is on 5 May 2014 at 5:30 p.m.",
        kinds=["date"],
    )
    # "today" and "last year" are relative: not anchors
    assert [(a.label, a.text, a.key) for a in anchors] == [
        ("DATE", "5 May 2014", ("5", "may", "2014")),
        ("TIME", "5:30 p.m.", ("5:30", "pm")),
    ]


def test_date_support_needs_every_key_token_in_one_sentence(nlp):
    response = "The band formed in May 2014."
    assert checked(nlp, response, "The band formed in May 2014.", kinds=["date"]) == [
        ("date", "May 2014", True)
    ]
    # "2014" alone does not support "May 2014"
    assert checked(nlp, response, "The band formed in 2014.", kinds=["date"]) == [
        ("date", "May 2014", False)
    ]
    # "mid–19th century" (dash inside one token) supports "the mid 19th century"
    assert checked(
        nlp,
        "Both games began in the mid 19th century.",
        "Both games have their origin in the mid–19th century.",
        kinds=["date"],
    ) == [("date", "the mid 19th century", True)]


# ---- claims ----------------------------------------------------------------------------


def test_assertive_claim_is_a_subject_verb_object_triple(nlp):
    [claim] = anchors_of(nlp, "The company hired 1,200 workers.", kinds=["claim"])
    assert (claim.key, claim.negated) == (("company", "hire", "worker"), False)


@pytest.mark.parametrize(
    "text",
    [
        "The company may have hired workers.",
        "The company might hire workers.",
        "The company could hire workers.",
        "The company would hire workers.",
        "The company should hire workers.",
        "The company seems to hire workers.",
        "Experts believe that the company hired workers.",
        "I think the company hired workers.",
        "The company probably hired workers.",
        "It is likely that the company hired workers.",
        "If prices fall, the company hires workers.",
        "Did the company hire workers?",
    ],
)
def test_hedged_sentences_give_no_claims(nlp, text):
    assert anchors_of(nlp, text, kinds=["claim"]) == []


def test_hedged_sentence_keeps_its_numbers(nlp):
    # the pipeline specification filters hedges for claims only
    anchors = anchors_of(nlp, "The company may have hired 1,200 workers.", kinds=PIPELINE_KINDS)
    assert [(a.kind, a.text) for a in anchors] == [("number", "1,200")]


def test_negation_must_match(nlp):
    assert checked(nlp, "The drug does not cure cancer.", "The drug cures cancer.") == [
        ("claim", "drug cure cancer", False)
    ]
    assert checked(nlp, "The drug cures cancer.", "The drug does not cure cancer.") == [
        ("claim", "drug cures cancer", False)
    ]
    assert checked(nlp, "The drug does not cure cancer.", "The drug does not cure cancer.") == [
        ("claim", "drug cure cancer", True)
    ]
    # "no" on the object negates a light verb too
    assert checked(nlp, "The company has no workers.", "The company has no workers.") == [
        ("claim", "company has workers", True)
    ]
    assert checked(nlp, "The company has no workers.", "The company has workers.") == [
        ("claim", "company has workers", False)
    ]


def test_passive_and_active_voice_give_one_claim(nlp):
    active = anchors_of(nlp, "Apple bought Beats.", kinds=["claim"])
    passive = anchors_of(nlp, "Beats was bought by Apple.", kinds=["claim"])
    assert [a.key for a in active] == [a.key for a in passive] == [("apple", "buy", "beats")]
    assert checked(nlp, "Beats was bought by Apple.", "Apple bought Beats.", kinds=["claim"]) == [
        ("claim", "Apple bought Beats", True)
    ]


def test_pronouns_are_wildcards(nlp):
    [claim] = anchors_of(nlp, "He bought the company.", kinds=["claim"])
    assert claim.key == (None, "buy", "company")
    assert checked(nlp, "He bought the company.", "Musk bought the company.") == [
        ("claim", "He bought company", True)
    ]
    # two pronoun slots: nothing checkable
    assert anchors_of(nlp, "I love it.", kinds=["claim"]) == []


def test_light_verb_claim_needs_no_verb_in_context(nlp):
    assert checked(
        nlp, "Paris is the capital.", "Paris, the capital of France, is big.", kinds=["claim"]
    ) == [("claim", "Paris is capital", True)]


def test_claim_needs_subject_and_object_in_one_sentence(nlp):
    assert checked(
        nlp,
        "The company hired workers.",
        "The company grew. It hired nobody. Farms hired workers.",
        kinds=["claim"],
    ) == [("claim", "company hired workers", False)]


# ---- entities and the worked example ---------------------------------------------------


def test_entity_anchors(nlp):
    got = checked(nlp, "Obama visited Paris.", "Barack Obama met Macron.", kinds=["entity"])
    assert got == [("entity", "Obama", True), ("entity", "Paris", False)]


def test_revenue_example(nlp):
    # $5 million is in the context, 2021 is not (the context says 2020); the claim
    # (revenue, be, million) holds in the context sentence
    assert checked(
        nlp,
        "Revenue was $5 million in 2021.",
        "Revenue was $5 million in 2020.",
        kinds=PIPELINE_KINDS,
    ) == [
        ("claim", "Revenue was million", True),
        ("number", "$5 million", True),
        ("date", "2021", False),
    ]


def test_repeated_anchor_counts_once(nlp):
    anchors = anchors_of(nlp, "It opened in 2021. It closed in 2021.", kinds=["date"])
    assert [a.text for a in anchors] == ["2021"]


def test_unknown_kind_is_rejected(nlp):
    with pytest.raises(ValueError, match="unknown anchor kinds"):
        extract_anchors(nlp("x"), ["numbers"])


# ---- the evidence of several passages --------------------------------------------------

#: real two-passage contexts (rag-bench-50 s000, s004, s007): phrase and numbers by hand
#: (lower-cased words without punctuation, "|" after each sentence, "299,792,458" read as
#: 299792458); each context has three sentences
CANBERRA = [
    "Canberra is the capital city of Australia. It was selected as the capital in 1908 as "
    "a compromise between Sydney and Melbourne.",
    "Sydney is the largest city in Australia and is known for its Opera House.",
]
WATER = [
    "At sea level, pure water boils at 100 degrees Celsius. At higher altitudes the boiling "
    "point is lower because air pressure is lower.",
    "Water freezes at 0 degrees Celsius.",
]
LIGHT = [
    "The speed of light in a vacuum is exactly 299,792,458 metres per second. This value is "
    "used to define the metre.",
    "Sound travels at about 343 metres per second in air.",
]
CONTEXTS = [
    (
        CANBERRA,
        " canberra is the capital city of australia | it was selected as the capital in 1908 "
        "as a compromise between sydney and melbourne | sydney is the largest city in "
        "australia and is known for its opera house | ",
        (NumberMention(1908.0),),
    ),
    (
        WATER,
        " at sea level pure water boils at 100 degrees celsius | at higher altitudes the "
        "boiling point is lower because air pressure is lower | water freezes at 0 degrees "
        "celsius | ",
        (NumberMention(100.0), NumberMention(0.0)),
    ),
    (
        LIGHT,
        " the speed of light in a vacuum is exactly 299792458 metres per second | this value "
        "is used to define the metre | sound travels at about 343 metres per second in air | ",
        (NumberMention(299792458.0), NumberMention(343.0)),
    ),
]


@pytest.mark.parametrize(("passages", "phrase", "numbers"), CONTEXTS)
def test_passages_evidence_is_the_evidence_of_all_passages(nlp, passages, phrase, numbers):
    docs = Parses(parse_texts(nlp, passages, defer_entities=True), ner=None)
    evidence = passages_evidence(docs, ["", *passages, " "])  # blank passages: none
    assert evidence == build_evidence([docs[p] for p in passages])
    assert evidence.phrase == phrase
    assert evidence.numbers == numbers
    assert len(evidence.sentences) == 3
    assert evidence.forms == frozenset().union(*(s.forms for s in evidence.sentences))
    # each passage's own evidence, kept by the parses
    assert list(docs.passage_evidence) == passages
    assert [docs.passage_evidence[p] for p in passages] == [
        build_evidence([docs[p]]) for p in passages
    ]


def test_joined_evidence_keeps_passage_order_and_repeats(nlp):
    docs = Parses(parse_texts(nlp, CANBERRA, defer_entities=True), ner=None)
    first, second = CANBERRA
    evidence = passages_evidence(docs, [second, first, second])
    assert evidence == build_evidence([docs[second], docs[first], docs[second]])
    sydney = " sydney is the largest city in australia and is known for its opera house | "
    assert evidence.phrase.startswith(sydney) and evidence.phrase.endswith(sydney)
    # "It was selected": a pronoun subject, in the second of four sentences
    assert [s.pronoun_subject for s in evidence.sentences] == [False, False, True, False]
    assert joined_evidence([]) == build_evidence([])  # no passage: phrase "  "
    assert build_evidence([]).phrase == "  "


def test_a_chunks_answers_build_each_passages_evidence_once(nlp, monkeypatch):
    # two metrics reading two texts (a response, a reference) against the same passages,
    # each through its own parses of the answers, as the judged metrics and the grounding
    # metric do: the second reuses the first's evidence of every passage
    response, reference = "Canberra was selected in 1908.", "Sydney is the capital."
    answers = Answers()
    for text, doc in parse_texts(nlp, [response, reference, *CANBERRA]).items():
        answers.put(parse_ask(text), doc)
    built: list[str] = []

    def counted(docs):
        built.extend(doc.text for doc in docs)
        return build_evidence(docs)

    monkeypatch.setattr(anchors_module, "build_evidence", counted)
    for text in (response, reference):
        docs = answers.docs(anchor_texts([text], [CANBERRA]))
        [(_, evidence)] = analyse(docs, [text], [CANBERRA])
        assert evidence == build_evidence([docs[p] for p in CANBERRA])
    assert built == CANBERRA


# ---- topic overlap ---------------------------------------------------------------------


def test_topic_overlap_by_hand():
    # response content words {revenue, 5, million, 2021}; context words
    # {revenue, was, 5, million, in, 2020}: 3 of 4 -> 0.75
    assert topic_overlap(
        "Revenue was $5 million in 2021.", "Revenue was $5 million in 2020."
    ) == pytest.approx(0.75)
    assert topic_overlap("Bananas, apples and oranges.", "The Eiffel Tower is in Paris.") == 0.0
    assert topic_overlap("It is.", "anything") is None  # no content word
