"""What a generation run makes: the mix of question kinds, the count of each, the personas.

- `parse_mix` reads ``single=0.5,multi=0.2,...`` (`KINDS`; weights >= 0, normalised to
  sum 1); `quotas` turns N and the mix into whole counts by largest remainders (the
  counts sum to N; ties go to the kind listed first in `KINDS`); `redistribute` moves the
  counts of kinds a method cannot make to the others in proportion to their weights.
- Personas: `read_personas` reads a file of user descriptions (``.txt``: one a line, ``#``
  comments; ``.jsonl``: objects with ``description`` and an optional ``name``);
  `drawn_personas` makes them from the documents' headings when no file is given.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import orjson

from assay.generation.documents import Chunk

__all__ = [
    "DEFAULT_MIX",
    "KINDS",
    "drawn_personas",
    "parse_mix",
    "quotas",
    "read_personas",
    "redistribute",
]

#: the kinds of question, in the order ties are settled
KINDS: tuple[str, ...] = ("single", "multi", "reasoning", "conversational", "unanswerable")
#: the default mix (the issue's)
DEFAULT_MIX: dict[str, float] = {
    "single": 0.5,
    "multi": 0.2,
    "reasoning": 0.1,
    "conversational": 0.1,
    "unanswerable": 0.1,
}


def parse_mix(text: str | Mapping[str, float] | None) -> dict[str, float]:
    """The mix ``kind=weight,...`` (or a mapping) as weights summing to 1, every kind of
    `KINDS` present (absent: 0).

    Raises:
        ValueError: an unknown kind, a weight that is not a number >= 0, or all zero.
    """
    if text is None:
        return dict(DEFAULT_MIX)
    if isinstance(text, str):
        items: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            kind, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"--mix: {part!r} is not kind=weight")
            try:
                items[kind.strip()] = float(value)
            except ValueError:
                raise ValueError(f"--mix: the weight of {kind.strip()!r} is not a number") from None
    else:
        items = dict(text)
    unknown = sorted(set(items) - set(KINDS))
    if unknown:
        raise ValueError(f"--mix: unknown kind(s) {unknown}; the kinds are {list(KINDS)}")
    if any(not math.isfinite(w) or w < 0 for w in items.values()):
        raise ValueError("--mix: weights must be finite numbers >= 0")
    total = sum(items.values())
    if total <= 0:
        raise ValueError("--mix: at least one weight must be above 0")
    return {kind: items.get(kind, 0.0) / total for kind in KINDS}


def quotas(n: int, mix: Mapping[str, float]) -> dict[str, int]:
    """Whole counts per kind summing to ``n``: floors of ``n * weight``, then one more
    for the largest remainders (ties: `KINDS` order)."""
    if n < 0:
        raise ValueError(f"n must be >= 0 (got {n})")
    exact = {k: n * mix.get(k, 0.0) for k in KINDS}
    counts = {k: math.floor(v) for k, v in exact.items()}
    left = n - sum(counts.values())
    order = sorted(KINDS, key=lambda k: (-(exact[k] - counts[k]), KINDS.index(k)))
    for kind in order[:left]:
        counts[kind] += 1
    return counts


def redistribute(
    counts: Mapping[str, int], mix: Mapping[str, float], cannot: Sequence[str]
) -> dict[str, int]:
    """``counts`` with the kinds in ``cannot`` set to 0 and their total shared among the
    other kinds in proportion to their weights (kinds of weight 0 stay 0; with no other
    weighted kind, ``single`` takes it all)."""
    moved = sum(counts[k] for k in cannot)
    kept = {k: (0 if k in cannot else counts[k]) for k in KINDS}
    weights = {k: mix.get(k, 0.0) for k in KINDS if k not in cannot and mix.get(k, 0.0) > 0}
    if not weights:
        weights = {"single": 1.0}
    total = sum(weights.values())
    extra = quotas(moved, {k: w / total for k, w in weights.items()})
    return {k: kept[k] + extra[k] for k in KINDS}


def read_personas(path: str | Path) -> list[str]:
    """The user descriptions in ``path`` (see the module doc).

    Raises:
        ValueError: a JSONL line that is not an object with a non-empty ``description``
            (naming the file and line), or a file with no persona.
        OSError: the file cannot be read.
    """
    path = Path(path)
    personas: list[str] = []
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() in {".jsonl", ".json"}:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
            description = record.get("description") if isinstance(record, dict) else None
            if not isinstance(description, str) or not description.strip():
                raise ValueError(
                    f"{path}:{number}: field 'description': a non-empty string is required"
                )
            name = record.get("name")
            prefix = f"{name}: " if isinstance(name, str) and name.strip() else ""
            personas.append(prefix + " ".join(description.split()))
    else:
        for line in text.splitlines():
            line = " ".join(line.split())
            if line and not line.startswith("#"):
                personas.append(line)
    if not personas:
        raise ValueError(f"{path}: no persona in the file")
    return personas


def drawn_personas(chunks: Sequence[Chunk], most: int = 4) -> list[str]:
    """Personas drawn from the documents: a reader new to each of the ``most`` most
    frequent top-level headings (ties: first seen), else to each document."""
    tops = Counter(c.heading.split(" > ", 1)[0] for c in chunks if c.heading)
    topics = [t for t, _ in tops.most_common(most)]
    if not topics:
        topics = list(dict.fromkeys(Path(c.source).stem for c in chunks))[:most]
    return [f"a new user who wants to know about {topic}" for topic in topics] or [
        "a new user of the product"
    ]
