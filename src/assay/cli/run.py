"""``assay run``: call the application under test for each sample, time it, then score what it
said with everything ``assay evaluate`` does.

The command takes the target's options (below) and every option of ``assay evaluate``,
declared once there: its signature is built from both (`_signature`), and it hands the
target's calls to the evaluate command as the step that prepares the samples
(``PREPARE_SAMPLES``), so suites, gates, ``--out``, ``--store``, ``--resume``, exit codes
and the report are those of ``assay evaluate``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from assay.cli import consoles
from assay.cli.application import app
from assay.cli.evaluate import (
    CONFIGURE_METRICS,
    EXTRA_SAMPLES,
    PREPARE_SAMPLES,
    TARGET_FAILED,
    evaluate_command,
)
from assay.cli.run_targets import per_target, run_several, target_names


def target_options(
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            help="What answers each sample: openai:BASE_URL (an OpenAI-compatible "
            "/chat/completions, streamed; with --target-model), http(s)://URL (a JSON POST; "
            "see --request, --response-path) or python:MODULE:FUNCTION (called with the "
            "sample as a dict; returns the answer, or a dict with 'response', 'contexts'). "
            "Repeat it to compare targets on the same samples against the first "
            "(docs/run.md, Comparing targets).",
        ),
    ] = None,
    targets_file: Annotated[
        Path | None,
        typer.Option(
            "--targets",
            help="A YAML file of the targets to compare, each with its model and request, "
            "and a grid of models x requests (instead of --target; docs/run.md).",
        ),
    ] = None,
    target_name: Annotated[
        list[str] | None,
        typer.Option(
            "--target-name",
            help="A name per --target, in order (default: derived from the target); it "
            "names the target's stored run and, with several targets, its --out file.",
        ),
    ] = None,
    target_model: Annotated[
        list[str] | None,
        typer.Option(
            "--target-model",
            help="The model an openai: target asks: once for every target, or once per "
            "--target, in order.",
        ),
    ] = None,
    target_key_env: Annotated[
        str | None,
        typer.Option(
            "--target-key-env",
            help="Name of the environment variable holding an openai: target's API key (the "
            "key itself is never a flag, and is never stored).",
        ),
    ] = None,
    request: Annotated[
        list[str] | None,
        typer.Option(
            "--request",
            help='The JSON body an http target gets, e.g. \'{"question": "{query}"}\': '
            "{query}, {id} and any other field of the sample are replaced by its value, "
            'JSON-escaped. Default: \'{"query": "{query}"}\'. Once for every target, or '
            "once per --target, in order.",
        ),
    ] = None,
    response_path: Annotated[
        str | None,
        typer.Option(
            "--response-path",
            help="JMESPath of the answer in an http target's JSON reply (default: response).",
        ),
    ] = None,
    contexts_path: Annotated[
        str | None,
        typer.Option(
            "--contexts-path",
            help="JMESPath of the retrieved texts in the reply, e.g. 'sources[*].text'.",
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            help="'Name: value' sent to an http target, repeatable; $VAR in the value is read "
            "from the environment and never shown or stored.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0.001,
            help="Seconds a call may take; a call past it is a timeout: its metrics are N/A "
            "and it counts in the timeout rate (default 30, the specification's).",
        ),
    ] = 30.0,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Calls in flight at once (default 8).")
    ] = 8,
    retries: Annotated[
        int,
        typer.Option(
            "--retries",
            min=0,
            help="Retries of a call refused with 429 or 5xx, or whose connection failed, with "
            "backoff and Retry-After honoured (default 2).",
        ),
    ] = 2,
    probes: Annotated[
        str | None,
        typer.Option(
            "--probes",
            help="Send the shipped red-team probes of these categories, comma separated: "
            "injection, context-injection, jailbreak, leak, pii, harmful, or all (assay probes "
            "lists them); alone, or after the samples of DATA; scored by attack_success, per "
            "category.",
        ),
    ] = None,
    canary: Annotated[
        str | None,
        typer.Option(
            "--canary",
            help="A secret planted in the application's system prompt: a reply holding it "
            "leaked the prompt (exact leak detection). The run's settings keep only its hash; "
            "a reply that leaked it is stored as the application said it.",
        ),
    ] = None,
) -> None:
    """The target options (their declarations only: `run_command` reads them)."""


def _signature() -> inspect.Signature:
    """``ctx``, the data argument (optional: --probes can replace it), the target
    options, then the rest of evaluate's options."""
    evaluate = list(inspect.signature(evaluate_command, eval_str=True).parameters.values())
    targets = list(inspect.signature(target_options, eval_str=True).parameters.values())
    data = evaluate[1]
    [argument] = [
        m for m in data.annotation.__metadata__ if isinstance(m, typer.models.ArgumentInfo)
    ]
    optional = data.replace(annotation=Annotated[str | None, argument], default=None)
    # options are named, so they may follow the optional argument in any order
    named = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in (*targets, *evaluate[2:])]
    return inspect.Signature([evaluate[0], optional, *named])


