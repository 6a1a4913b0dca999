"""Build the dialogue development files of this folder from their public sources.

Run once, with the two source files extracted from their repositories (see README.md):

    python benchmarks/data/dialogue/convert.py usr_topical_chat.json FlowScore/data/

``usr_topical_chat.json`` is USR's Topical-Chat file (60 contexts, 6 responses each, 3
annotators); ``FlowScore/data/`` holds DSTC9 interactive-evaluation files
``chatbot1.json`` .. ``chatbot11.json`` (one row per annotator and dialogue). Writes
``usr_topical_chat.jsonl`` and ``dstc9_interactive.jsonl`` next to this file, one
conversation per line in Assay's sample shape (``id``, ``turns``, optional ``contexts``)
plus ``system`` (what produced the rated reply or conversation) and ``human`` (each rated
quality: the annotators' scores in order, ``null`` where an annotator answered N/A).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: USR's rated qualities and the names they get here
USR_QUALITIES = {
    "Maintains Context": "maintains_context",
    "Uses Knowledge": "uses_knowledge",
    "Overall": "overall",
    "Natural": "natural",
    "Engaging": "engaging",
    "Understandable": "understandable",
}
#: DSTC9 dialogue-level qualities kept (all eleven of the release)
DSTC9_QUALITIES = {
    "consistent": "consistent",
    "coherent": "coherent",
    "understanding": "understanding",
    "error recovery": "error_recovery",
    "human (overall)": "overall",
    "likeable": "likeable",
    "diverse": "diverse",
    "informative": "informative",
    "flexible": "flexible",
    "topic depth": "topic_depth",
    "inquisitive": "inquisitive",
}
#: conversations kept per DSTC9 chatbot (11 chatbots, 200 conversations each)
DSTC9_PER_BOT = 50


def usr_records(source: Path) -> list[dict[str, object]]:
    """USR Topical-Chat: each rated response as the assistant's last turn of its context.

    The context's utterances alternate speakers and the response answers the last one, so
    roles are given backwards from the end: response = assistant, the utterance before it
    = user, and so on."""
    records: list[dict[str, object]] = []
    for c_index, item in enumerate(json.loads(source.read_text(encoding="utf-8"))):
        history = [line.strip() for line in item["context"].split("\n") if line.strip()]
        for r_index, rated in enumerate(item["responses"]):
            texts = [*history, rated["response"].strip()]
            roles = [
                "assistant" if (len(texts) - 1 - i) % 2 == 0 else "user" for i in range(len(texts))
            ]
            records.append(
                {
                    "id": f"usr-tc-{c_index:02d}-{r_index}",
                    "turns": [{"role": r, "content": t} for r, t in zip(roles, texts, strict=True)],
                    "contexts": [item["fact"].strip()],
                    "system": rated["model"],
                    "human": {new: rated[old] for old, new in USR_QUALITIES.items()},
                }
            )
    return records


def dstc9_turns(text: str) -> list[dict[str, str]]:
    """``User: ...`` / ``System: ...`` lines as turns; a line with neither prefix continues
    the turn before it."""
    turns: list[dict[str, str]] = []
    for line in text.split("\n"):
        if line.startswith("User: "):
            turns.append({"role": "user", "content": line.removeprefix("User: ").strip()})
        elif line.startswith("System: "):
            turns.append({"role": "assistant", "content": line.removeprefix("System: ").strip()})
        elif line.strip():
            if not turns:
                raise ValueError(f"conversation starts without a speaker: {line[:60]!r}")
            turns[-1]["content"] += "\n" + line.strip()
    return turns


def _score(value: object) -> int | None:
    return None if value == "N/A" else int(value)  # type: ignore[call-overload]


def dstc9_records(folder: Path) -> list[dict[str, object]]:
    """DSTC9 interactive evaluation: `DSTC9_PER_BOT` conversations of each chatbot (those
    whose SHA-256 of the text sorts first: a fixed, content-defined choice), with every
    annotator's scores."""
    records: list[dict[str, object]] = []
    for bot in range(1, 12):
        rows = json.loads((folder / f"chatbot{bot}.json").read_text(encoding="utf-8"))
        by_text: dict[str, list[dict[str, object]]] = defaultdict(list)
        for row in rows:
            by_text[row["context"]].append(row)
        chosen = sorted(by_text, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
        for text in chosen[:DSTC9_PER_BOT]:
            ratings = by_text[text]
            digest = hashlib.sha256(text.encode()).hexdigest()[:10]
            records.append(
                {
                    "id": f"dstc9-bot{bot:02d}-{digest}",
                    "turns": dstc9_turns(text),
                    "system": f"chatbot{bot}",
                    "human": {
                        new: [_score(r[old]) for r in ratings]
                        for old, new in DSTC9_QUALITIES.items()
                    },
                }
            )
    return records


def write(records: list[dict[str, object]], name: str) -> None:
    with (HERE / name).open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{name}: {len(records)} conversations")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    write(usr_records(Path(argv[0])), "usr_topical_chat.jsonl")
    write(dstc9_records(Path(argv[1])), "dstc9_interactive.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
