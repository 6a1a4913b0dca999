"""``assay generate DOCS --n N --out set.jsonl``: a test set from a team's own documents.

Reads the documents (folders, globs, files: .txt, .md, .html, .pdf, or a JSONL of
chunks), makes N questions (`assay.generation.generate`: offline by default, written by
the judge when one is configured), writes them as JSONL rows ``assay run`` and ``assay
evaluate`` read, and prints the run's summary: what was made by kind, what each check
removed, the kinds that could not be made, the files that could not be read, the judge's
calls and cost, and, when fewer than N were made, why. ``--dry-run`` makes no call and
prints the plan (with a judge: the calls, tokens and cost). Exit codes: 0 done (a
shortfall is said, not an error), 2 bad input or options, or the judge cannot be reached
(its replies so far are cached: the same command continues).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from assay.cli.application import app
from assay.cli.consoles import messages, results
from assay.cli.options import JudgeConcurrencyOption, JudgeRateLimitOption

EXIT_BAD_INPUT = 2
#: the judge could not be reached (as ``assay run`` exits for a target it cannot reach)
EXIT_UNREACHABLE = 2


def _summary_lines(summary: dict[str, Any], out: Path | None) -> list[str]:
    lines = []
    made = summary.get("made", 0) + summary.get("resumed", 0)
    kinds = ", ".join(f"{k} {v}" for k, v in summary.get("by_kind", {}).items())
    where = f" -> {out}" if out is not None else ""
    lines.append(
        f"made {made} of {summary['requested']} questions ({kinds or 'none'}), "
        f"method {summary['method']}, {summary.get('seconds', 0):.1f}s{where}"
    )
    if summary.get("resumed"):
        lines.append(f"resumed: {summary['resumed']} rows were already in the file")
    docs = summary["documents"]
    lines.append(f"documents: {docs['files']} files, {docs['chunks']} chunks")
    for problem in docs["unreadable"]:
        lines.append(f"unreadable: {problem['path']}: {problem['reason']}")
    for kind, reason in summary.get("cannot_make", {}).items():
        count = summary["redistributed"].get(kind, 0)
        lines.append(f"cannot make {kind} ({count} planned, given to the other kinds): {reason}")
    filters = summary.get("filters")
    if filters:
        removed = ", ".join(f"{k} {v}" for k, v in filters["removed"].items())
        lines.append(f"checks removed: {removed} (of {summary['candidates']} candidates)")
        for check, reason in filters["not_run"].items():
            lines.append(f"check not run: {check}: {reason}")
    judge = summary.get("judge")
    if judge:
        cost = "no price configured" if judge["cost"] is None else f"cost {judge['cost']:.4f}"
        lines.append(
            f"judge: {judge['calls']} calls ({judge['reparse_calls']} JSON retries, "
            f"{judge['retries']} transport retries) for {judge['asks']} asks "
            f"(at most {judge['ask_budget']}), {judge['cache_hits']} from the cache, "
            f"{judge['prompt_tokens']} + {judge['completion_tokens']} tokens, {cost}"
        )
        for reason, count in judge["failures"].items():
            lines.append(f"judge failures: {reason} {count}")
    if summary.get("shortfall"):
        lines.append(f"short: {summary['shortfall']}")
    return lines


@app.command("generate")
def generate_command(
    documents: Annotated[
        list[str],
        typer.Argument(
            help="Folders, globs or files: .txt, .md, .html, .pdf, or a JSONL of chunks."
        ),
    ],
    n: Annotated[int, typer.Option("--n", "-n", min=1, help="Questions to make.")] = 50,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="The JSONL file to write.")
    ] = None,
    mix: Annotated[
        str | None,
        typer.Option(
            help="Kinds and weights, e.g. single=0.5,multi=0.2,reasoning=0.1,"
            "conversational=0.1,unanswerable=0.1 (the default)."
        ),
    ] = None,
    personas: Annotated[
        Path | None,
        typer.Option(help="User descriptions: a .txt (one a line) or .jsonl (description)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 0,
    resume: Annotated[
        bool, typer.Option("--resume", help="Keep the rows already in --out; make the rest.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Make no call: print the planned calls, tokens, cost."),
    ] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="Do not use the configured judge.")
    ] = False,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=16, help="Token budget of a chunk.")
    ] = 300,
    judge_concurrency: JudgeConcurrencyOption = None,
    judge_rate_limit: JudgeRateLimitOption = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Make a test set of N questions from a team's documents (docs/generate.md)."""
    from assay.core.config import ConfigError, load_config
    from assay.core.extras import ModelUnavailable
    from assay.core.http import Unreachable
    from assay.core.jsonout import dumps
    from assay.generation import generate

    err, out_console = messages(), results()
    if resume and out is None:
        err.print("--resume needs --out: the file to continue", markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        config = load_config(
            {"judge_concurrency": judge_concurrency, "judge_rate_limit": judge_rate_limit}
        )
    except ConfigError as exc:
        err.print(f"configuration: {exc}", markup=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not progress or dry_run,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def show(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            result = generate(
                documents,
                n,
                mix=mix,
                personas=personas,
                seed=seed,
                out=None if dry_run else out,
                resume=resume,
                dry_run=dry_run,
                judge=False if offline else None,
                config=config,
                max_tokens=max_tokens,
                progress=show,
            )
        except (ValueError, FileNotFoundError, OSError, ModelUnavailable) as exc:
            err.print(f"assay generate: {exc}", markup=False)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except Unreachable as exc:  # the judge cannot be reached: its answers are cached
            err.print(
                f"assay generate: {exc}; the judge's replies so far are in its cache: run "
                "the same command again to continue",
                markup=False,
            )
            raise typer.Exit(EXIT_UNREACHABLE) from None
    summary = result.summary
    if dry_run:
        out_console.print(dumps(summary, indent=2), markup=False, soft_wrap=True)
        return
    for line in _summary_lines(summary, out):
        err.print(line, markup=False, soft_wrap=True)
