"""Tool calls against reference calls: did the agent call the right tools, with the right
arguments, in the right order?

The calls made are the ``kind == "tool"`` steps of ``Sample.trace`` (from ``assay.trace``,
an OTLP import, or a chat log's ``tool_calls``); the reference is
``Sample.expected_tool_calls``. A made call can only match a reference call of the same
name. The **argument agreement** of such a pair is the share of the reference call's
arguments that the made call got right, each argument compared with the same per-field
strategies as the JSON comparison (`assay.structured`: numbers, booleans, dates and
nested values EXACT; text SEMANTIC, or what the ``argument_strategies`` parameter names
per argument path: EXACT, NUMERIC, FUZZY, SEMANTIC; IGNORE leaves an argument out)::

    agreement(r, a) = correct arguments of a / arguments of r      (1 when r has none)

Missing arguments count as wrong; arguments the reference does not name are listed in
the evidence but not scored (extra optional arguments are common and harmless).

A NUMERIC argument (``argument_strategies={"amount": "NUMERIC"}``) is right when
``|made − reference| <= max(numeric_abs_tol, numeric_rel_tol·|reference|)`` (parameters
``numeric_rel_tol``, default 1e-6, and ``numeric_abs_tol``, default 0; see
`assay.structured.numeric`); its evidence states both values and the tolerance.

The metrics plan the embed asks of the SEMANTIC arguments of every same-name pair (the
pairing is chosen from all their agreements, so every candidate pair's texts are asked;
`assay.engine`), and the local scorer reads their vectors from the answers: a run embeds
them once with the chunk's other texts, a batch scored on its own in one call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assay.core.result import MetricResult
from assay.core.sample import Sample, ToolCall
from assay.engine import Answers, Ask, answered, execute
from assay.engine.resources import Resources
from assay.metrics.base import Metric
from assay.metrics.registry import register
from assay.structured.numeric import DEFAULT_ABS_TOL, DEFAULT_REL_TOL
from assay.structured.pipeline import EvalOptions, evaluate_many, scorer_pairs
from assay.structured.scorers import LocalFieldScorer, semantic_asks
from assay.structured.strategies import Strategy, StrategyConfig

__all__ = [
    "CallMatch",
    "argument_agreements",
    "argument_documents",
    "match_calls",
    "max_weight_assignment",
]

#: a tie-break that prefers matching two calls of the same name over leaving them
#: unmatched when their arguments agree on nothing (changes no score)
_PREFER_MATCH = 1e-9


@dataclass(frozen=True)
class CallMatch:
    """The best pairing of made calls with reference calls, and what it scores."""

    pairs: tuple[tuple[int, int, float], ...]  # (reference index, made index, agreement)
    reference: int
    made: int

    @property
    def total(self) -> float:
        return sum(agreement for _, _, agreement in self.pairs)


def _made_calls(sample: Sample) -> list[ToolCall]:
    return [step for step in sample.trace or [] if step.kind == "tool"]


def argument_documents(
    reference: Sequence[ToolCall], made: Sequence[ToolCall]
) -> tuple[list[tuple[int, int]], list[tuple[Any, Any]]]:
    """The same-name (reference, made) pairs whose reference call has arguments, and
    their (reference arguments, made arguments) documents, compared as JSON."""
    keys = [
        (i, j)
        for i, r in enumerate(reference)
        for j, a in enumerate(made)
        if r.name == a.name and r.arguments
    ]
    return keys, [(reference[i].arguments, made[j].arguments or {}) for i, j in keys]


def argument_agreements(
    reference: Sequence[ToolCall],
    made: Sequence[ToolCall],
    strategies: StrategyConfig,
    resources: Resources | None,
    options: EvalOptions | None = None,
) -> dict[tuple[int, int], tuple[float, list[dict[str, Any]]]]:
    """Agreement and per-argument evidence of every same-name (reference, made) pair; all
    pairs' arguments are compared in one batch (``options``: the NUMERIC tolerances and
    the FUZZY/SEMANTIC thresholds; defaults when None)."""
    keys, documents = argument_documents(reference, made)
    out: dict[tuple[int, int], tuple[float, list[dict[str, Any]]]] = {
        (i, j): (1.0, [])
        for i, r in enumerate(reference)
        for j, a in enumerate(made)
        if r.name == a.name and not r.arguments
    }
    if not keys:
        return out
    results = evaluate_many(
        documents, strategies, options=options, scorer=LocalFieldScorer(resources)
    )
    for key, result in zip(keys, results, strict=True):
        expected = [
            path
            for path in result.classification.gt_non_null
            if strategies.lookup(path) is not Strategy.IGNORE
        ]
        expected_fields = set(expected)
        correct = sum(f.score or 0.0 for f in result.fields if f.field in expected_fields)
        evidence = [
            {"argument": f.field, "score": f.score, "reason": f.reason}
            for f in result.fields
            if f.score is not None
        ]
        missing = sorted(set(expected) - {f.field for f in result.fields})
        evidence += [{"argument": p, "score": 0.0, "reason": "missing"} for p in missing]
        extra = sorted(result.classification.extra_keys)
        evidence += [
            {"argument": p, "score": None, "reason": "not in the reference"} for p in extra
        ]
        out[key] = (correct / len(expected) if expected else 1.0, evidence)
    return out


def match_calls(
    reference: Sequence[ToolCall],
    made: Sequence[ToolCall],
    agreements: Mapping[tuple[int, int], float],
    ordered: bool,
) -> CallMatch:
    """The pairing of same-name calls with the largest total agreement.

    ``ordered``: the pairs must keep both sequences' order (a weighted longest common
    subsequence, by dynamic programming). Otherwise any one-to-one pairing (the
    assignment problem, solved exactly by `max_weight_assignment`).
    """
    n, m = len(reference), len(made)
    if not agreements:
        return CallMatch((), n, m)
    if ordered:
        best = [[0.0] * (m + 1) for _ in range(n + 1)]
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                best[i][j] = max(best[i - 1][j], best[i][j - 1])
                if (i - 1, j - 1) in agreements:
                    paired = best[i - 1][j - 1] + agreements[(i - 1, j - 1)] + _PREFER_MATCH
                    best[i][j] = max(best[i][j], paired)
        pairs = []
        i, j = n, m
        while i and j:
            if best[i][j] == best[i - 1][j]:
                i -= 1
            elif best[i][j] == best[i][j - 1]:
                j -= 1
            else:
                pairs.append((i - 1, j - 1, agreements[(i - 1, j - 1)]))
                i, j = i - 1, j - 1
        return CallMatch(tuple(reversed(pairs)), n, m)
    weights = [[0.0] * m for _ in range(n)]
    for (i, j), agreement in agreements.items():
        weights[i][j] = agreement + _PREFER_MATCH
    chosen = max_weight_assignment(weights)
    pairs = [(i, j, agreements[(i, j)]) for i, j in chosen if (i, j) in agreements]
    return CallMatch(tuple(pairs), n, m)


def max_weight_assignment(weights: Sequence[Sequence[float]]) -> list[tuple[int, int]]:
    """(row, column) pairs, one-to-one, of the largest total weight, sorted by row.

    The Hungarian method with potentials (Kuhn-Munkres, O(n²·m) for n ≤ m rows; a wider
    than tall matrix is transposed): each row in turn is added along a shortest
    augmenting path in the reduced costs ``-w[i][j] - u[i] - v[j]``.
    """
    n = len(weights)
    m = len(weights[0]) if n else 0
    if n == 0 or m == 0:
        return []
    transposed = n > m
    cost = [[-w for w in row] for row in weights]
    if transposed:
        cost = [list(column) for column in zip(*cost, strict=True)]
        n, m = m, n
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    owner, way = [0] * (m + 1), [0] * (m + 1)  # owner[j]: row (1-based) on column j
    for row in range(1, n + 1):
        owner[0], column = row, 0
        slack, used = [inf] * (m + 1), [False] * (m + 1)
        while owner[column]:
            used[column] = True
            i, delta, nearest = owner[column], inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    reduced = cost[i - 1][j - 1] - u[i] - v[j]
                    if reduced < slack[j]:
                        slack[j], way[j] = reduced, column
                    if slack[j] < delta:
                        delta, nearest = slack[j], j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    slack[j] -= delta
            column = nearest
        while column:
            previous = way[column]
            owner[column] = owner[previous]
            column = previous
    pairs = [(owner[j] - 1, j - 1) for j in range(1, m + 1) if owner[j]]
    if transposed:
        pairs = [(j, i) for i, j in pairs]
    return sorted(pairs)


class _ToolCallMetric(Metric):
    """Shared inputs and matching of the reference-call metrics."""

    family = "agent"
    suites = ("agent",)
    requires = ("expected_tool_calls",)
    needs = frozenset({"embedder"})
    ordered = False

    def __init__(
        self,
        argument_strategies: Mapping[str, str] | None = None,
        *,
        numeric_rel_tol: float = DEFAULT_REL_TOL,
        numeric_abs_tol: float = DEFAULT_ABS_TOL,
    ) -> None:
        self.argument_strategies = dict(argument_strategies or {})
        self._strategies = StrategyConfig.coerce(self.argument_strategies)
        self._options = EvalOptions(
            numeric_rel_tol=numeric_rel_tol, numeric_abs_tol=numeric_abs_tol
        )

    def params(self) -> dict[str, Any]:
        """The argument strategies when given; the NUMERIC tolerances when an argument is
        NUMERIC (they change nothing otherwise) or they differ from the defaults."""
        params: dict[str, Any] = {}
        if self.argument_strategies:
            params["argument_strategies"] = self.argument_strategies
        tolerances = (self._options.numeric_rel_tol, self._options.numeric_abs_tol)
        numeric = Strategy.NUMERIC in self._strategies.values()
        if numeric or tolerances != (DEFAULT_REL_TOL, DEFAULT_ABS_TOL):
            params["numeric_rel_tol"], params["numeric_abs_tol"] = tolerances
        return params

    def missing_inputs(self, sample: Sample) -> list[str]:
        """An empty ``expected_tool_calls`` is an answer (no tool should be called), not a
        missing input: only None is missing."""
        return ["expected_tool_calls"] if sample.expected_tool_calls is None else []

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """The embed asks of the SEMANTIC arguments of every same-name pair of calls (all
        candidates: the pairing depends on their agreements)."""
        _, documents = argument_documents(
            list(sample.expected_tool_calls or []), _made_calls(sample)
        )
        if not documents:
            return []
        pairs = scorer_pairs(documents, self._strategies, options=self._options)
        return semantic_asks(pairs)

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        # the batch's embed asks in one call (in a run: already in the chunk's answers)
        with answered(execute([self], samples, res)):
            return [self.compute(sample, res) for sample in samples]

    def match(self, sample: Sample, res: Resources) -> tuple[CallMatch, dict[str, Any]]:
        reference = list(sample.expected_tool_calls or [])
        made = _made_calls(sample)
        scored = argument_agreements(reference, made, self._strategies, res, self._options)
        matched = match_calls(reference, made, {k: v[0] for k, v in scored.items()}, self.ordered)
        paired_reference = {i for i, _, _ in matched.pairs}
        paired_made = {j for _, j, _ in matched.pairs}
        details = {
            "reference_calls": [r.name for r in reference],
            "made_calls": [a.name for a in made],
            "matches": [
                {
                    "reference": i,
                    "made": j,
                    "tool": reference[i].name,
                    "argument_agreement": agreement,
                    "arguments": scored[(i, j)][1],
                }
                for i, j, agreement in matched.pairs
            ],
            "unmatched_reference": [
                r.name for i, r in enumerate(reference) if i not in paired_reference
            ],
            "unmatched_made": [a.name for j, a in enumerate(made) if j not in paired_made],
        }
        return matched, details


@register
class ToolCallAccuracy(_ToolCallMetric):
    """Tool calls against reference calls, arguments included, order respected.

    Formula: ``max over order-keeping pairings of Σ agreement(r, a) / max(|R|, |A|)``,
    where R are the reference calls, A the calls made, each pair has the same tool name,
    and ``agreement`` is the share of the reference call's arguments the made call got
    right (module docstring). The pairing is a weighted longest common subsequence, so a
    right call made out of order counts once the order is restored by skipping others.
    No reference calls and no calls made gives 1 (nothing was asked, nothing was done);
    calls made when none were expected give 0. Range 0..1, higher is better; None
    without ``expected_tool_calls``. ``tool_call_accuracy_unordered`` is the same without
    the order. Evidence: every matched pair with its per-argument reasons, and the
    unmatched calls on each side. Weakness: argument text is compared with the offline
    embedder unless ``argument_strategies`` says otherwise.
    """

    name = "tool_call_accuracy"
    ordered = True
    default_threshold = 0.8

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        matched, details = self.match(sample, res)
        if matched.reference == 0 and matched.made == 0:
            return self.result(
                1.0, method="measurement", reason="no calls expected, none made", **details
            )
        value = matched.total / max(matched.reference, matched.made)
        return self.result(value, method="measurement", **details)


@register
class ToolCallAccuracyUnordered(ToolCallAccuracy):
    """Tool calls against reference calls, arguments included, in any order.

    Formula: ``max over one-to-one pairings of Σ agreement(r, a) / max(|R|, |A|)`` (the
    assignment problem, solved exactly), with the same conventions as
    ``tool_call_accuracy``. Range 0..1, higher is better; None without
    ``expected_tool_calls``. Use it when the tools are independent (parallel lookups).
    """

    name = "tool_call_accuracy_unordered"
    ordered = False


@register
class ToolCallF1(_ToolCallMetric):
    """F1 of the calls made against the reference calls: right tool with right arguments.

    A made call is correct when it is paired (one-to-one, any order) with a reference call
    of the same name whose arguments it all got right (agreement 1; lower with the
    ``min_agreement`` parameter). ``precision = correct / |A|``, ``recall = correct /
    |R|``, ``F1 = 2PR / (P + R)`` (0 when P + R = 0). No calls made: precision undefined
    (component None), F1 0 if calls were expected. No calls expected: recall undefined,
    F1 0 if calls were made. Neither: 1. Range 0..1, higher is better; None without
    ``expected_tool_calls``. Components: ``precision``, ``recall``.
    """

    name = "tool_call_f1"
    components = ("precision", "recall")
    default_threshold = 0.8

    def __init__(
        self,
        argument_strategies: Mapping[str, str] | None = None,
        min_agreement: float = 1.0,
        *,
        numeric_rel_tol: float = DEFAULT_REL_TOL,
        numeric_abs_tol: float = DEFAULT_ABS_TOL,
    ) -> None:
        super().__init__(
            argument_strategies, numeric_rel_tol=numeric_rel_tol, numeric_abs_tol=numeric_abs_tol
        )
        if not 0.0 <= min_agreement <= 1.0:
            raise ValueError("min_agreement must be within 0..1")
        self.min_agreement = min_agreement

    def params(self) -> dict[str, Any]:
        return {**super().params(), "min_agreement": self.min_agreement}

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        matched, details = self.match(sample, res)
        n_ref, n_made = matched.reference, matched.made
        correct = sum(1 for _, _, agreement in matched.pairs if agreement >= self.min_agreement)
        if n_ref == 0 and n_made == 0:
            return self.result(
                1.0,
                components={"precision": 1.0, "recall": 1.0},
                method="measurement",
                reason="no calls expected, none made",
                **details,
            )
        precision = correct / n_made if n_made else None
        recall = correct / n_ref if n_ref else None
        p, r = precision or 0.0, recall or 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        return self.result(
            f1,
            components={"precision": precision, "recall": recall},
            method="measurement",
            correct=correct,
            **details,
        )
