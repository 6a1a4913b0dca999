"""``assay serve``: the API and dashboard over the results store (uvicorn).

Binds 127.0.0.1:8000 by default and answers only requests whose Host is a loopback name
or one given with ``--allowed-host`` / ``ASSAY_ALLOWED_HOSTS``. A non-loopback address is
refused unless
``ASSAY_API_TOKEN`` is set: with a token every write request needs
``Authorization: Bearer <token>``; without one, anyone who can reach the port could write.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Annotated

import typer

from assay.cli.application import app
from assay.cli.consoles import messages
from assay.cli.options import StoreUrlOption

EXIT_USAGE = 2


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (127.0.0.0/8, ::1)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # any other host name may resolve to a public address


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    db: StoreUrlOption = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A Host name to answer besides the loopback names (behind a proxy: its "
            "public name); repeat for several. Default: ASSAY_ALLOWED_HOSTS (comma separated). "
            "Requests naming any other host are refused (DNS rebinding).",
        ),
    ] = None,
    live_metrics: Annotated[
        str | None,
        typer.Option(
            "--live-metrics",
            help="Metrics scored on each trace received at POST /v1/traces (OTLP/HTTP), "
            "comma separated, e.g. faithfulness,judged_relevance. Default: ASSAY_LIVE_METRICS "
            "or live.metrics in the config; none: traces are stored as samples only.",
        ),
    ] = None,
    live_sample_rate: Annotated[
        float | None,
        typer.Option(
            "--live-sample-rate",
            min=0.0,
            max=1.0,
            help="Share of traces scored, chosen by trace id (default 1).",
        ),
    ] = None,
    live_monitor: Annotated[
        list[str] | None,
        typer.Option(
            "--live-monitor",
            help="A rule read on each live run as each hour closes, e.g. "
            "'mean(faithfulness) < 0.7' or 'timeout_rate > 5%'; repeat for several. Default: "
            "ASSAY_LIVE_MONITORS (';' separated) or live.monitors in the config. A state "
            "change is POSTed to ASSAY_LIVE_WEBHOOK (live.webhook) when set.",
        ),
    ] = None,
    live_scoring: Annotated[
        bool,
        typer.Option(
            "--live-scoring/--no-live-scoring",
            help="Run the worker that turns received traces into scored samples. Off: "
            "the receiver only stores them (an ingest-only server; one server with the "
            "worker on the same store scores them). One worker per store.",
        ),
    ] = True,
    live_grace: Annotated[
        float | None,
        typer.Option(
            "--live-grace",
            min=0.0,
            help="Seconds without a new span, after the root span, before a trace is "
            "scored (default 2).",
        ),
    ] = None,
) -> None:
    """Serve the JSON API (/api, docs at /docs), the dashboard and the OTLP/HTTP trace
    receiver (POST /v1/traces): received traces are stored before the answer and scored
    as they complete into the runs live/<service.name> (docs/live.md)."""
    from rich.markup import escape

    from assay.core.extras import MissingExtra, needs_extra
    from assay.store.db import Store, StoreError, default_url

    err = messages()
    try:
        with needs_extra("assay serve"):
            import uvicorn

            from assay.server.app import TOKEN_ENV, create_app
    except MissingExtra as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    token = os.environ.get(TOKEN_ENV) or None
    if not is_loopback(host) and token is None:
        err.print(
            f"[bold red]error:[/] refusing to bind {host}: it is reachable from other machines "
            f"and the API's write endpoints would be open. Set {TOKEN_ENV} (every POST, PUT "
            "and DELETE then needs 'Authorization: Bearer <token>'), or bind 127.0.0.1.",
            highlight=False,
        )
        raise typer.Exit(EXIT_USAGE)
    from assay.core.config import ConfigError, load_config
    from assay.engine.resources import Resources
    from assay.metrics.registry import resolve_metrics
    from assay.server.live_scoring import LiveScoring

    try:
        config = load_config(
            {
                "live_metrics": live_metrics,
                "live_sample_rate": live_sample_rate,
                "live_grace_seconds": live_grace,
                "live_monitors": "; ".join(live_monitor) if live_monitor else None,
            }
        )
        names = [n.strip() for n in (config.live_metrics or "").split(",") if n.strip()]
        metrics = resolve_metrics(names) if names else []
    except (ConfigError, KeyError, ValueError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc.args[0] if exc.args else exc))}")
        raise typer.Exit(EXIT_USAGE) from None
    try:
        store = Store(db or default_url())
    except StoreError as exc:  # escaped: the message may hold a pip extra in brackets
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    resources = Resources(config)
    try:
        live = LiveScoring(store, config, metrics, resources) if live_scoring else None
    except ValueError as exc:  # a monitor rule that does not read
        resources.close()
        store.close()
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_USAGE) from None

    where = f"[{host}]" if ":" in host else host
    err.print(
        f"Assay dashboard on http://{where}:{port}/ (API docs /docs) over {store.safe_url}"
        + (" — writes need the bearer token" if token else ""),
        highlight=False,
    )
    scored = ", ".join(m.name for m in metrics) or "none: stored as samples only"
    if live is None:
        scored = "off: traces are stored, for a server with the worker to score"
    err.print(f"OTLP/HTTP traces at /v1/traces; live scoring: {scored}", highlight=False)
    for warning in live.warnings if live is not None else []:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    try:
        app_ = create_app(
            store, token=token, allowed_hosts=allowed_host or None, resources=resources, live=live
        )
        if live is not None:
            if metrics:
                err.print("loading the live metrics' models...", highlight=False)
                live.warm_up()
            live.start()
        uvicorn.run(app_, host=host, port=port, log_level=log_level)
    finally:
        if live is not None:
            live.stop()
        resources.close()
        store.close()
