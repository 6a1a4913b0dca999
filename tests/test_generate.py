"""``assay generate`` offline: documents read and chunked, the mix counted, extractive
questions, the checks, and rows that Assay's own reader takes as they are."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from assay.generation import generate, parse_mix, read_chunks
from assay.generation.documents import Chunk, chunk_text, html_text
from assay.generation.extractive import (
    Fact,
    conversation,
    facts,
    multi_question,
    unanswerable_question,
)
from assay.generation.filters import Candidate, filter_candidates, in_language, language_of
from assay.generation.offline import OfflineSource
from assay.generation.plan import quotas, read_personas, redistribute
from assay.inputs.read import read_samples
from assay.text.tokenize import words
from assay.text.tokens import count_tokens

DATA = Path(__file__).parent / "data" / "generate"


# ---- documents -------------------------------------------------------------------------


def test_documents_are_read_by_type_and_unreadable_files_are_named() -> None:
    chunks, problems = read_chunks(DATA, max_tokens=40)
    sources = {c.source for c in chunks}
    assert sources == {"faq.txt", "guide.md", "offices.pdf", "status.html"}
    assert {(p.path, p.reason) for p in problems} == {
        ("broken.pdf", "PdfStreamError: Stream has ended unexpectedly"),
        ("notes.bin.txt", "not UTF-8 text (byte 0: invalid start byte)"),
    }
    pdf = [c.text for c in chunks if c.source == "offices.pdf"]
    assert pdf == [
        "Northwind Cloud moved its headquarters to Porto in 2021. The Porto office has 85 "
        "employees."
    ]
    html = " ".join(c.text for c in chunks if c.source == "status.html")
    assert "tracking" not in html and "Home | Docs" not in html and "color:red" not in html
    assert "The Lisbon data centre reached 99.95% uptime in 2023." in html
    incident = next(c for c in chunks if "Maria Santos" in c.text)
    assert incident.heading == "Service status > Incidents"
    assert incident.id.startswith("status.html#")


def test_html_headings_become_markdown_and_inline_tags_stay_in_their_sentence() -> None:
    text = html_text("<h2>Setup</h2><p>Run <code>make</code> <b>once</b>.</p><ul><li>A</li></ul>")
    assert text == "## Setup\n\nRun make once.\n\nA"


def test_chunks_keep_the_token_budget_and_their_heading_path() -> None:
    text = (
        "# Guide\n\n"
        + "Backups run every night at two. " * 40
        + "\n\n## Billing\n\nPlans cost $12."
    )
    pieces = chunk_text(text, max_tokens=50)
    assert all(count_tokens(p).count <= 50 for _, p in pieces)
    assert len(pieces) > 1 and pieces[0][0] == "Guide"
    # a chunk's heading path is where it starts: the last one starts in Guide's text
    assert pieces[-1][0] == "Guide" and pieces[-1][1].endswith("## Billing\n\nPlans cost $12.")
    assert chunk_text("# A\n\nx.\n\n## B\n\ny.", 16) == [("A", "# A\n\nx.\n\n## B\n\ny.")]
    assert chunk_text("intro.\n\n# A\n\n" + "word " * 30, 16)[-1][0] == "A"


def test_a_jsonl_of_chunks_is_read_and_bad_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    path.write_text(
        '{"id": "a", "text": "Alpha runs nightly."}\n'
        "not json\n"
        '{"text": ""}\n'
        '{"text": "Beta.", "heading": 3}\n'
        '{"text": "Gamma ships in May.", "source": "g.md"}\n'
    )
    chunks, problems = read_chunks(path)
    assert [(c.id, c.source, c.text) for c in chunks] == [
        ("a", str(path), "Alpha runs nightly."),
        (f"{path}#5", "g.md", "Gamma ships in May."),
    ]
    assert [(p.path.rsplit(":", 1)[1], p.reason.split(" (")[0]) for p in problems] == [
        ("2", "not JSON"),
        ("3", "field 'text': a non-empty string is required"),
        ("4", "field 'heading': must be a string"),
    ]


def test_a_spec_matching_nothing_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        read_chunks(tmp_path / "nothing-here" / "*.md")


# ---- the mix and the personas --------------------------------------------------------


def test_quotas_by_largest_remainder_and_redistribution() -> None:
    mix = parse_mix(None)
    assert quotas(10, mix) == {
        "single": 5, "multi": 2, "reasoning": 1, "conversational": 1, "unanswerable": 1,
    }  # fmt: skip
    # 7 x (.5 .2 .1 .1 .1) = 3.5 1.4 .7 .7 .7: floors 3 1 0 0 0, three more to the .7s
    assert quotas(7, mix) == {
        "single": 3, "multi": 1, "reasoning": 1, "conversational": 1, "unanswerable": 1,
    }  # fmt: skip
    # reasoning's 1 goes by the others' weights .5/.9, .2/.9, .1/.9, .1/.9: to single
    assert redistribute(quotas(10, mix), mix, ["reasoning"]) == {
        "single": 6, "multi": 2, "reasoning": 0, "conversational": 1, "unanswerable": 1,
    }  # fmt: skip
    assert parse_mix("single=3,multi=1") == {
        "single": 0.75, "multi": 0.25, "reasoning": 0.0, "conversational": 0.0, "unanswerable": 0.0,
    }  # fmt: skip
    for bad, message in [
        ("single=1,trivia=1", "unknown kind"),
        ("single=-1", ">= 0"),
        ("single=0", "above 0"),
        ("single", "kind=weight"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_mix(bad)


def test_personas_file_jsonl_errors_name_file_line_and_field(tmp_path: Path) -> None:
    good = tmp_path / "p.txt"
    good.write_text("# who asks\nA new administrator\n\n  An   accountant  \n")
    assert read_personas(good) == ["A new administrator", "An accountant"]
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"name": "Ana", "description": "an SRE"}\n{"name": "Bo"}\n')
    with pytest.raises(ValueError, match=r"p\.jsonl:2: field 'description'"):
        read_personas(bad)


# ---- the checks ------------------------------------------------------------------------


def test_language_guess() -> None:
    assert language_of("When was the company founded in Lisbon?") == "en"
    assert language_of("Wann wurde die Firma in Lissabon gegründet?") == "other"
    assert language_of("متى تأسست الشركة في لشبونة؟") == "ar"
    # few stop words, but the documents' own words: 8 of 9 words are theirs (>= 0.6)
    vocabulary = frozenset(words("Northwind Cloud keeps nightly backups for 30 days."))
    assert language_of("Northwind Cloud keeps nightly backups for 30 days, right?") == "other"
    assert in_language(
        "Northwind Cloud keeps nightly backups for 30 days, right?", "en", vocabulary
    )
    # 2 of 8 words are theirs (the names): not their language
    assert not in_language("Wie lange behält Northwind Cloud die Sicherungen?", "en", vocabulary)


def test_each_check_removes_what_it_should(resources) -> None:
    chunks, _ = read_chunks(DATA / "guide.md", max_tokens=60)
    chunk = next(c for c in chunks if "nightly backups" in c.text)

    def candidate(query: str, expected: str, answer: str | None = None) -> Candidate:
        return Candidate("single", query, expected, [chunk], "p", "test", answer)

    good = candidate(
        "How long does Northwind Cloud keep nightly backups?",
        "Northwind Cloud keeps nightly backups for 30 days.",
        "30 days",
    )
    made_up = candidate(
        "Where are backups stored?", "Backups are stored on tape in a vault in Oslo."
    )
    gives_answer = candidate(
        "Northwind Cloud keeps nightly backups for 30 days, right?",
        "Northwind Cloud keeps nightly backups for 30 days.",
        "30 days",
    )
    duplicate = candidate(
        "How long does Northwind Cloud keep its nightly backups?",
        "Northwind Cloud keeps nightly backups for 30 days.",
        "30 days",
    )
    german = candidate(
        "Wie lange behält Northwind Cloud die nächtlichen Sicherungen?",
        "Northwind Cloud keeps nightly backups for 30 days.",
    )
    vocabulary = frozenset(words(chunk.text))
    kept, report = filter_candidates(
        [good, made_up, gives_answer, duplicate, german], resources, "en", vocabulary
    )
    assert kept == [good]
    assert report.to_dict()["removed"] == {
        "language": 1, "answerable_alone": 1, "not_entailed": 1, "near_duplicate": 1,
    }  # fmt: skip
    assert good.extra["entailment"] >= 0.5


# ---- offline generation end to end -----------------------------------------------------


def test_offline_set_is_read_by_assays_reader_and_reproducible(resources, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    result = generate(DATA, 8, seed=3, out=out, judge=False, resources=resources, max_tokens=40)
    summary = result.summary
    assert summary["method"] == "offline:spacy-extractive"
    assert summary["cannot_make"] == {
        "reasoning": pytest.approx(summary["cannot_make"]["reasoning"])
    }
    assert summary["redistributed"] == {"reasoning": 1}
    assert [p["path"] for p in summary["documents"]["unreadable"]] == [
        "broken.pdf",
        "notes.bin.txt",
    ]
    assert summary["made"] == len(result.rows) == 8
    assert sum(summary["by_kind"].values()) == 8 and "reasoning" not in summary["by_kind"]

    samples, errors = read_samples(out, strict=True)
    assert errors == []
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [s.id for s in samples] == [r["id"] for r in rows]
    for sample, row in zip(samples, rows, strict=True):
        meta = row["metadata"]
        assert sample.query == row["query"] and sample.contexts == row["contexts"]
        assert sample.tags == {"question_type": meta["kind"]}
        assert meta["method"] == "offline:spacy-extractive"
        assert set(meta["source"]) == {"files", "chunks"}
        assert meta["kind"] in {"single", "multi", "conversational", "unanswerable"}
        assert meta["persona"].startswith("a new user who wants to know about")
        if meta["kind"] == "unanswerable":
            assert sample.expected == "The documents do not say."
        else:  # extractive: the reference is a sentence of its contexts
            assert all(
                part.rstrip(".") in " ".join(row["contexts"])
                for part in sample.expected.split(". ")
            )
            assert meta["entailment"] >= 0.5
        if meta["kind"] == "conversational":
            assert [t.role for t in sample.turns] == ["user", "assistant", "user"]
            assert sample.turns[1].content is None
            assert sample.turns[2].content == sample.query

    again = generate(DATA, 8, seed=3, judge=False, resources=resources, max_tokens=40)
    assert again.rows == rows


# ---- extractive questions ------------------------------------------------------------


def test_extractive_questions_from_spacys_parse(resources) -> None:
    text = (
        "Marie Curie discovered radium in 1898. The parser reads the whole file in one pass. "
        "Users configured the proxy with a YAML file. It is fast and it works well. "
        "Install the package with pip on each server."
    )
    chunk = Chunk("a.md#1", "a.md", "", text)
    found = {(f.label, f.answer, f.question) for f in facts([chunk], {text: resources.nlp(text)})}
    assert {
        ("PERSON", "Marie Curie", "Who discovered radium in 1898?"),
        ("DATE", "1898", "When did Marie Curie discover radium?"),
        ("NOUN", "the whole file", "What does the parser read in one pass?"),
        ("NOUN", "the proxy", "What did users configure with a YAML file?"),
        ("NOUN", "a YAML file", "What did users configure the proxy with?"),
        ("NOUN", "the package", "What should you install with pip on each server?"),
    } <= found
    # "It ..." names someone in another sentence: no question
    assert not [q for _, _, q in found if "fast" in q]
    assert all(answer.lower() not in question.lower() for _, answer, question in found)


def test_the_wh_phrase_moves_to_the_front_where_the_parse_allows(resources) -> None:
    """Do-support in the verb's tense (VBZ does, VBD did), the first auxiliary or the
    copula in front, an opening phrase kept; the in-place question where it does not fit
    (a clause after a comma, a negation)."""
    text = (
        "The Porto office has 85 employees. Maria Lopez introduced it in 2019. "
        "The library was founded in Berlin in 2009. The main support office is in Lisbon. "
        "Support engineers quickly answered 40 tickets during the outage. "
        "By default, the parser reads the whole file. "
        "In summary, you declare the types of parameters. "
        "The company opened an office in Porto in March 2021, after the merger. "
        "The team does not support Windows in 2024. "
        "Ana Ferreira designed the backup service in 2016."
    )
    chunk = Chunk("a.md#1", "a.md", "", text)
    found = {(f.answer, f.question) for f in facts([chunk], {text: resources.nlp(text)})}
    assert {
        ("85", "How many employees does the Porto office have?"),
        ("2019", "When did Maria Lopez introduce it?"),
        ("Berlin", "Where was the library founded in 2009?"),
        ("2009", "When was the library founded in Berlin?"),
        ("Lisbon", "Where is the main support office?"),
        ("40", "How many tickets did support engineers quickly answer during the outage?"),
        ("the whole file", "By default, what does the parser read?"),
        ("the parser", "By default, what reads the whole file?"),
        ("the types of parameters", "In summary, what do you declare?"),
        ("March 2021", "The company opened an office in Porto when, after the merger?"),
        ("2024", "The team does not support Windows when?"),
    } <= found
    # a preposition after a comma is not left stranded at the end
    assert not [q for _, q in found if q.endswith("after?")]
    # the small model reads "Ferreira" as a place: half a name asks nothing
    assert ("2016", "When did Ana Ferreira design the backup service?") in found
    assert not [q for _, q in found if "Ana what" in q or "Ana where" in q]


def test_a_sentence_may_open_with_a_lower_case_name(resources) -> None:
    text = "orjson serializes dataclasses natively since 2019. the parser reads it in one pass."
    chunk = Chunk("a.md#1", "a.md", "", text)
    found = {(f.answer, f.question) for f in facts([chunk], {text: resources.nlp(text)})}
    assert ("dataclasses", "What does orjson serialize natively since 2019?") in found
    assert not [q for _, q in found if "parser" in q]  # "the" is no name: a broken sentence


def test_released_questions_serve_other_kinds_and_go_back_to_the_single_pool(resources) -> None:
    """A question handed out is in no other candidate until the run hands it back
    (``release``: it passed the checks but its kind was full); then a conversation not
    yet visited may use it as its follow-up, and the single pool holds it again."""
    text = (
        "Marie Curie discovered radium in 1898. Pierre Curie studied crystals in Paris. "
        "The Porto office has 85 employees."
    )
    chunk = Chunk("a.md#1", "a.md", "", text)
    source = OfflineSource([chunk], ["a reader"], 0, resources)
    singles = source.make({"single": 100})["single"]
    assert len(singles) == source.facts >= 6 and source.exhausted("single")
    source.release(singles)
    assert not source.exhausted("single") and source.left("single") == len(singles)
    talks = source.make({"conversational": 5})["conversational"]
    follow_ups = {t.turns[2]["content"].removeprefix("And ") for t in talks}
    assert talks and {q[0].lower() + q[1:] for q in (s.query for s in singles)} >= follow_ups
    # the follow-ups are taken: the single pool gives only the others
    again = source.make({"single": 100})["single"]
    assert len(again) == len(singles) - len(talks)


def test_durations_and_amounts_are_asked_for_their_count(resources) -> None:
    """'within 30 days' asks 'within how many days' (not 'what date'), the phrase in front
    with the auxiliary, and '$240' asks 'how much' with its currency symbol (spaCy's MONEY
    entity leaves the '$' out), in place after 'or'; a comma before a preposition keeps
    its object from being asked with the preposition stranded."""
    text = (
        "Returns are accepted within 30 days of delivery. "
        "The premium plan costs $25 a month or $240 a year. "
        "Northwind Cloud keeps nightly backups for 30 days. "
        "Support answers tickets within 4 hours, even on weekends."
    )
    chunk = Chunk("a.md#1", "a.md", "", text)
    questions = {f.question for f in facts([chunk], {text: resources.nlp(text)})}
    assert "Within how many days of delivery are returns accepted?" in questions
    assert "The premium plan costs $25 a month or how much a year?" in questions
    assert "For how many days does Northwind Cloud keep nightly backups?" in questions
    assert not [q for q in questions if "what date" in q or "$how" in q or "even on?" in q]


def test_composed_kinds_from_facts() -> None:
    one = Chunk("a.md#1", "a.md", "", "Acme was founded in 2009. Acme hired Ana Lopes.")
    two = Chunk("b.md#1", "b.md", "", "Acme moved to Porto in 2021.")
    founded = Fact(one, "Acme was founded in 2009.", "2009", "DATE",
                   "Acme was founded when?", (("acme", "ORG", "Acme"),), True)  # fmt: skip
    hired = Fact(one, "Acme hired Ana Lopes.", "Ana Lopes", "PERSON", "Acme hired whom?",
                 (("acme", "ORG", "Acme"),), True)  # fmt: skip
    moved = Fact(two, "Acme moved to Porto in 2021.", "2021", "DATE",
                 "Acme moved to Porto when?", (("acme", "ORG", "Acme"),), True)  # fmt: skip
    multi = multi_question(founded, moved, "Acme")
    assert multi["query"] == "Acme was founded when, and Acme moved to Porto when?"
    assert multi["expected"] == "Acme was founded in 2009. Acme moved to Porto in 2021."
    assert [c.id for c in multi["chunks"]] == ["a.md#1", "b.md#1"]
    talk = conversation(founded, hired)
    assert talk["turns"] == [
        {"role": "user", "content": "Acme was founded when?"},
        {"role": "assistant", "content": None},
        {"role": "user", "content": "And Acme hired whom?"},
    ]
    assert talk["query"] == "And Acme hired whom?" and talk["expected"] == "Acme hired Ana Lopes."
    sentences = [frozenset(words(s)) for s in ("acme was founded in 2009", "globex was sold")]
    # "Globex was founded when?": no sentence holds globex + founded
    swapped = unanswerable_question(founded, [("ORG", "Acme"), ("ORG", "Globex")], sentences)
    assert swapped is not None and swapped["query"] == "Globex was founded when?"
    # a swap the documents answer is refused
    assert unanswerable_question(founded, [("ORG", "Acme")], sentences) is None
