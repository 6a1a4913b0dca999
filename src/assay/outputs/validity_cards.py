"""Validity cards: how well each metric agrees with people, as measured on labelled data.

``assay/data/validity.json`` holds one card per registered metric, written by
``python benchmarks/validity.py --cards``: the evidence (data set, statistic, value with a
95% bootstrap interval, n, what was compared, the estimator that ran, Assay's version
and the date), the failure modes stated in the metric's docstring (its ``Weaknesses:``
part) and findings drawn from the evidence (a metric no better than chance, a metric
another one beats on the same data, numbers on data its model was trained on). A metric
with no human-labelled evidence has a card that says so.

`refresh` rebuilds everything but the evidence from the registry, so a new metric gets
its "no evidence" card and an edited docstring its failure modes without re-running the
checks; `render_markdown` writes ``docs/validity.md`` from the same document, and
`card_renderables` the cards that ``assay metrics --validity`` prints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from assay.metrics.base import Metric
from assay.metrics.registry import list_metrics

__all__ = [
    "NO_EVIDENCE",
    "PRIMARY_STATISTICS",
    "card_renderables",
    "failure_modes",
    "format_value",
    "load_cards",
    "refresh",
    "render_markdown",
]

#: the statistics that findings and the docs' family tables are drawn from; the others
#: (Pearson, AUROC within a question, ...) are shown on the cards only
PRIMARY_STATISTICS = ("spearman", "auroc")
#: value at which a statistic says "no agreement": findings compare the interval with it
CHANCE = {"spearman": 0.0, "auroc": 0.5}
NO_EVIDENCE = "no human-labelled evidence"
ONLY_TRAINING_DATA = "no independent human-labelled evidence (only data its model was trained on)"
_WEAKNESS = re.compile(r"\bWeakness(?:es)?:\s*")


def cards_path() -> Path:
    """The shipped cards file."""
    return Path(str(resources.files("assay.data").joinpath("validity.json")))


def load_cards(path: Path | None = None) -> dict[str, Any]:
    """The cards document (the shipped one unless ``path`` is given)."""
    return json.loads((path or cards_path()).read_text(encoding="utf-8"))


# ---- failure modes -------------------------------------------------------------------------


def _split_outside_brackets(text: str) -> list[str]:
    """Split at "; " and at sentence ends (". " before a capital or a backquote) that are
    not inside brackets or double quotes."""
    parts: list[str] = []
    depth, quoted, start = 0, False, 0
    for i, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif char == '"':
            quoted = not quoted
        if depth or quoted:
            continue
        end_of_sentence = char == "." and text[i + 1 : i + 2] == " " and i + 2 < len(text)
        if end_of_sentence and not (text[i + 2].isupper() or text[i + 2] == "`"):
            end_of_sentence = False
        if char == ";" or end_of_sentence:
            parts.append(text[start : i + (1 if end_of_sentence else 0)])
            start = i + 1
    parts.append(text[start:])
    return [p.strip().rstrip(".;") for p in parts if p.strip(" .;")]


def failure_modes(cls: type[Metric]) -> list[str]:
    """The known failure modes of a metric: its docstring's ``Weaknesses:`` (or
    ``Weakness:``) paragraph, from the marker to the paragraph's end, split into its
    clauses. Empty when the docstring states none."""
    doc = cls.__doc__ or ""
    found = _WEAKNESS.search(doc)
    if found is None:
        return []
    paragraph = re.split(r"\n\s*\n", doc[found.end() :], maxsplit=1)[0]
    return _split_outside_brackets(" ".join(paragraph.split()))


# ---- findings -----------------------------------------------------------------------------


def format_value(entry: dict[str, Any]) -> str:
    """``0.823 (0.80–0.85)``: the value with its 95% interval when there is one."""
    if entry["value"] is None:
        return "N/A"
    ci = entry.get("ci95")
    return f"{entry['value']:.3f}" + (f" ({ci[0]:.2f}–{ci[1]:.2f})" if ci else "")


def _is_metric_value(entry: dict[str, Any], name: str) -> bool:
    """Whether the entry scored the metric's own value (possibly as 1 - value or with
    another embedder), not one of its components or a variant of its inputs."""
    scored = entry["scored"].removeprefix("1 - ")
    return scored == name or scored.startswith((f"{name} (", f"{name}["))


def _where(entry: dict[str, Any]) -> str:
    data = entry["dataset"]
    return f"{data['name']} {data['split']}, {entry['compared']}"


def _by(entry: dict[str, Any]) -> str:
    return "" if entry["estimator"] == "-" else f" with {entry['estimator']}"


def _chance_finding(entry: dict[str, Any]) -> str | None:
    statistic, ci = entry["statistic"], entry.get("ci95")
    if statistic not in CHANCE or entry["value"] is None or not ci:
        return None
    chance = CHANCE[statistic]
    said = f"On {_where(entry)}: {statistic} {format_value(entry)}{_by(entry)}"
    if ci[1] < chance:
        return (
            f"{said}, below chance ({chance:g}): it orders these items against the human "
            "labels more often than with them, so it measures something other than what its "
            "name suggests."
        )
    if ci[0] <= chance:
        return f"{said}, not distinguishable from chance ({chance:g})."
    return None


def _better_finding(
    name: str, entry: dict[str, Any], pool: list[tuple[str, dict[str, Any]]]
) -> str | None:
    """Name the best other metric measured on the same items and labels, when its
    interval lies wholly above this entry's."""
    key = (entry["dataset"]["id"], entry["compared"], entry["statistic"], entry["n"])
    rivals = [
        (other, e)
        for other, e in pool
        if other != name
        and (e["dataset"]["id"], e["compared"], e["statistic"], e["n"]) == key
        and e["value"] is not None
        and e.get("ci95")
        and entry.get("ci95")
        and e["ci95"][0] > entry["ci95"][1]
    ]
    if not rivals:
        return None
    other, best = max(rivals, key=lambda pair: pair[1]["value"])
    return (
        f"Better on the same data ({_where(entry)}): {other}{_by(best)}, {best['statistic']} "
        f"{format_value(best)} against {format_value(entry)}{_by(entry)}."
    )


