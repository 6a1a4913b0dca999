"""The Assay web server: JSON API and dashboard over the results store.

``create_app(store, token)`` builds the FastAPI application; ``assay serve`` runs it.
See docs/dashboard.md. FastAPI is imported on first use of `create_app` (the ``server``
extra installs it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.server.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from assay.server.app import create_app

        return create_app
    raise AttributeError(f"module 'assay.server' has no attribute {name!r}")
