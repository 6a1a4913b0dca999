"""The Assay web server: JSON API and dashboard over the results store.

``create_app(store, token)`` builds the FastAPI application; ``assay serve`` runs it.
See docs/dashboard.md.
"""

from assay.server.app import create_app

__all__ = ["create_app"]
