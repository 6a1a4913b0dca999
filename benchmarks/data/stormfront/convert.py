"""Build ``sentences.jsonl`` of this folder from the Stormfront hate speech dataset.

Run once, with a checkout of ``Vicomtech/hate-speech-dataset`` (see README.md):

    python benchmarks/data/stormfront/convert.py path/to/hate-speech-dataset

Writes one sentence per line: ``id`` (the file id, ``<comment>_<sentence>``),
``comment``, ``subforum``, ``label`` (``hate`` or ``noHate``; sentences labelled
``relation`` or ``idk/skip`` are left out) and ``split`` (``test`` for the files of the
dataset's ``sampled_test``, ``train`` for ``sampled_train``, else empty), then ``text``.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS = ("hate", "noHate")


def main(source: Path) -> None:
    split = {p.stem: "test" for p in (source / "sampled_test").glob("*.txt")}
    split |= {p.stem: "train" for p in (source / "sampled_train").glob("*.txt")}
    rows = []
    with (source / "annotations_metadata.csv").open(encoding="utf-8") as handle:
        for record in csv.DictReader(handle):
            if record["label"] not in LABELS:
                continue
            file_id = record["file_id"]
            text = (source / "all_files" / f"{file_id}.txt").read_text(encoding="utf-8")
            rows.append(
                {
                    "id": file_id,
                    "comment": file_id.split("_")[0],
                    "subforum": record["subforum_id"],
                    "label": record["label"],
                    "split": split.get(file_id, ""),
                    "text": text.strip(),
                }
            )
    out = HERE / "sentences.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} sentences to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
