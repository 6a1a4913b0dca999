"""Write ``statements.jsonl`` from a checkout of microsoft/TOXIGEN (see README.md).

Run: ``python scripts/data/toxigen/convert.py PATH_TO_TOXIGEN_GIT_DIR`` (a clone or a bare
git directory; the files are read at its HEAD with ``git show``).

Every human-written statement of the repository's ``demonstrations/*/*.txt`` and
``prompts/*_1k.txt`` files (the prompt files repeat the demonstrations in shuffled
groups of five, with "\\n"-joined lines; a few lines were joined without a break, "right?-
these ...", and are split here) becomes one line: ``text``, ``label`` (``hate`` or
``neutral``, from the file name), ``group`` (the target group, from the file name) and
``files`` (where it occurs). A statement is kept once per label (exact text); one found
under both labels is dropped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "statements.jsonl"
#: two statements joined without a line break: "... right?- these ..."
JOINED = re.compile(r"(?<=\S)- (?=\S)")
GROUP_OF_FILE = re.compile(r"^(hate|neutral)_(.+?)(?:_sentences|_1k)?\.txt$")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def statements(text: str) -> list[str]:
    out = []
    for line in text.replace("\\n", "\n").split("\n"):
        for part in JOINED.split(line):
            part = part.strip().removeprefix("-").removesuffix("-").strip()
            if part:
                out.append(part)
    return out


def main(repo: Path) -> None:
    names = git(repo, "ls-tree", "-r", "HEAD", "--name-only").split("\n")
    chosen = [
        n
        for n in names
        if (n.startswith("demonstrations/") and n.endswith(".txt"))
        or (n.startswith("prompts/") and n.endswith("_1k.txt"))
    ]
    found: dict[tuple[str, str], dict] = {}
    for name in sorted(chosen):
        match = GROUP_OF_FILE.match(name.rsplit("/", 1)[-1])
        if match is None:
            continue
        label, group = match.groups()
        for text in statements(git(repo, "show", f"HEAD:{name}")):
            row = found.setdefault(
                (label, text), {"text": text, "label": label, "group": group, "files": []}
            )
            if name not in row["files"]:
                row["files"].append(name)
    both = {text for label, text in found if label == "hate"} & {
        text for label, text in found if label == "neutral"
    }
    rows = [row for (_, text), row in sorted(found.items()) if text not in both]
    with OUT.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = {lab: sum(r["label"] == lab for r in rows) for lab in ("hate", "neutral")}
    commit = git(repo, "rev-parse", "HEAD").strip()
    print(
        f"{len(rows)} statements {counts} ({len(both)} under both labels dropped) "
        f"from {commit} -> {OUT}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