def _left_out_finding(entry: dict[str, Any], card: dict[str, Any]) -> str | None:
    """For a learned estimator scored on a data set left out of its training: its number
    against the other estimators scored on the same items, none fitted on them, best
    first."""
    if not entry.get("left_out") or entry.get("fitted_on") in (None, "nothing"):
        return None
    key = (entry["dataset"]["id"], entry["statistic"], entry["n"])
    others = [
        e
        for e in card["evidence"]
        if e is not entry
        and e.get("left_out")
        and e["value"] is not None
        and (e["dataset"]["id"], e["statistic"], e["n"]) == key
    ]
    if not others:
        return None
    against = "; ".join(
        f"{format_value(e)}{_by(e)} (fitted on {e['fitted_on']})"
        for e in sorted(others, key=lambda e: -e["value"])
    )
    return (
        f"Left out of its training (fitted on {entry['fitted_on']}), on {_where(entry)}: "
        f"{entry['statistic']} {format_value(entry)}{_by(entry)}, against {against}."
    )


def _findings(name: str, card: dict[str, Any], pool: list[tuple[str, dict[str, Any]]]) -> list[str]:
    out: list[str] = []
    for entry in card["evidence"]:
        if entry.get("trained_on"):
            crossed = any(
                e.get("cross_validated") and e["dataset"]["id"] == entry["dataset"]["id"]
                for e in card["evidence"]
            )
            note = f"Its model was trained on {entry['dataset']['name']}: " + (
                "the cross-validated numbers on it are the evidence, the others are in-sample."
                if crossed
                else "the numbers on it are not evidence of validity."
            )
            if note not in out:
                out.append(note)
            continue
        if entry["statistic"] not in PRIMARY_STATISTICS or not _is_metric_value(entry, name):
            continue
        findings = (
            _left_out_finding(entry, card),
            _chance_finding(entry),
            _better_finding(name, entry, pool),
        )
        for finding in findings:
            if finding and finding not in out:
                out.append(finding)
    return out


