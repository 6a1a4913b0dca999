"""Arabic and Arabic-English sanity check of the embedders: NOT a validity number.

Six Arabic sentences written for this check (not from a dataset, no human ratings), each
with an Arabic paraphrase and an English translation. Matched pairs (paraphrase,
translation) should have a higher cosine than mismatched ones, which pair the same
sentences with another sentence's paraphrase or translation (so length and wording are
balanced). The script prints, per embedder and pair kind, the matched and mismatched
cosines, whether every matched pair ranks above every mismatched one (AUROC 1.0), and how
many mismatched pairs would pass semantic_similarity's Arabic threshold (0.5). With six
items per kind it can show a failure, not measure agreement with people.

    python benchmarks/arabic_sanity.py                       # use-multilingual and e5-small
    python benchmarks/arabic_sanity.py use-multilingual minilm
"""

from __future__ import annotations

import sys

import numpy as np

from assay.models.embedders import make_embedder

#: (Arabic sentence, Arabic paraphrase, English translation)
ITEMS = [
    (
        "ذهب الولد إلى المدرسة صباحاً.",
        "توجّه الطفل إلى المدرسة في الصباح.",
        "The boy went to school in the morning.",
    ),
    (
        "ارتفعت أسعار النفط بشكل كبير هذا الأسبوع.",
        "شهدت أسعار النفط زيادة كبيرة خلال هذا الأسبوع.",
        "Oil prices rose sharply this week.",
    ),
    (
        "يمكنك إلغاء الاشتراك في أي وقت من صفحة الإعدادات.",
        "من صفحة الإعدادات تستطيع إلغاء اشتراكك متى شئت.",
        "You can cancel your subscription at any time from the settings page.",
    ),
    (
        "الطقس حار جداً اليوم في الرياض.",
        "درجة الحرارة مرتفعة للغاية في الرياض اليوم.",
        "It is very hot in Riyadh today.",
    ),
    (
        "سيتم شحن طلبك خلال ثلاثة أيام عمل.",
        "طلبك سيُشحن في غضون ثلاثة أيام عمل.",
        "Your order will be shipped within three business days.",
    ),
    (
        "القطة نائمة على الأريكة.",
        "تنام القطة فوق الكنبة.",
        "The cat is sleeping on the sofa.",
    ),
]

#: semantic_similarity's pass threshold when either text is Arabic (the default setting)
ARABIC_THRESHOLD = 0.5


def _auroc(matched: np.ndarray, mismatched: np.ndarray) -> float:
    """Share of (matched, mismatched) couples ranked the right way, ties counting half."""
    wins = (matched[:, None] > mismatched[None, :]).sum()
    ties = (matched[:, None] == mismatched[None, :]).sum()
    return float((wins + 0.5 * ties) / (len(matched) * len(mismatched)))


def report(spec: str) -> list[str]:
    """One line per pair kind (Arabic paraphrase, Arabic-English translation)."""
    embedder = make_embedder(spec)
    source = [a for a, _, _ in ITEMS]
    lines = []
    for kind, column in (("ar-ar paraphrase", 1), ("ar-en translation", 2)):
        other = [item[column] for item in ITEMS]
        rotated = other[1:] + other[:1]  # each sentence against another item's text
        matched = embedder.pair_similarity(source, other).astype(float)
        mismatched = embedder.pair_similarity(source, rotated).astype(float)
        passing = int((mismatched >= ARABIC_THRESHOLD).sum())
        lines.append(
            f"{embedder.name:26s} {kind:18s} matched {matched.mean():.2f} "
            f"(min {matched.min():.2f})  mismatched {mismatched.mean():.2f} "
            f"(max {mismatched.max():.2f})  AUROC {_auroc(matched, mismatched):.2f}  "
            f"mismatched >= {ARABIC_THRESHOLD}: {passing}/{len(mismatched)}"
        )
    return lines


def main(argv: list[str]) -> None:
    print("sanity check on 6 hand-written items: not a validity number")
    for spec in argv or ["use-multilingual", "e5-small"]:
        print("\n".join(report(spec)))


if __name__ == "__main__":
    main(sys.argv[1:])