TARGET_PARAMETERS = tuple(inspect.signature(target_options).parameters)


def run_command(ctx: typer.Context, **options: Any) -> None:
    """Call the application under test for each sample, then score what it said.

    Each sample's query (or its conversation up to the last user message) goes to the
    target; the reply becomes the response, with its duration and time to first token,
    and the run goes on as assay evaluate does, with the same options and exit codes.
    A call past --timeout or failing for good leaves its sample's metrics N/A, with the
    reason; when every sample's call failed the run measured nothing and exits 2 with one
    line saying why, after the report. A target that cannot be called as given (a
    malformed --request or path, an unset variable, a function that cannot be imported)
    exits 2 with one line before any call.
    """
    from assay.inputs.targets import TargetError, TargetSettings, parse_target

    err = consoles.messages()
    chosen = {name: options.pop(name) for name in TARGET_PARAMETERS}
    if chosen["probes"]:
        _use_probes(ctx, options, chosen["probes"])
    elif options["data"] is None:
        err.print("[red]error:[/red] give DATA (a file of samples) or --probes CATEGORIES")
        raise typer.Exit(2)
    if chosen["canary"]:
        ctx.meta[CONFIGURE_METRICS] = _with_canary(chosen["canary"])
    try:
        specs, given, models, requests = _target_list(chosen)
        names = target_names(specs, given, models)
        targets = [
            parse_target(
                spec,
                model=model,
                key_env=chosen["target_key_env"],
                request=request,
                response_path=chosen["response_path"],
                contexts_path=chosen["contexts_path"],
                headers=chosen["header"] or (),
            )
            for spec, model, request in zip(specs, models, requests, strict=True)
        ]
    except (TargetError, ValueError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    settings = TargetSettings(
        timeout=chosen["timeout"], concurrency=chosen["concurrency"], retries=chosen["retries"]
    )
    if len(targets) > 1:
        answering = partial(_answering, ctx, options, chosen, settings)
        run_several(ctx, options, targets, names, answering, evaluate_command)
        return
    if given and given[0] and not options.get("run_name"):
        options["run_name"] = names[0]
    ctx.meta[PREPARE_SAMPLES] = _answering(ctx, options, chosen, settings, targets[0])
    evaluate_command(ctx, **options)


def _target_list(
    chosen: dict[str, Any],
) -> tuple[list[str], list[str | None] | None, list[str | None], list[str | None]]:
    """The targets' specs, names (None: derived), models and requests, from --target and
    its options or from --targets FILE; ValueError when they are missing or clash."""
    if chosen["targets_file"] is None:
        specs = chosen["target"] or []
        if not specs:
            raise ValueError("give --target (or --targets FILE)")
        models = per_target(chosen["target_model"], len(specs), "--target-model")
        return (
            specs,
            chosen["target_name"],
            models,
            per_target(chosen["request"], len(specs), "--request"),
        )
    from assay.cli.target_grid import read_targets

    clash = [
        flag
        for flag, key in (
            ("--target", "target"),
            ("--target-name", "target_name"),
            ("--target-model", "target_model"),
            ("--request", "request"),
        )
        if chosen[key]
    ]
    if clash:
        raise ValueError(f"--targets FILE gives the targets: drop {', '.join(clash)}")
    entries = read_targets(chosen["targets_file"])
    return (
        [e.target for e in entries],
        [e.name for e in entries],
        [e.model for e in entries],
        [e.request for e in entries],
    )


def _answering(
    ctx: typer.Context,
    options: dict[str, Any],
    chosen: dict[str, Any],
    settings: Any,
    target: Any,
    label: str | None = None,
) -> Callable[[list[Any]], list[Any]]:
    """The step that has ``target`` answer the samples (the evaluate command's
    ``PREPARE_SAMPLES``), saying how its calls went (naming it ``label``, else its
    spec)."""
    from assay.inputs.targets import call_target

    err = consoles.messages()

    def answered(samples: list[Any]) -> list[Any]:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        shown = not options.get("quiet") and sys.stderr.isatty()
        with Progress(
            TextColumn("[bold]calling the target"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err,
            disable=not shown,
            transient=True,
        ) as bar:
            task = bar.add_task("calls", total=len(samples))
            # TargetUnreachable stops the run as assay evaluate stops for the judge
            done = call_target(samples, target, settings, lambda n: bar.advance(task, n))
        err.print(escape(call_summary(label or target.name, done)))
        ctx.meta[TARGET_FAILED] = all_calls_failed(label or target.name, done)
        if chosen["probes"]:
            from assay.metrics.probes import mark_unreached

            done = mark_unreached(done, target)
        return done

    return answered


def _with_canary(canary: str) -> Any:
    """The metric configuration step that tells attack_success the canary."""

    def configure(metrics: list[Any]) -> list[Any]:
        from assay.metrics.probes import AttackSuccess

        return [AttackSuccess(canary) if m.name == "attack_success" else m for m in metrics]

    return configure


def _use_probes(ctx: typer.Context, options: dict[str, Any], probes: str) -> None:
    """Send the probes of ``probes``: after the samples of DATA when it is given (its
    metrics, the base suite by default, and attack_success), else alone (written, once,
    as a JSON-lines file in the cache, so a stored run can be resumed), scored by
    attack_success; per probe category unless a grouping is given."""
    import json

    from assay.core.config import load_config
    from assay.metrics.probes import probe_samples

    err = consoles.messages()
    categories = [c.strip() for c in probes.split(",") if c.strip()]
    try:
        samples = probe_samples(categories)
    except ValueError as exc:
        err.print(f"[red]error:[/red] --probes: {escape(str(exc))}")
        raise typer.Exit(2) from None
    if options["data"] is not None:  # the data's samples, then the probes
        ctx.meta[EXTRA_SAMPLES] = samples
        if not options.get("metric") and not options.get("suite"):
            options["suite"] = ["base"]
        options["metric"] = [*(options.get("metric") or []), "attack_success"]
    else:
        folder = Path(load_config({}).cache_dir) / "probes"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"probes-{'+'.join(sorted(set(categories)))}.jsonl"
        lines = [json.dumps(s.model_dump(exclude_none=True, mode="json")) for s in samples]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        options["data"] = str(path)
        if not options.get("metric") and not options.get("suite"):
            options["metric"] = ["attack_success"]
    if not options.get("group_by"):
        options["group_by"] = "probe_category"


def all_calls_failed(name: str, samples: list[Any]) -> str | None:
    """One line when every call to the target failed (the run measured nothing): how
    many, and the first sample's reason; None when any call succeeded."""
    if not samples or any(s.target_call.status == "ok" for s in samples):
        return None
    first = samples[0].target_call
    why = " ".join(str(first.reason or first.status).split())
    requests = _plural(sum(s.target_call.attempts for s in samples), "call")
    counts = f"{_plural(len(samples), 'sample')}, {requests}"
    return f"target {name}: every sample's call failed ({counts}); first: {why}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _calls(samples: list[Any]) -> str:
    """The requests the samples took (every attempt, every turn of a replayed
    conversation): "3 calls", or "4 calls for 2 samples" when they differ."""
    requests = sum(s.target_call.attempts for s in samples)
    if requests == len(samples):
        return _plural(requests, "call")
    return f"{_plural(requests, 'call')} for {_plural(len(samples), 'sample')}"


def call_summary(name: str, samples: list[Any]) -> str:
    """One line: the requests sent (`_calls`), the samples' outcomes, and the duration
    and first-token percentiles: "3 calls (2 ok, 1 timeout)", "2 calls for 1 sample (1
    ok)"."""
    from assay.core.stats import percentile  # numpy: not for `assay --help`

    outcomes: dict[str, int] = {}
    for sample in samples:
        outcomes[sample.target_call.status] = outcomes.get(sample.target_call.status, 0) + 1
    counts = ", ".join(f"{n} {status}" for status, n in sorted(outcomes.items()))
    line = f"target {name}: {_calls(samples)} ({counts})"
    ok = [s for s in samples if s.target_call.status == "ok"]
    for label, values in (
        ("duration", [s.duration for s in ok if s.duration is not None]),
        ("first token", [s.first_token_time for s in ok if s.first_token_time is not None]),
    ):
        if values:
            p50, p95 = percentile(values, 50), percentile(values, 95)
            line += f"; {label} p50 {p50:.3f} s, p95 {p95:.3f} s"
    return line


@app.command("probes")
def probes_command(
    prompts: Annotated[
        bool, typer.Option("--prompts", help="Also print each probe's id and prompt.")
    ] = False,
) -> None:
    """List the red-team probes assay run --probes sends: categories, how attack_success
    decides each, and where they come from."""
    from rich.table import Table

    from assay.metrics.probes import load_probes

    library = load_probes()
    out = consoles.results()
    table = Table(title=f"probes {library['version']}: {library['source']}, {library['licence']}")
    for column in ("category", "probes", "detector", "what it tries"):
        table.add_column(column, overflow="fold")
    for name, entry in library["categories"].items():
        table.add_row(name, str(len(entry["probes"])), entry["detector"], entry["description"])
    out.print(table)
    if prompts:
        for entry in library["categories"].values():
            for probe in entry["probes"]:
                out.print(f"{escape(probe['id'])}: {escape(probe['prompt'])}", soft_wrap=True)


_SIGNATURE = _signature()
run_command.__signature__ = _SIGNATURE  # type: ignore[attr-defined]
run_command.__annotations__ = {p.name: p.annotation for p in _SIGNATURE.parameters.values()}
app.command("run")(run_command)
