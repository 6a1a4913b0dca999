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
