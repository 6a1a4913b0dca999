"""Test sets from a team's own documents: ``assay generate`` (docs/generate.md).

`generate` reads a folder of documents (.txt, .md, .html, .pdf, or a JSONL of ready
chunks), makes N questions of a mix of kinds (single-chunk, multi-chunk, reasoning,
conversational, unanswerable) offline from spaCy's parse or with the configured judge,
checks each (its reference entailed by its contexts, not answerable from the question
alone, no near-duplicate, the documents' language) and returns JSONL-ready rows that
``assay run`` and ``assay evaluate`` read, with a summary of the run.
"""

from __future__ import annotations

from assay.generation.documents import Chunk, Unreadable, read_chunks
from assay.generation.generator import GenerationResult, generate, read_rows, to_row
from assay.generation.plan import DEFAULT_MIX, KINDS, parse_mix

__all__ = [
    "DEFAULT_MIX",
    "KINDS",
    "Chunk",
    "GenerationResult",
    "Unreadable",
    "generate",
    "parse_mix",
    "read_chunks",
    "read_rows",
    "to_row",
]
