"""The JSON specification's walkthrough documents, shared by the structured-output tests
(imported as ``from json_walkthrough import ...``; pytest puts this folder on
``sys.path``)."""

from __future__ import annotations

GT = {
    "name": "John Smith",
    "email": "john@example.com",
    "bio": "Senior engineer with 10 years of experience...",
    "internal_id": None,
    "status": "active",
}
AIO = {
    "name": "John Smyth",
    "email": "john@example.com",
    "bio": "Experienced senior engineer, 10+ years...",
    "internal_id": "abc123",
    "extra_field": "surprise",
}
CONFIG = {"name": "FUZZY", "bio": "SEMANTIC"}
