"""Write the ``*.txt.gz`` files of this folder from the source repositories (README).

    python scripts/data/paragraphs_more/convert.py SGD_GIT_DIR

The argument is a git directory (a clone or bare mirror) of
google-research-datasets/dstc8-schema-guided-dialogue that holds the commit named in the
README; the files are read with ``git show commit:path``, so the output is the same
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
SGD_COMMIT = "e852981ae34990f4358979625854259302feaa78"
#: the dev dialogues read, in file order, until `SGD_PARAGRAPHS` paragraphs are written
SGD_FILES = [f"dev/dialogues_{i:03d}.json" for i in range(1, 21)]
SGD_PARAGRAPHS = 1200
#: consecutive turns in one paragraph
TURNS_PER_PARAGRAPH = 4
#: as in ``../paragraphs``: shorter paragraphs, or those with fewer sentence ends, are left out
MIN_CHARS = 150
MIN_SENTENCE_ENDS = 2


def git_text(git_dir: str, commit: str, path: str) -> str:
    """The text of ``path`` at ``commit`` in the repository at ``git_dir``."""
    command = ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"]
    return subprocess.run(command, check=True, capture_output=True).stdout.decode("utf-8")


def turn_text(utterance: str) -> str:
    """One turn's utterance, whitespace normalised, a full stop added where it ends
    without one. No speaker label: spaCy reads "User:" as the end of the sentence
    before it, and the claims and windows came out cut at the wrong places."""
    text = re.sub(r"\s+", " ", utterance).strip()
    if text and text[-1] not in ".!?":
        text += "."
    return text


def dialogue_paragraphs(turns: list[dict]) -> list[str]:
    """A dialogue's turns, `TURNS_PER_PARAGRAPH` a paragraph, in order."""
    lines = [turn_text(t["utterance"]) for t in turns if t["utterance"].strip()]
    step = TURNS_PER_PARAGRAPH
    return [" ".join(lines[i : i + step]) for i in range(0, len(lines), step)]


def kept(paragraph: str) -> bool:
    return len(paragraph) >= MIN_CHARS and len(re.findall(r"[.!?](?:\s|$)", paragraph)) >= (
        MIN_SENTENCE_ENDS
    )


def sgd_paragraphs(git_dir: str) -> list[str]:
    """The paragraphs of the SGD dev dialogues, each kept once, up to `SGD_PARAGRAPHS`
    (whole dialogues: the last one read may pass the count)."""
    out: dict[str, None] = {}
    for path in SGD_FILES:
        for dialogue in json.loads(git_text(git_dir, SGD_COMMIT, path)):
            for paragraph in dialogue_paragraphs(dialogue["turns"]):
                if kept(paragraph):
                    out.setdefault(paragraph)
            if len(out) >= SGD_PARAGRAPHS:
                return list(out)
    return list(out)


def write_lines(name: str, lines: list[str]) -> None:
    """One paragraph a line, gzipped with mtime 0 (the file depends on the lines only)."""
    with (HERE / name).open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write("".join(line + "\n" for line in lines).encode("utf-8"))


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit(__doc__)
    paragraphs = sgd_paragraphs(argv[0])
    write_lines("sgd_dialogues_dev.txt.gz", paragraphs)
    print(f"sgd_dialogues_dev.txt.gz: {len(paragraphs)} paragraphs")


if __name__ == "__main__":
    main(sys.argv[1:])