# ---- the document ---------------------------------------------------------------------------


def _status(evidence: list[dict[str, Any]]) -> str:
    if any(not e.get("trained_on") for e in evidence):
        return "human-labelled evidence"
    return ONLY_TRAINING_DATA if evidence else NO_EVIDENCE


def refresh(doc: dict[str, Any], metrics: Iterable[type[Metric]] | None = None) -> dict[str, Any]:
    """The document with a card for every registered metric (and none for a metric no
    longer registered): evidence kept, everything else rebuilt from the registry and the
    evidence, cards in catalogue order (family, then name)."""
    classes = list(metrics) if metrics is not None else list_metrics()
    cards: dict[str, Any] = {}
    for cls in classes:
        evidence = doc.get("cards", {}).get(cls.name, {}).get("evidence", [])
        cards[cls.name] = {
            "family": cls.family,
            "aliases": list(cls.aliases),
            "higher_is_better": cls.higher_is_better,
            "status": _status(evidence),
            "evidence": evidence,
            "failure_modes": failure_modes(cls),
            "findings": [],
        }
    pool = [
        (name, e)
        for name, card in cards.items()
        for e in card["evidence"]
        if not e.get("trained_on") and _is_metric_value(e, name)
    ]
    for name, card in cards.items():
        card["findings"] = _findings(name, card, pool)
    return {**doc, "cards": cards}


# ---- docs/validity.md ------------------------------------------------------------------------

DOC_HEADER = """# Validity cards

How well each metric agrees with people, measured on human-labelled **development data
only** (the files described in `benchmarks/validity.py` and `benchmarks/data/dialogue`).
Numbers come with a 95% bootstrap interval and n; where an estimator or a threshold was
tuned on this data, the number reported is cross-validated (train and test never share an
item or a question). A learned estimator is also scored on each data set left out of its
training (fitted on the others only), beside the estimator fitted on nothing; the default
estimator of a question is the one whose worst left-out number is best, and a default
changes only to a method that loses on no left-out data set (so faithfulness and its
kin default to the graded support: the support head, fitted on one data set, lost to it
on the other, both ways). Held-out numbers are measured independently, on other data,
and are not here. Generated by `python benchmarks/validity.py --cards` from
`src/assay/data/validity.json`; `assay metrics --validity [NAME]` prints the same cards.
"""


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _entry_cells(entry: dict[str, Any]) -> list[str]:
    data = entry["dataset"]
    return [
        f"{data['name']} {data['split']}",
        entry["compared"],
        entry["scored"],
        entry["estimator"],
        entry["statistic"],
        format_value(entry),
        str(entry["n"]),
    ]


def render_markdown(doc: dict[str, Any]) -> str:
    """docs/validity.md: the data sets, a table per family and a card per metric."""
    out = [DOC_HEADER, "## Data sets", "", "| data set | split | labels | source, licence |"]
    out.append("| --- | --- | --- | --- |")
    for data in doc["datasets"].values():
        out.append(
            f"| {_md(data['name'])} | {data['split']} | {_md(data['labels'])} "
            f"| {_md(data['source'])}; {_md(data['licence'])} |"
        )
    families: dict[str, list[str]] = {}
    for name, card in doc["cards"].items():
        families.setdefault(card["family"], []).append(name)
    head = "| metric | data | compared | scored | estimator | statistic | value (95% CI) | n |"
    for family, names in families.items():
        out += ["", f"## {family}", "", head, "| --- " * 8 + "|"]
        for name in names:
            card = doc["cards"][name]
            primary = [e for e in card["evidence"] if e["statistic"] in PRIMARY_STATISTICS]
            if not primary:
                out.append(f"| {name} | {card['status']} |  |  |  |  |  |  |")
            for entry in primary:
                out.append("| " + " | ".join([name, *map(_md, _entry_cells(entry))]) + " |")
    out += ["", "## Cards"]
    for name, card in doc["cards"].items():
        out += _markdown_card(name, card)
    return "\n".join(out) + "\n"


