"""How a judge panel combines its judges' values for one sample (``panel`` setting).

With the values ``v_j`` of the judges that answered (a judge that failed, or gave no
value, has no vote):

- ``mean``: ``(1/n) * sum_j v_j``; in the metric's range, same polarity.
- ``min``: the strictest judge's value: ``min_j v_j`` where higher is better,
  ``max_j v_j`` where lower is better (e.g. hallucination); every judge must pass for
  the panel to pass.
- ``majority``: each judge votes pass (``v_j >= t`` where higher is better, ``v_j <= t``
  where lower is better, ``t`` the metric's pass threshold) or fail; the value is the
  mean of the values on the side with more votes, a tie going to the failing side (the
  stricter reading, as ``min``). The mean of values all on one side of ``t`` is on that
  side, so the panel passes exactly when most judges pass; with 0/1 verdicts it is the
  majority verdict itself, and with graded verdicts it keeps how far that side stands
  from the threshold, which a bare 0/1 would throw away.

`combine` returns the value and the judges it was read from (all of them for ``mean``,
the strictest for ``min``, the majority side for ``majority``): the panel's evidence is
theirs.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["combine"]


def combine(
    values: Mapping[str, float],
    rule: str,
    *,
    threshold: float,
    higher_is_better: bool = True,
) -> tuple[float, list[str]]:
    """The panel's value of one sample from its judges' ``values`` (label -> value, at
    least one), by ``rule`` (``mean``, ``majority`` or ``min``), and the labels of the
    judges that value was read from (in ``values``' order).

    Raises:
        ValueError: no value, or an unknown rule.
    """
    if not values:
        raise ValueError("a panel needs at least one judge's value to combine")
    labels = list(values)
    if rule == "mean":
        chosen = labels
    elif rule == "min":
        strictest = min(values.values()) if higher_is_better else max(values.values())
        chosen = [label for label in labels if values[label] == strictest]
    elif rule == "majority":
        passing = [
            label
            for label in labels
            if (values[label] >= threshold if higher_is_better else values[label] <= threshold)
        ]
        failing = [label for label in labels if label not in passing]
        chosen = passing if len(passing) > len(failing) else failing
    else:
        raise ValueError(f"unknown panel rule {rule!r}: use mean, majority or min")
    return sum(values[label] for label in chosen) / len(chosen), chosen
