"""Embedded models: sentence embedders, BERTScore, spaCy; one disk cache."""
