"""Write the ``*.jsonl.gz`` files of this folder from the source repositories (README).

    python scripts/data/nli_more/convert.py DOCNLI_GIT_DIR FEVER_SYMMETRIC_GIT_DIR

Each argument is a git directory (a clone or bare mirror) that holds the commit named in
the README; the files are read with ``git show commit:path``, so the output is the same
whatever the clone's checked-out state.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCNLI_COMMIT = "492992a4d3fbf4bb96a7a48c4c6c95ee11c3234a"
FEVER_SYMMETRIC_COMMIT = "fa25d17e73ea0694edc78133ec654b9f32f6db73"
SYMMETRIC_LABELS = {"SUPPORTS": "entailment", "REFUTES": "contradiction"}
DOCNLI_LABELS = ("entailment", "not_entailment")


def comparable(text: str) -> str:
    """``text`` lower-cased with everything but letters and digits removed: DocNLI's
    copies differ from the others in spacing ("metal ." / "metal.", a trailing space)."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def git_text(git_dir: str, commit: str, path: str) -> str:
    """The text of ``path`` at ``commit`` in the repository at ``git_dir``."""
    command = ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"]
    return subprocess.run(command, check=True, capture_output=True).stdout.decode("utf-8")


def docnli_rows(git_dir: str, path: str) -> list[dict[str, str]]:
    """The rows of a DocNLI ``label \\t premise \\t hypothesis`` file."""
    rows = []
    for line in git_text(git_dir, DOCNLI_COMMIT, path).splitlines():
        if not line.strip():
            continue
        label, premise, hypothesis = line.split("\t")
        if label not in DOCNLI_LABELS:
            raise ValueError(f"{path}: unknown label {label!r}")
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": label})
    return rows


def symmetric_rows(git_dir: str, path: str) -> list[dict[str, str]]:
    """The rows of a FeverSymmetric file: evidence as premise, claim as hypothesis."""
    rows = []
    for line in git_text(git_dir, FEVER_SYMMETRIC_COMMIT, path).splitlines():
        if line.strip():
            row = json.loads(line)
            label = SYMMETRIC_LABELS[row["label"]]
            rows.append({"premise": row["evidence"], "hypothesis": row["claim"], "label": label})
    return rows


def write_rows(name: str, rows: list[dict[str, str]]) -> None:
    """``rows`` as gzipped JSON lines; mtime 0 so the bytes depend on the rows only."""
    with (
        open(HERE / name, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as handle,
    ):
        for row in rows:
            handle.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
    print(f"{name}: {len(rows)} pairs")


def main() -> None:
    docnli, symmetric = sys.argv[1], sys.argv[2]
    fever_symmetric = [
        row
        for split in ("dev", "test")
        for row in symmetric_rows(symmetric, f"symmetric_v0.2/fever_symmetric_{split}.jsonl")
    ]
    symmetric_claims = {comparable(row["hypothesis"]) for row in fever_symmetric}
    fever = [
        row
        for split in ("dev", "test")
        for row in docnli_rows(docnli, f"Data/binary-FEVER-NLI/{split}.txt")
        if comparable(row["hypothesis"]) not in symmetric_claims
    ]
    matched = HERE.parent / "nli" / "mnli_dev_matched.jsonl.gz"
    with gzip.open(matched, "rt", encoding="utf-8") as handle:
        matched_premises = {comparable(json.loads(line)["premise"]) for line in handle}
    mnli = [
        row
        for split in ("dev", "test")
        for row in docnli_rows(docnli, f"Data/binary-MNLI/{split}.txt")
        if comparable(row["premise"]) not in matched_premises
    ]
    write_rows("fevernli_binary.jsonl.gz", fever)
    write_rows("mnlimismatched_binary.jsonl.gz", mnli)


if __name__ == "__main__":
    main()
