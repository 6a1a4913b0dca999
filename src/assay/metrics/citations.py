"""Citation accuracy: the citations a response carries, found by pattern (no model).

The chatbot hub's ``citation_accuracy``: each citation kind (numbered brackets, author-year
parentheticals, URLs, source names...) has a weight; the score is a function of the
weights found (`citation_score`). The patterns are linear-time and tested on long inputs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.base import Metric, Source
from assay.metrics.registry import register

__all__ = ["CITATION_PATTERNS", "CitationPattern", "citation_score", "find_citations"]


@dataclass(frozen=True)
class CitationPattern:
    """One kind of citation: its name in the chatbot hub, weight and regular expression."""

    kind: str
    weight: float
    regex: re.Pattern[str]
    check: str | None = None  # name of an extra test on the match, see _accept


_DIACRITICS = "\u064b-\u0652"
_LETTER = re.compile(r"[^\W\d_]")
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_NOT_A_SOURCE_NAME = frozenset(
    {"sic", "citation needed", "edit", "todo", "note", "clarification needed"}
)

# text after "source:" / "reference:" on the same line (at least one character, so a bare
# "References:" heading is not a citation): up to a bracket, ";", a clause mark or a full stop
# that ends a sentence (dots inside "www.who.int" are kept)
_LABEL_TEXT = r"(?=[^\s\[\]();.،؛؟])(?:[^\n\[\]();.،؛؟]|\.(?=\S)){1,80}"

#: The specification's citation kinds, strongest first (this is also the order overlaps are
#: resolved in). Arabic label forms are added to the specification's English ones.
CITATION_PATTERNS: tuple[CitationPattern, ...] = (
    CitationPattern("numbered", 1.0, re.compile(r"\[\s*\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\s*\]")),
    CitationPattern("named", 0.8, re.compile(r"\[([^\[\]\n]{2,100})\]"), check="named"),
    CitationPattern(
        "source_label",
        0.7,
        re.compile(r"(?<!\w)(?:sources?|المصدر|مصدر)[ \t]*:[ \t]*" + _LABEL_TEXT, re.IGNORECASE),
    ),
    CitationPattern(
        "parenthetical", 0.6, re.compile(r"(?<!\])\(([^()\n]{2,120})\)"), check="parenthetical"
    ),
    CitationPattern(
        "reference_label",
        0.6,
        re.compile(
            r"(?<!\w)(?:references?|ref\.|المرجع|مرجع)[ \t]*:[ \t]*" + _LABEL_TEXT, re.IGNORECASE
        ),
    ),
    CitationPattern(
        "according_to",
        0.5,
        re.compile(
            rf"(?<!\w)(?:according\s+to|وفق[{_DIACRITICS}ا]{{0,3}}\s*ل[{_DIACRITICS}]?|نقلا\s+عن)"
            r"\s*[^\s\[\]();,.،؛؟][^\n\[\]();,.،؛؟]{0,79}",
            re.IGNORECASE,
        ),
    ),
)

# parenthetical: what makes "( ... )" a source and not an aside such as "(e.g. 5 kg)"
_PAREN_STRONG_CUE = re.compile(
    r"^\s*(?:sources?|ref\.?|references?|citing|cited in|retrieved from|adapted from"
    r"|المصدر|مصدر|المرجع|مرجع)\b",
    re.IGNORECASE,
)
_PAREN_WEAK_CUE = re.compile(
    r"^\s*(?:see|cf\.?|via|from|per)\s+(?!(?:figure|fig\.?|table|section|chapter|appendix"
    r"|step|above|below|note|page|p\.)\b)[A-Z]",
    re.IGNORECASE,
)
_AUTHOR_YEAR = re.compile(
    rf"(?<!\w)(?!(?i:{_MONTHS})\b)[A-Z][\w'’-]+"
    r"(?:\s+(?:et\s+al\.?|and|&)(?:\s+[A-Z][\w'’-]+)?)?,?\s+(?:1[89]|20)\d{2}[a-z]?\b"
)
_URL = re.compile(r"https?://|www\.|\b[\w-]+\.(?:com|org|gov|edu|net|int|io|info)\b", re.IGNORECASE)
_YEAR_ONLY = re.compile(r"^\s*(?:1[89]|20)\d{2}[a-z]?\s*$")
_NAME_BEFORE = re.compile(rf"(?:(?<!\w)(?!(?i:{_MONTHS})\b)[A-Z][\w'’-]+|et\s+al\.?)\s*$")


def _is_source_parenthetical(content: str, before: str) -> bool:
    if _PAREN_STRONG_CUE.search(content) or _URL.search(content):
        return True
    # weak cues need a capitalised name after them: "(see Smith 2020)", not "(see above)"
    weak = _PAREN_WEAK_CUE.match(content)
    if weak and weak.group(0)[-1].isupper():
        return True
    if _AUTHOR_YEAR.search(content):
        return True
    # "Smith et al. (2020)": a bare year right after a name
    return bool(_YEAR_ONLY.match(content) and _NAME_BEFORE.search(before))


def _accept(pattern: CitationPattern, match: re.Match[str], text: str) -> bool:
    if pattern.check == "named":
        content = match.group(1).strip()
        letters = _LETTER.findall(content)
        return len(letters) >= 2 and content.lower() not in _NOT_A_SOURCE_NAME
    if pattern.check == "parenthetical":
        before = text[max(0, match.start() - 40) : match.start()]
        return _is_source_parenthetical(match.group(1), before)
    return True


def find_citations(text: str) -> list[dict[str, Any]]:
    """Citations in ``text``: kind, weight, matched text and offsets, in text order.

    Patterns are tried strongest first; a match overlapping an already accepted one is
    not counted again (so "(source: WHO)" is one citation, not a label plus a
    parenthetical).
    """
    taken: list[tuple[int, int]] = []
    found: list[dict[str, Any]] = []
    for pattern in CITATION_PATTERNS:
        for match in pattern.regex.finditer(text):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            if not _accept(pattern, match, text):
                continue
            taken.append((start, end))
            found.append(
                {
                    "kind": pattern.kind,
                    "weight": pattern.weight,
                    "text": match.group(0).strip(),
                    "start": start,
                    "end": end,
                }
            )
    return sorted(found, key=lambda c: c["start"])


def citation_score(weights: Sequence[float]) -> float:
    """The chatbot hub: ``max(weights) * (1 + 0.1 * (n - 1))`` capped at 1; 0 with no citation."""
    if not weights:
        return 0.0
    best = max(weights)
    n = len(weights)
    return min(1.0, best * (1.0 + 0.1 * (n - 1))) if n > 1 else best


@register
class CitationAccuracy(Metric):
    """Presence and form of citations in the response, by the chatbot hub's weighted patterns.

    Formula (chatbot hub, on the 0..1 scale): find the citations, each with the weight of
    its kind: numbered ``[1]``, ``[2, 3]`` 1.0; named ``[WHO report]`` 0.8;
    ``source: ...`` 0.7; parenthetical ``(Smith et al., 2020)`` 0.6; ``reference: ...``
    0.6; ``according to ...`` 0.5. ``score = max(weight)``; with n > 1 citations,
    ``score = min(1, score * (1 + 0.1 * (n - 1)))``. No citation: 0.0.

    Rules beyond the specification's list (so that ordinary brackets are not citations):
      - named: bracket text with at least two letters, not a number list, not an
        editorial mark ("[sic]", "[citation needed]"). A Markdown link ``[text](url)``
        counts once, as named.
      - parenthetical: the parentheses must look like a source: they start with a
        source cue ("source", "ref", "cited in", "retrieved from", Arabic "المصدر",
        "المرجع"), or start with "see/cf./via/from/per" followed by a capitalised name
        (not "see Table 2", "see above"), or hold a URL or a domain, or an author-year
        ("Smith, 2020", "Smith and Lee 2019"; not a month such as "March 2020"), or are a
        bare year right after a name ("Smith et al. (2020)"). So "(e.g. 5 kg)",
        "(in 2020)", "(see above)" are not citations.
      - labels ``source:``, ``reference:`` and ``according to`` are case-insensitive,
        also match their Arabic forms (المصدر:، المرجع:، وفقًا لـ، نقلا عن) and need
        text after them on the same line (a bare "References:" heading is not a
        citation); the citation text runs to the end of the sentence or clause.
      - n counts citation occurrences; a match that overlaps a stronger one already
        found is not counted twice ("(source: WHO)" is one source label).

    Inputs: response. Range 0..1, higher is better. Empty response: None. Evidence:
    ``details.citations`` (kind, weight, text, offsets). Weakness: this checks that
    citations are present and well-formed, not that they are accurate: "[7]" scores 1.0
    even when there is no 7th source and the claim is not in any source. Checking each
    cited source against ``contexts``/``expected_sources`` would be the better method; it
    is not implemented yet. "according to the plan" counts as a (weak) citation.
    """

    name = "citation_accuracy"
    family = "lexical"
    requires = ("response",)
    suites = ("rag", "base-model")
    source = Source.CHATBOT_HUB

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        citations = find_citations(sample.response or "")
        score = citation_score([c["weight"] for c in citations])
        return self.result(
            score,
            method="pattern",
            citations=citations,
            n_citations=len(citations),
            max_weight=max((c["weight"] for c in citations), default=0.0),
        )
