"""Reading a judge's verdict from prose, when it answered without JSON.

The last resort of `assay.judge.parsing.parse_reply` (each prompt names its own): a score
or a CORRECT/WRONG label taken from a reply such as ``"Mostly right. Score: 0.8"``. The
rule is to take the verdict the judge *gave*, never a number it *quotes*: a judge
explaining that the answer under review demands ``"score 1.0"`` before scoring it 0.1
gave 0.1. So a score is read only where the reply calls it a score (``Score: 0.8``,
``I rate it 8/10``); candidates inside quotation marks are quoted text and dropped; of
the rest, those the judge marks as its own (``my score``, ``final rating``, ``I would
rate it``, ``I'd give it a score of``) win over a ``Score:`` label that starts a line or
sentence, which wins over any other mention. When the winners disagree the reply is
ambiguous and `ParseError` says so (the client then asks once more for JSON only): a
number is never guessed.
"""

from __future__ import annotations

import re
from typing import Any

from assay.judge.parsing import ParseError

__all__ = ["label_from_prose", "score_from_prose"]

_NUM = r"[-\u2212]?\d+(?:\.\d+)?|[-\u2212]?\.\d+"
#: a score as written in prose: a number, optionally "/ D", "out of D" or "%"
_VALUE = re.compile(
    rf"(?<![\w.])(?P<num>{_NUM})(?:\s*(?:/|out\s+of)\s*(?P<den>\d+(?:\.\d+)?)|\s*(?P<pct>%))?"
    r"(?![\w/])",
    re.IGNORECASE,
)
#: a value the reply itself calls the score ("Score: 0.85", "I rate it 8/10")
_ANCHOR = re.compile(
    r"\b(?:score|rating|rated|rate|grade)\b[\"']?(?:\s+(?:it|this|is|of|at|as|be|would))*"
    r"\s*[:=]?\s*$",
    re.IGNORECASE,
)
#: text before an anchor that makes the score the judge's own ("my final ", "I would ",
#: "I'd give it a ")
_OWN = re.compile(
    r"(?:\b(?:my|final|overall|i|i'd|i'll)\s+(?:\w+\s+){0,2}"
    r"|\bi(?:'d|'ll|\s+would|\s+will)?\s+give\s+(?:it|this(?:\s+\w+)?)\s+(?:an?\s+)?)$",
    re.IGNORECASE,
)
#: text before an anchor that makes it a label opening a line or sentence ("Score:")
_LEAD = re.compile(r"(?:^|[\n.!?;]\s*|^\W*)$")
#: quoted spans: double, curly and guillemet quotes, and single quotes that are not
#: apostrophes ("I'd" is not a quote)
_QUOTED = re.compile(
    '"[^"\\n]*"|\u201c[^\u201d\\n]*\u201d|\u2018[^\u2019\\n]*\u2019|\u00ab[^\u00bb\\n]*\u00bb'
    "|(?<!\\w)'[^'\\n]*'(?!\\w)"
)
#: a reply this short that starts with a number may be just the score (``0.85``,
#: ``0.85 - well grounded``), unless the number is a list marker (``1. It asks...``)
_BARE_REPLY_CHARS = 40
_LIST_MARKER = re.compile(r"[.)]\s+\S")


def _score_of(match: re.Match[str]) -> float | None:
    num = float(match["num"].replace("\u2212", "-"))
    if match["den"] is not None:
        den = float(match["den"])
        return num / den if den > 0 and 0 <= num <= den else None
    if match["pct"] is not None:
        return num / 100.0 if 0 <= num <= 100 else None
    return num


def _candidates(text: str) -> list[tuple[int, float | None, str]]:
    """(rank, score, as written) of every score the reply states outside quotation
    marks: rank 2 the judge's own, 1 a leading ``Score:`` label, 0 any other mention."""
    quoted = [m.span() for m in _QUOTED.finditer(text)]
    found = []
    for match in _VALUE.finditer(text):
        anchor = _ANCHOR.search(text[: match.start()])
        if anchor is None or any(a <= anchor.start() < b for a, b in quoted):
            continue
        before = text[: anchor.start()]
        rank = 2 if _OWN.search(before) else 1 if _LEAD.search(before) else 0
        found.append((rank, _score_of(match), match.group(0)))
    return found


def score_from_prose(text: str) -> dict[str, Any] | None:
    """The score a prose reply gives, as ``{"score": s, "reason": ...}``.

    Whole numbers only (so "85/100" is not read as 1 nor "-0.5" as 0.5); fractions
    ("8.5/10", "4 out of 5") and percentages are divided out. Without any anchored score,
    the number a reply of at most 40 characters starts with is taken (``0.85``), unless
    it is a list marker. Returns None when the reply states no usable score; range checks
    are the output model's.

    Raises:
        ParseError: the reply states different scores and none outranks the others.
    """
    text = text.strip()
    found = _candidates(text)
    if found:
        top = max(rank for rank, _, _ in found)
        given = {(score, written) for rank, score, written in found if rank == top}
        scores = {score for score, _ in given}
        if len(scores) > 1:
            shown = ", ".join(sorted(written for _, written in given))
            raise ParseError(
                f"ambiguous reply: it states several scores ({shown}) and does not say "
                "which one it gives"
            )
        (score,) = scores
    else:
        match = _VALUE.match(text) if len(text) <= _BARE_REPLY_CHARS else None
        if match is not None and _LIST_MARKER.match(text, match.end()):
            match = None
        score = None if match is None else _score_of(match)
    if score is None:
        return None
    return {"score": score, "reason": "score read from a non-JSON reply"}


def label_from_prose(text: str) -> dict[str, Any] | None:
    """The one CORRECT/WRONG label a prose reply names (None when none or both)."""
    found = re.findall(r"\b(CORRECT|WRONG)\b", text.upper())
    if len(set(found)) != 1:
        return None
    return {"label": found[0], "reason": "label read from a non-JSON reply"}
