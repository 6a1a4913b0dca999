"""What the app keeps for its routes beyond the store: the shared models, created on the
first request that scores."""

from __future__ import annotations

from typing import Any

from assay.engine.resources import Resources, default_resources

__all__ = ["app_resources"]


def app_resources(app: Any) -> Resources:
    """The app's shared models (created on first use)."""
    if app.state.resources is None:
        app.state.resources = default_resources()
    return app.state.resources
