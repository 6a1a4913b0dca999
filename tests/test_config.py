import pytest

from assay.core.config import ConfigError, load_config
from assay.metrics.semantic import SemanticSimilarity


def test_defaults_are_the_specification_values(tmp_path, monkeypatch):
    monkeypatch.delenv("SEMANTIC_SIMILARITY_THRESHOLD", raising=False)
    cfg = load_config(project_dir=tmp_path)
    assert cfg.semantic_similarity_threshold == 0.7
    assert cfg.arabic_semantic_similarity_threshold == 0.5
    assert cfg.hallucination_detection_threshold == 0.3
    assert cfg.min_response_length == 10


def test_precedence_env_then_file_then_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMANTIC_SIMILARITY_THRESHOLD", "0.61")
    monkeypatch.setenv("MIN_RESPONSE_LENGTH", "3")
    assert load_config(project_dir=tmp_path).semantic_similarity_threshold == 0.61
    (tmp_path / "pyproject.toml").write_text(
        "[tool.assay]\nsemantic_similarity_threshold = 0.65\n", encoding="utf-8"
    )
    cfg = load_config(project_dir=tmp_path)
    assert cfg.semantic_similarity_threshold == 0.65  # file beats environment
    assert cfg.min_response_length == 3  # environment still applies where the file is silent
    cfg = load_config({"semantic_similarity_threshold": 0.9}, project_dir=tmp_path)
    assert cfg.semantic_similarity_threshold == 0.9  # flags beat the file


def test_assay_toml_wins_over_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.assay]\nretrieval_k = 3\n", encoding="utf-8")
    (tmp_path / "assay.toml").write_text("retrieval_k = 7\n", encoding="utf-8")
    assert load_config(project_dir=tmp_path).retrieval_k == 7


def test_threshold_resolution_order(tmp_path):
    cfg = load_config({"semantic_similarity_threshold": 0.75}, project_dir=tmp_path)
    assert cfg.threshold_for(SemanticSimilarity) == 0.75
    cfg = load_config(
        {"semantic_similarity_threshold": 0.75, "thresholds": {"semantic_similarity": 0.8}},
        project_dir=tmp_path,
    )
    assert cfg.threshold_for(SemanticSimilarity) == 0.8


def test_invalid_values_name_the_setting_and_the_file(tmp_path):
    (tmp_path / "assay.toml").write_text("semantic_similarity_threshold = 1.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"assay.toml.*semantic_similarity_threshold.*less than"):
        load_config(project_dir=tmp_path)
    (tmp_path / "assay.toml").write_text("retrieval_k = [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(project_dir=tmp_path)
    (tmp_path / "assay.toml").write_text("no_such_setting = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no_such_setting"):
        load_config(project_dir=tmp_path)


def test_judge_rate_limit_from_the_environment_and_refused_when_not_positive(tmp_path, monkeypatch):
    monkeypatch.delenv("ASSAY_JUDGE_RATE_LIMIT", raising=False)
    assert load_config(project_dir=tmp_path).judge_rate_limit is None  # no limit
    monkeypatch.setenv("ASSAY_JUDGE_RATE_LIMIT", "2.5")
    assert load_config(project_dir=tmp_path).judge_rate_limit == 2.5
    (tmp_path / "assay.toml").write_text("judge_rate_limit = 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"judge_rate_limit.*greater than 0"):
        load_config(project_dir=tmp_path)
