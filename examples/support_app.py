"""A toy support bot to try ``assay run`` on, offline:

    assay run examples/chatbot.jsonl --target python:examples/support_app.py:answer

It answers from a small help-centre page, picking the passage that shares the most words
with the question, and says so when none does. It is given each sample as a dict and
returns the answer with the passage it used (the retrieved context).
"""

from __future__ import annotations

import re

HELP_CENTRE = [
    "To reset your password, open Settings, then Account, and choose Reset password; "
    "we email you a link.",
    "Opening hours: Monday to Friday 8 am to 8 pm, Saturday 9 am to 5 pm, closed on Sunday.",
    "Returns are accepted within 30 days of delivery. After 30 days we offer store credit.",
    "We ship to the United States and Canada. Delivery to Canada takes 5 to 8 business days.",
    "The premium plan costs $25 a month or $240 a year.",
    "Card data is never stored on our servers: our payment processor handles it.",
    "Contact support by in-app chat or at support@example.com.",
    "Standard delivery takes 3 to 5 business days.",
    "You can change the delivery address on the Orders page until the parcel has shipped.",
]
STOP = {
    "a",
    "an",
    "the",
    "do",
    "does",
    "i",
    "my",
    "your",
    "you",
    "is",
    "are",
    "on",
    "to",
    "of",
    "how",
    "what",
    "can",
    "after",
    "in",
    "we",
}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def answer(sample: dict) -> dict:
    """The best-matching passage as the answer, or an honest "I don't know"."""
    asked = _words(sample.get("query") or "")
    best = max(HELP_CENTRE, key=lambda passage: len(asked & _words(passage)))
    if not asked & _words(best):
        return {"response": "Sorry, I don't know.", "contexts": []}
    return {"response": best, "contexts": [best]}
