"""LLM-style error pairs for the entailment model (`scripts/train_entailment.py
--llm-errors`): for a claim of `entailment_pairs.synthetic_pairs`, one more minimal pair,
an entailed hypothesis beside one that differs from it only by an error of the kind LLM
summaries and answers make (`llm_style_pair`):

- **facts merged from two places**: a name swapped for another of its type from
  elsewhere in the same paragraph, so the premise mentions both (``merged``); a date or
  number swapped for another of the article's (``merged_number``);
- **a causal link the text does not state**: "A, and b" against "A because b", "A, so b"
  or "B because a" (``causal``);
- **an overstated hedge**: "may" to "will", "about 40" to "exactly 40", "some" to "all",
  "suggests" to "proves" (``hedge``);
- **an invented specific detail**: a date or place of the article's, not the window's,
  added to the claim (``detail``).

One-sided, these pairs teach a shortcut as well as the error: the words the rules bring
("because", ", so", "exactly", "will", "all") then occur 3 to 6 times as often in
not-entailed hypotheses as in entailed ones, and a model trained on them lost 0.015 and
0.019 AUROC on FeverSymmetric, whose claims are written to punish claim-only cues
(`scripts/soup_entailment.py` has the experiment). With ``stated`` (``--llm-errors
symmetric``) each wrong hypothesis comes a second time, entailed by a premise that says
it (`stated_premise`: the premise with the claim, or the two sentences a causal link
joins, replaced by the hypothesis). With ``reworded`` (``--llm-errors reworded``) the
second time the premise says it in other words (`ErrorPair.reworded`): a causal link as
"C, so e", "E because c", "C; as a result, e", "C. That is why e", "E, as c" or "C,
which is why e" (`_reworded_link`, one the hypothesis does not use), an invented detail
fronted ("In 1994, ...") or in a sentence of its own ("... This was in 1994."), an
overstated hedge as "will certainly", "precisely 40", "each of", "establishes",
"invariably" or "certainly".

That did not remove the shortcut. Measured 2026-11-29: the shipped weights trained on for
one more pass of 9,500 pairs (`train_entailment.py --init`, learning rate 2e-5, 297
steps, seeds 13 and 14), from the ``--more-data`` pairs with the LLM-style ones left
out, one-sided, or symmetric. P(entailment) is the mean over 575 human-labelled entailed
pairs with a cue word in the hypothesis ("cue") and 3,000 without ("plain"), none of
them trained on (``benchmarks/entailment_cues.py``). Those weights give 0.699 and
0.784 (gap 0.086), FeverSymmetric 0.744 / 0.764.

| pairs | cue | plain | gap | FeverSymmetric dev / test |
| --- | --- | --- | --- | --- |
| without LLM-style | 0.696, 0.693 | 0.779, 0.783 | 0.083, 0.090 | 0.751 / 0.776, 0.752 / 0.774 |
| one-sided | 0.633, 0.629 | 0.763, 0.770 | 0.130, 0.141 | 0.748 / 0.764, 0.751 / 0.766 |
| symmetric | 0.655, 0.635 | 0.786, 0.774 | 0.130, 0.139 | 0.741 / 0.761, 0.743 / 0.760 |

The stated twins copy their hypothesis from their premise word for word. What the
wrong sides teach still holds: a cue word the premise does not have means "not
entailed". Human-labelled entailed pairs say the cue in other words, and they are marked
down by as much as after the one-sided pairs.

As a further pass from the shipped weights, though, the one-sided pairs gained on every
dev check without losing FeverSymmetric. The mean of the two one-sided passes was made
with `scripts/soup_entailment.py`, where T = 1.06 (fitted on the 500 pairs both passes
held back) since both start from the same weights. Against the shipped weights
(``benchmarks/entailment_weights.py``, paired 95 % intervals):

| data set, reading | before | soup | change | 95 % interval |
| --- | --- | --- | --- | --- |
| BEGIN, the model alone | 0.9295 | 0.9326 | +0.0032 | -0.0090 .. +0.0143 |
| QAGS CNN/DM, the model alone | 0.7932 | 0.8008 | +0.0076 | -0.0034 .. +0.0188 |
| BEGIN, default (``graded+entailment``) | 0.9464 | 0.9479 | +0.0015 | -0.0033 .. +0.0060 |
| QAGS CNN/DM, default | 0.8136 | 0.8192 | +0.0056 | -0.0005 .. +0.0114 |
| FeverSymmetric dev | 0.7436 | 0.7495 | +0.0058 | -0.0005 .. +0.0121 |
| FeverSymmetric test | 0.7644 | 0.7663 | +0.0019 | -0.0039 .. +0.0077 |

The soup keeps the cue of the one-sided pairs: P(entailment) 0.626 with a cue word and
0.759 without (gap 0.134), where the shipped weights give 0.697 and 0.787 (0.089), on the
631 and 3,000 human-labelled entailed pairs of the recipe's pairs file past its first
10,000 (the shipped weights trained on most of them, the passes on none).

Each single pass gave the default 0.948 on BEGIN and 0.818 on QAGS. The pass without
the LLM-style pairs gave 0.947 and 0.812-0.814, and the symmetric pass 0.948-0.951 and
0.815.

On QAGS with each article inside a 10,000-word document (``benchmarks/validity.py
support_long_documents``), the soup moved the default from 0.8123 to 0.8191 and the
model alone from 0.7949 to 0.8029. Within each article (``auroc_within_group``), the
default rose from 0.744 to 0.764 (the article alone) and from 0.744 to 0.769 (inside
10,000 words); the model alone fell from 0.773 to 0.769 and from 0.782 to 0.769.

**Not shipped: it marks down supported answers that state a cause or a purpose.** The
dev sets (dialogue replies, news summary sentences) hold few of them; the shipped RAG
example does. P(entailment) of each answer of ``examples/rag.jsonl`` against its
contexts, shipped weights then soup: "Seasons are caused by the tilt of Earth's axis,
about 23.4 degrees, which changes how directly sunlight hits each hemisphere" (the
context: "tilted about 23.4 degrees ..., so each hemisphere receives more direct
sunlight") 0.94 then 0.41; "Mars is called the Red Planet because iron oxide on its
surface gives it a reddish colour" 0.97 then 0.57; "The Eiffel Tower was completed in
1889 for the World's Fair" ("... as the entrance arch to the 1889 World's Fair") 0.70
then 0.18; `faithfulness` of the three 0.83, 0.89 and 0.70 then 0.67, 0.61 and 0.53.
The rules teach that a causal link or an added detail the premise lacks is not
entailed, and the model learnt the words ("caused", "because", "for") rather than the
lack. Before pairs like these are trained on again, a screen of supported answers that
explain (human-labelled, not from an evaluation benchmark) should stand beside the dev
sets.

Also tried on 29 November 2026, against the shipped weights:

- the same recipe on pairs that also hold the task dialogues (``--more-text``): FeverSymmetric
  fell by 0.008 and 0.012 (dev and test, intervals -0.015 .. -0.001 and -0.018 .. -0.005),
  the default gained 0.002 on BEGIN and 0.004 on QAGS, and BEGIN alone lost 0.001;
- four passes (seeds 13 to 16) in one soup (T = 1.04): BEGIN and QAGS as the two-pass soup
  or a little higher (alone 0.9331 and 0.8026, default 0.9481 and 0.8196), FeverSymmetric
  dev +0.0023 but test -0.0018 (interval -0.0074 .. +0.0039): a loss on a left-out set;
- the two passes in one soup with two passes on the same file without the LLM-style
  pairs (``--no-llm-errors``, seeds 13 and 14; T = 1.18): a smaller cue gap (0.106) and
  the best FeverSymmetric (0.7510 and 0.7712, both intervals above zero), the model
  alone higher (BEGIN 0.9340, QAGS 0.8034, in 10,000 words 0.8054), but the default
  lower than the two-pass soup on every set (BEGIN 0.9475, QAGS 0.8176, in 10,000 words
  0.8176, within each article 0.760 and 0.760); on the three RAG answers above 0.69,
  0.89 and 0.49: better than the two-pass soup, still below the shipped weights;
- the two-pass recipe with an entailed twin after each causal wrong pair, whose premise
  states the same link in other words ("A, as b" for "A because b", "A; as a result, b"
  for "A, so b"; 661 twins made by a one-off rewrite of the pairs file, about 70 of them
  in the 10,000 pairs read): the default 0.9485 and 0.8196 (QAGS interval +0.0001 ..
  +0.0117), FeverSymmetric 0.7446 and 0.7622 (test -0.0022), and `faithfulness` of the
  Mars, seasons and Eiffel answers 0.74, 0.71 and 0.59 (two-pass soup 0.61, 0.67, 0.53;
  shipped 0.89, 0.84, 0.70). Twins that state the link another way help, and more of
  them, for the detail and hedge rules too, were the next thing tried (below).

**Shipped on 29 November 2026: reworded twins, with plain passes in the soup.** The pairs
of ``--more-data --llm-errors reworded`` (97,158; 1,040 causal, 3,345 detail and 343
hedge twins), two passes as above and two more on the same file with
``--no-llm-errors``, all four averaged (T = 1.23). Against the weights before, with the
withdrawn one-sided soup and the two reworded passes alone: the default on BEGIN and
QAGS, both readings' AUROC on the 90 hand-written answers of
``benchmarks/data/explaining_answers`` (a cause, a purpose, a consequence or a detail,
supported or not) and the default's mean over the supported ones, the cue gap (as above,
on the 650 and 3,000 pairs of the reworded file past its first 10,000), FeverSymmetric,
and P(entailment) of the Mars, seasons and Eiffel answers of ``examples/rag.jsonl``:

| weights | BEGIN, QAGS | explaining | supported | cue gap | FeverSymmetric | three answers |
| --- | --- | --- | --- | --- | --- | --- |
| before | 0.9464, 0.8136 | 0.600, 0.660 | 0.81 | 0.086 | 0.7436, 0.7644 | 0.98, 0.93, 0.93 |
| one-sided | 0.9479, 0.8192 | 0.641, 0.674 | 0.67 | 0.136 | 0.7495, 0.7663 | 0.54, 0.64, 0.83 |
| reworded | 0.9473, 0.8159 | 0.652, 0.679 | 0.73 | 0.105 | 0.7437, 0.7613 | 0.81, 0.75, 0.84 |
| + plain | 0.9468, 0.8153 | 0.645, 0.677 | 0.75 | 0.093 | 0.7459, 0.7650 | 0.91, 0.82, 0.85 |

("before": the weights shipped before; "one-sided": the withdrawn soup; "reworded": the
two reworded passes; "+ plain": those with the two plain passes, shipped.)

The twins said in other words cut the cue gap the one-sided pairs left by about half,
and the plain passes take it back near that of the weights before; what stays is the
gain in ranking the explaining answers (the causal ones 0.33 to 0.44, hedges 0.57 to
0.65: still poor) and every left-out number of ``benchmarks/validity.py`` up a little
(the README has them). The fourth answer of ``examples/rag.jsonl`` ("The Berlin Wall
fell ..., which led to German reunification in 1990") is no supported answer: its
contexts give the two events side by side and no link, so its fall (`faithfulness` 0.84
to 0.76) is right, and it is not among the three above.

Tried and not taken: the same soup with the reworded passes reading 20,000 pairs each
(594 steps, T = 1.26). Against the shipped soup, QAGS alone +0.0045 (interval +0.0011 ..
+0.0083) and the default +0.0003 on BEGIN and +0.0012 on QAGS, but FeverSymmetric dev
-0.0020, the seasons answer 0.79, and the explaining answers ranked no better (0.641
and 0.682; the causal ones 0.44 again).

Tried on 29 November 2026 and not taken: contrasts against the reworded premise
(``--llm-errors contrasted``). The reworded twins teach that a premise stating a link
entails a hypothesis stating it; the hand-written answers that fool the model are
instead wrong links beside a stated one ("the demo moved because the room is being
repainted", where the text gives the CFO's travel as the reason). So each causal pair
got a fourth, neutral: against the reworded premise, the effect given another sentence
of the window as its cause, or the link reversed (`_misattributed_link`; 1,040 of the
98,198 pairs). The same four-pass soup (T = 1.26) against the shipped one: the default
+0.0010 on BEGIN and +0.0020 on QAGS, the model alone +0.0023 and +0.0052,
FeverSymmetric -0.0010 and -0.0011, the explaining answers 0.637 / 0.669 (shipped 0.639
/ 0.677; causal 0.45 against 0.44), their supported mean 0.68 (0.74), the seasons answer
0.71 (0.78). With more of them (every claim's causal quad where it has one: 2,737 claims;
2,000 of those pairs in each reworded pass's 10,000) the causal answers rose to 0.48 in
the soup and 0.52 in the two passes alone, while the supported mean fell to 0.67 and
0.57: the model learns to mark down causal wording faster than to check the link.

The recipe, about 20 minutes on 2 cores: ``--more-data --llm-errors reworded --pairs-out
P``; ``--pairs P --limit 10000 --epochs 1 --lr 2e-5 --bf16 --init <before> --seed 13``
and ``--seed 14``, the same with ``--no-llm-errors``; the soup of the four.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import NamedTuple

from entailment_pairs import (
    DIGITS,
    LABELS,
    NAME_TYPES,
    NUMBER_TYPES,
    Claim,
    Pair,
    Sentence,
    fuse,
    merged_claims,
    names_by_label,
    sentence_end,
    strip_end,
    word_count,
)

#: the rules of `llm_style_pair`: a pair's kind is one of them, or "llm_<rule>_source" or
#: "llm_<rule>_stated" (`claim_pairs`)
LLM_ERROR_RULES = ("merged", "merged_number", "causal", "hedge", "detail")


def is_llm_style(kind: str) -> bool:
    """Whether a pair of this kind was made by `llm_style_pair` (either side)."""
    return kind in LLM_ERROR_RULES or kind.startswith("llm_")


#: hedged wording, what an LLM overstates it as, and that overstatement in other words
#: (`_overstate`), tried in a random order (the first that matches is rewritten); the
#: overstated claim is neutral: the text does not say so much
_HEDGE_ADVERBS = "probably|possibly|perhaps|reportedly|allegedly|apparently|presumably|supposedly"
_APPROXIMATE = "about|approximately|around|nearly|almost|roughly|over|more than|less than|up to"
_REPORTED = "believed|thought|said|considered|reported|estimated|alleged|claimed"
_OVERSTATED = (
    (re.compile(r"\b(may|might|could)\b(?!\s+(?:have|not)\b)"), "will", "will certainly"),
    (re.compile(r"\b(is|are|was|were) likely to\b"), "will", "will certainly"),
    (re.compile(rf"\b({_HEDGE_ADVERBS}) "), "", "certainly "),
    (re.compile(r"\b(some|several|many|most)\b(?= of\b| [a-z]+s\b)"), "all", "each"),
    (re.compile(r"\b(often|sometimes|usually|frequently|generally|typically)\b"), "always",
     "invariably"),
    (re.compile(rf"\b({_APPROXIMATE}|at least|some) (?=\$?\d)"), "exactly ", "precisely "),
    (re.compile(r"\bsuggest(s|ed)?\b|\bindicate(s|d)?\b"), "prove", "establish"),
    (re.compile(rf"\b(is|are|was|were) (?:{_REPORTED}) to be\b"), r"\1", r"\1 certainly"),
)  # fmt: skip

#: words that already state a cause: a claim built from such a sentence is left alone
_CAUSAL = re.compile(
    r"\b(because|since|therefore|thus|hence|so that|as a result|due to|owing to|thanks to|"
    r"led to|leads to|lead to|caused|causes|cause|consequently|result(?:ed|s)? in|why)\b",
    re.IGNORECASE,
)


def _continued(sentence: Sentence) -> str:
    """A sentence as the continuation of another: its first word lower-cased unless it
    begins a name or is "I" or an acronym ("The", "Fighters", "If" are; "NASA" is not)."""
    text = sentence.text
    head = text.split(" ", 1)[0]
    keep = head == "I" or (len(head) > 1 and not head[1:].islower())
    if keep or any(text.startswith(name) for name, _ in sentence.entities):
        return text
    return head[0].lower() + text[1:]


def _capital(text: str) -> str:
    return text[0].upper() + text[1:] if text else text


def _overstate(claim: str, rng: random.Random) -> tuple[str, str | None] | None:
    """The claim with one hedge stated as certainty ("may" to "will", "about 40" to
    "exactly 40", "some of" to "all of", "suggests" to "proves"), and the same certainty
    in other words ("will certainly", "precisely 40", "each of", "establishes"; None for
    "all" before a plural noun, which has no such rewording)."""
    rules = list(_OVERSTATED)
    rng.shuffle(rules)
    for pattern, replacement, reworded in rules:
        match = pattern.search(claim)
        if match is None:
            continue
        if replacement == "prove":
            suffix = {"s": "s", "ed": "d", "d": "d"}.get(match.group(1) or match.group(2) or "", "")
            replacement = "prove" + suffix
            reworded += {"s": "es", "d": "ed"}.get(suffix, "")
        made = _capital(pattern.sub(replacement, claim, count=1))
        if not made or made == claim:
            return None
        plural_noun = replacement == "all" and not claim[match.end() :].startswith(" of")
        return made, None if plural_noun else _capital(pattern.sub(reworded, claim, count=1))
    return None


def _causal_link(
    first: Sentence, second: Sentence, rng: random.Random, others: Sequence[Sentence] = ()
) -> tuple[str, str, str, str] | None:
    """Two sentences of the window joined as the text joins them ("A, and b": entailed),
    with a causal link it does not state ("A because b", "A, so b", "B because a"), that
    link in other words (`_reworded_link`), and a link that those words do not state
    either (`_misattributed_link`; ``others``: the window's other sentences)."""
    if _CAUSAL.search(first.text) or _CAUSAL.search(second.text):
        return None
    fused = fuse(first.text, second.text)
    if fused is None:
        return None
    form = rng.choice(("because", "so", "reversed"))
    if form == "because":
        linked = f"{strip_end(first.text)} because {_continued(second)}"
        cause, effect = second, first
    elif form == "so":
        linked = f"{strip_end(first.text)}, so {_continued(second)}"
        cause, effect = first, second
    else:
        linked = f"{strip_end(second.text)} because {_continued(first)}"
        cause, effect = first, second
    linked = sentence_end(linked)
    reworded = _reworded_link(cause, effect, linked)
    return fused, linked, reworded, _misattributed_link(cause, effect, reworded, others)


def _reworded_link(cause: Sentence, effect: Sentence, linked: str) -> str:
    """``cause`` stated as the cause of ``effect`` in other words than ``linked``: "C, so
    e", "E because c", "C; as a result, e", "C. That is why e", "E, as c" or "C, which is
    why e", one of those ``linked`` does not use, picked by a generator seeded with
    ``linked`` (so the caller's draws stay the same)."""
    c, e = strip_end(cause.text), strip_end(effect.text)
    forms = [
        f"{c}, so {_continued(effect)}",
        f"{e} because {_continued(cause)}",
        f"{c}; as a result, {_continued(effect)}",
        f"{sentence_end(cause.text)} That is why {_continued(effect)}",
        f"{e}, as {_continued(cause)}",
        f"{c}, which is why {_continued(effect)}",
    ]
    others = [sentence_end(form) for form in forms if sentence_end(form) != linked]
    return random.Random(linked).choice(others)


def _misattributed_link(
    cause: Sentence, effect: Sentence, reworded: str, others: Sequence[Sentence]
) -> str:
    """A causal link a premise stating ``reworded`` (``cause`` as the cause of ``effect``)
    does not state: ``effect`` given another sentence of the window (``others``) as its
    cause, the error of an answer that names the wrong one of the reasons at hand ("E
    because f"), two times in three where the window has such a sentence; else cause and
    effect reversed ("E, so c"). The choices are drawn by a generator seeded with
    ``reworded`` (the caller's draws stay the same); the wording is a `_reworded_link`
    one."""
    pick = random.Random(reworded)
    wrong = [
        s
        for s in others
        if not _CAUSAL.search(s.text) and word_count(s.text) + word_count(effect.text) <= 45
    ]
    if wrong and pick.random() < 2 / 3:
        return _reworded_link(pick.choice(wrong), effect, reworded)
    return _reworded_link(effect, cause, reworded)


def _merge_facts(
    claim: str,
    entities: Sequence[tuple[str, str]],
    nearby: Sequence[tuple[str, str]],
    pool: dict[str, list[str]],
    rng: random.Random,
    types: frozenset[str],
) -> str | None:
    """A name (or date, or number) of ``types`` in the claim replaced by another of its
    type from another sentence of the paragraph (``nearby``), else of the article: two
    facts of the document merged into one wrong one (the first `merged_claims`)."""
    sources = (names_by_label(nearby), pool)
    return next(merged_claims(claim, entities, sources, rng, types), None)


def _invent_detail(
    claim: Sentence, premise: str, pool: dict[str, list[str]], rng: random.Random
) -> tuple[str, str] | None:
    """The claim with a specific date or place added that the article has but the window
    does not ("... in 1994", "... in Ontario"): a detail made up in a fluent sentence; and
    the claim stating that detail elsewhere ("In 1994, ..." or "... This was in 1994.",
    picked by a generator seeded with the made claim)."""
    kinds = ["DATE", "GPE"]
    rng.shuffle(kinds)
    for label in kinds:
        if any(lab == label for _, lab in claim.entities):
            continue
        candidates = [
            o
            for o in pool.get(label, [])
            if o not in premise and word_count(o) <= 4 and (label != "DATE" or DIGITS.search(o))
        ]
        if candidates:
            value = rng.choice(candidates)
            on = label == "DATE" and re.search(r"[A-Z][a-z]+ \d{1,2}\b|\b\d{1,2} [A-Z]", value)
            at = f"{'on' if on else 'in'} {value}"
            made = sentence_end(f"{strip_end(claim.text)} {at}")
            fronted = f"{_capital(at)}, {_continued(claim)}"
            apart = f"{sentence_end(claim.text)} This was {at}."
            return made, sentence_end(random.Random(made).choice((fronted, apart)))
    return None


class ErrorPair(NamedTuple):
    """A minimal pair of `llm_style_pair`: the ``entailed`` hypothesis, the ``wrong`` one
    (label index ``label``, made by ``rule``), the ``source``: the text of the premise
    both were made from (the claim, or the two sentences a causal link joins), and
    ``reworded``: text to put in the source's place that says what the wrong hypothesis
    says in other words (None where the rule has none: merged facts), and ``contrast``: a
    hypothesis that premise does not entail either (a causal link's `_misattributed_link`;
    None for the other rules)."""

    entailed: str
    wrong: str
    label: int
    rule: str
    source: str
    reworded: str | None = None
    contrast: str | None = None


def llm_style_pair(
    sentence: Sentence,
    neighbour: tuple[Sentence, Sentence] | None,
    premise: str,
    nearby: Sequence[tuple[str, str]],
    pool: dict[str, list[str]],
    rng: random.Random,
    others: Sequence[Sentence] = (),
) -> ErrorPair | None:
    """A minimal pair for the claim ``sentence`` (`ErrorPair`). ``neighbour`` is the claim
    and the sentence beside it in the window, in order; ``nearby`` the names of the
    paragraph's other sentences; ``others`` the window's sentences besides
    ``neighbour``."""
    rules = ["merged", "merged", "merged_number", "causal", "causal", "hedge", "hedge",
             "hedge", "detail", "detail"]  # fmt: skip
    rng.shuffle(rules)
    neutral, contradiction = LABELS.index("neutral"), LABELS.index("contradiction")
    claim = sentence.text
    for rule in rules:
        made: str | None = None
        reworded: str | None = None
        contrast: str | None = None
        entailed_text, label, source = claim, neutral, claim
        if rule == "merged":
            made = _merge_facts(claim, sentence.entities, nearby, pool, rng, NAME_TYPES)
            label = contradiction
        elif rule == "merged_number":
            made = _merge_facts(claim, sentence.entities, nearby, pool, rng, NUMBER_TYPES)
            label = contradiction
        elif rule == "causal" and neighbour is not None:
            linked = _causal_link(neighbour[0], neighbour[1], rng, others)
            if linked is not None:
                entailed_text, made, reworded, contrast = linked
                source = f"{neighbour[0].text} {neighbour[1].text}"
        elif rule == "hedge":
            made, reworded = _overstate(claim, rng) or (None, None)
        elif rule == "detail":
            made, reworded = _invent_detail(sentence, premise, pool, rng) or (None, None)
        if made and made != entailed_text:
            return ErrorPair(entailed_text, made, label, rule, source, reworded, contrast)
    return None


def stated_premise(premise: str, pair: ErrorPair) -> str:
    """``premise`` saying the wrong hypothesis of ``pair``: its source text (the first
    time it occurs) replaced by that hypothesis."""
    return premise.replace(pair.source, pair.wrong, 1)


#: the entailed twins `claim_pairs` can add to a minimal pair: none, the wrong hypothesis
#: entailed by a premise that says it word for word, or in other words, or in other words
#: with a causal link that premise does not state beside it (``contrasted``)
TWINS = ("none", "stated", "reworded", "contrasted")


def claim_pairs(claim: Claim, rng: random.Random, twin: str = "none") -> list[Pair]:
    """The `llm_style_pair` of ``claim`` (an `entailment_pairs.ClaimPairs`): its entailed
    side (kind "llm_<rule>_source") and its wrong side (kind "<rule>"), and by ``twin``
    (one of `TWINS`) also the wrong hypothesis entailed by the `stated_premise` (kind
    "llm_<rule>_stated") or by the premise with the source replaced by the pair's
    ``reworded`` text (kind "llm_<rule>_reworded"; none for merged facts); with
    ``contrasted`` the reworded twin and, for a causal link, the pair's ``contrast``
    against that same premise, neutral (kind "llm_causal_contrast": the premise now states
    a link, and the hypothesis states another). A twin is left out where the premise does
    not hold the source as one text. The draws from ``rng`` are the same either way."""
    if twin not in TWINS:
        raise ValueError(f"twin must be one of {TWINS}, not {twin!r}")
    para, i = claim.paragraph, claim.index
    if i + 1 < claim.end:
        pair_at: tuple[int, ...] = (i, i + 1)
    elif claim.start < i:
        pair_at = (i - 1, i)
    else:
        pair_at = ()
    neighbour = (para[pair_at[0]], para[pair_at[1]]) if pair_at else None
    nearby = [e for j, s in enumerate(para) if j != i for e in s.entities]
    others = [para[j] for j in range(claim.start, claim.end) if j not in pair_at]
    made = llm_style_pair(para[i], neighbour, claim.premise, nearby, claim.pool, rng, others)
    if made is None:
        return []
    entailment = LABELS.index("entailment")
    pairs = [
        Pair(claim.premise, made.entailed, entailment, f"llm_{made.rule}_source"),
        Pair(claim.premise, made.wrong, made.label, made.rule),
    ]
    if made.source not in claim.premise:
        return pairs
    if twin == "stated":
        premise = stated_premise(claim.premise, made)
        pairs.append(Pair(premise, made.wrong, entailment, f"llm_{made.rule}_stated"))
    elif twin in ("reworded", "contrasted") and made.reworded is not None:
        premise = claim.premise.replace(made.source, made.reworded, 1)
        pairs.append(Pair(premise, made.wrong, entailment, f"llm_{made.rule}_reworded"))
        if twin == "contrasted" and made.contrast is not None:
            neutral = LABELS.index("neutral")
            pairs.append(Pair(premise, made.contrast, neutral, f"llm_{made.rule}_contrast"))
    return pairs
