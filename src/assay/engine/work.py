"""Where a run's model time goes: the items each model kind answered and the seconds it took.

The executor (`assay.engine.executor`) adds one entry per model call of a round: the kind
(``parse``: texts through spaCy; ``entities``: texts whose named entities spaCy recognises
when they are read, after the parse, `assay.text.parses.Parses`; ``entail``: (premise,
hypothesis) pairs through the entailment model; ``bertscore``: (candidate, reference)
pairs; ``embed``: texts through the run's embedder; ``embed <name>``: texts through another
embedder an ask names, e.g. the toxicity head's USE), the number of distinct asks it
answered (a cache or memo hit in front of the model included) and the wall seconds of the
call. `Resources.model_work` keeps the totals of the resources' life; a run reports the
difference `ModelWork.since` its start (`assay.evaluation.runner.Evaluation.model_work`),
and ``assay evaluate`` prints it as `work_line` after the table (``model_work`` in
``--format json``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["UNITS", "KindWork", "ModelWork", "work_line"]

#: what one item of each model kind is
UNITS = {
    "parse": "texts",
    "entities": "texts",
    "entail": "pairs",
    "bertscore": "pairs",
    "embed": "texts",
}

#: a listener's view of one model call: kind, items of the call, seconds of the call
Listener = Callable[[str, int, float], None]


@dataclass(frozen=True)
class KindWork:
    """The model work of one kind: ``items`` answered (texts or pairs: ``unit``) in
    ``seconds`` (wall time of the model calls)."""

    items: int
    unit: str
    seconds: float

    def to_dict(self) -> dict[str, int | str | float]:
        return {"items": self.items, "unit": self.unit, "seconds": self.seconds}


def _unit(kind: str) -> str:
    return UNITS.get(kind.split(" ", 1)[0], "items")


class ModelWork:
    """Thread-safe totals of the model calls, by kind: items answered and seconds taken.

    ``listeners`` are called after each call (a progress bar: `add_listener`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[str, tuple[int, float]] = {}
        self._listeners: list[Listener] = []

    def add(self, kind: str, items: int, seconds: float) -> None:
        """Count one model call of ``kind`` that answered ``items`` asks in ``seconds``."""
        with self._lock:
            done, spent = self._totals.get(kind, (0, 0.0))
            self._totals[kind] = (done + items, spent + seconds)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(kind, items, seconds)

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(kind, items, seconds)`` after each model call from now on."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def totals(self) -> dict[str, KindWork]:
        """The work of each kind so far, by kind."""
        with self._lock:
            totals = dict(self._totals)
        return {
            kind: KindWork(items, _unit(kind), round(seconds, 3))
            for kind, (items, seconds) in sorted(totals.items())
        }

    def since(self, before: Mapping[str, KindWork]) -> dict[str, KindWork]:
        """The work added since ``before`` (an earlier `totals`): one run's model work on
        resources that served others before it. Kinds with no new item are left out."""
        out: dict[str, KindWork] = {}
        for kind, now in self.totals().items():
            old = before.get(kind, KindWork(0, now.unit, 0.0))
            if now.items != old.items:
                seconds = round(now.seconds - old.seconds, 3)
                out[kind] = KindWork(now.items - old.items, now.unit, seconds)
        return out


def work_line(work: Mapping[str, KindWork]) -> str:
    """``work`` (`ModelWork.totals` or `ModelWork.since`) as one line, the slowest kind
    first: ``parse 300 texts 11.4s, entail 1,444 pairs 2.7s``; ``none`` when empty."""
    ordered = sorted(work.items(), key=lambda kv: -kv[1].seconds)
    parts = [f"{kind} {w.items:,} {w.unit} {w.seconds:.1f}s" for kind, w in ordered]
    return ", ".join(parts) or "none"