def _notes(card: dict[str, Any]) -> list[str]:
    """The evidence's notes, once each, with the check they belong to."""
    return sorted({f"{e['check']}: {e['note']}" for e in card["evidence"] if e.get("note")})


def _baselines(card: dict[str, Any]) -> list[str]:
    """Scores that know nothing about meaning (reply length, ...) measured beside an entry,
    once per check and statistic."""
    return sorted(
        {
            f"{e['check']} {e['statistic']}: "
            + ", ".join(f"{b} {v:.3f}" for b, v in e["baselines"].items())
            for e in card["evidence"]
            if e.get("baselines")
        }
    )


def _markdown_card(name: str, card: dict[str, Any]) -> list[str]:
    aliases = f" (also reported as {', '.join(card['aliases'])})" if card["aliases"] else ""
    polarity = "higher" if card["higher_is_better"] else "lower"
    out = ["", f"### {name}", "", f"{card['family']}{aliases}; {polarity} is better. "]
    out[-1] += f"Status: {card['status']}."
    if card["evidence"]:
        out += ["", "| data | compared | scored | estimator | statistic | value (95% CI) | n |"]
        out.append("| --- " * 7 + "|")
        for entry in card["evidence"]:
            out.append("| " + " | ".join(map(_md, _entry_cells(entry))) + " |")
        runs = sorted({f"Assay {e['assay_version']}, {e['measured']}" for e in card["evidence"]})
        out += ["", f"Measured with {'; '.join(runs)}."]
        notes = _notes(card)
        out += ["", "Notes:", *(f"- {note}" for note in notes)] if notes else []
        baselines = _baselines(card)
        out += (
            ["", "Baselines on the same items:", *(f"- {b}" for b in baselines)]
            if baselines
            else []
        )
    out += ["", "Findings:" if card["findings"] else "Findings: none."]
    out += [f"- {finding}" for finding in card["findings"]]
    modes = card["failure_modes"]
    out += ["", "Failure modes (from its docstring):" if modes else "Failure modes: none stated."]
    out += [f"- {mode}" for mode in modes]
    return out


# ---- the terminal ---------------------------------------------------------------------------


def card_renderables(name: str, card: dict[str, Any]) -> list[RenderableType]:
    """One card for a rich console: a heading, the evidence table, findings and failure
    modes."""
    aliases = f", also reported as {', '.join(card['aliases'])}" if card["aliases"] else ""
    polarity = "higher" if card["higher_is_better"] else "lower"
    out: list[RenderableType] = [
        Text.from_markup(
            f"[bold]{escape(name)}[/bold] ({escape(card['family'])}{escape(aliases)}; "
            f"{polarity} is better): {escape(card['status'])}"
        )
    ]
    if card["evidence"]:
        table = Table("data", "compared", "scored", "estimator", "stat", "value (95% CI)", "n")
        for entry in card["evidence"]:
            table.add_row(*map(escape, _entry_cells(entry)))
        out.append(table)
        runs = sorted({f"Assay {e['assay_version']}, {e['measured']}" for e in card["evidence"]})
        out.append(Text(f"measured with {'; '.join(runs)}"))
        out += [Text(f"note: {note}") for note in _notes(card)]
        out += [Text(f"baseline on the same items: {b}") for b in _baselines(card)]
    out += [Text(f"finding: {f}") for f in card["findings"]]
    modes = card["failure_modes"] or ["none stated in its docstring"]
    out += [Text(f"failure mode: {m}") for m in modes]
    return out
