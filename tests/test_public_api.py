"""The public surface: everything in assay.__all__ exists, and nothing public is missing."""

import assay


def test_all_names_exist():
    for name in assay.__all__:
        assert hasattr(assay, name), name


def test_public_members_are_exported():
    public = {n for n in dir(assay) if not n.startswith("_") and not _is_module(getattr(assay, n))}
    assert public == set(assay.__all__) - {"__version__"}


def _is_module(obj):
    import types

    return isinstance(obj, types.ModuleType)


def _documented_names():
    """Every ``from assay… import name`` line and every `assay.…` name in backticks in the
    README and docs/ (file, dotted name)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = set()
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for module, names in re.findall(r"^\s*from (assay[\w.]*) import ([\w, ]+)$", text, re.M):
            found |= {(doc.name, f"{module}.{n.strip()}") for n in names.split(",")}
        found |= {(doc.name, name) for name in re.findall(r"`(assay(?:\.\w+)+)`", text)}
    return sorted((doc, name) for doc, name in found if name != "assay.toml")  # a file


def _resolves(dotted):
    """Import the longest module prefix of ``dotted``, then read the rest as attributes."""
    import importlib

    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for part in parts[end:]:
            obj = getattr(obj, part, None)
        return obj is not None
    return False


def test_every_documented_name_imports():
    names = _documented_names()
    # the scan finds the quick start's imports and the names the docs point to
    assert {("README.md", "assay.evaluate"), ("engine.md", "assay.engine.embed_ask")} <= set(names)
    assert [(doc, name) for doc, name in names if not _resolves(name)] == []
