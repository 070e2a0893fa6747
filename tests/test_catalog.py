"""The catalog: every model's computed parameter count equals its published total."""

from __future__ import annotations

import pytest

from memtui.estimator.catalog import CATALOG, find, lookup
from memtui.estimator.configs import FAMILIES

# DESIGN.md section 5 and issue 2's anchors, exactly as published.
ANCHORS = {
    "meta-llama/Llama-2-7b-hf": 6_738_415_616,
    "meta-llama/Llama-2-13b-hf": 13_015_864_320,
    "meta-llama/Meta-Llama-3-8B": 8_030_261_248,
    "mistralai/Mistral-7B-v0.1": 7_241_732_096,
    "openai-community/gpt2": 124_439_808,
    "tiiuae/falcon-7b": 6_921_720_704,
    "google/gemma-7b": 8_537_680_896,
    "microsoft/Phi-3-mini-4k-instruct": 3_821_079_552,
    "mistralai/Mixtral-8x7B-v0.1": 46_702_792_704,
}


@pytest.mark.parametrize("repo_id", sorted(CATALOG))
def test_computed_count_equals_published(repo_id: str) -> None:
    entry = CATALOG[repo_id]
    assert entry.architecture.parameter_count == entry.published_parameters
    assert entry.repo_id == repo_id
    assert entry.architecture.model_type in FAMILIES


@pytest.mark.parametrize(("repo_id", "count"), sorted(ANCHORS.items()))
def test_anchor_counts(repo_id: str, count: int) -> None:
    assert CATALOG[repo_id].published_parameters == count
    assert CATALOG[repo_id].architecture.parameter_count == count


def test_catalog_covers_the_families() -> None:
    assert len(CATALOG) >= 30
    types = {e.model_type for e in CATALOG.values()}
    required = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "phi3"}
    assert required | {"gpt2", "gpt_neox", "opt", "falcon"} <= types


def test_architecture_is_cached() -> None:
    entry = CATALOG["google/gemma-2b"]
    assert entry.architecture is entry.architecture


def test_lookup_exact_case_insensitive_and_short_name() -> None:
    assert lookup("meta-llama/Llama-2-7b-hf") is CATALOG["meta-llama/Llama-2-7b-hf"]
    assert lookup("META-LLAMA/llama-2-7B-HF") is CATALOG["meta-llama/Llama-2-7b-hf"]
    assert lookup("gpt2") is CATALOG["openai-community/gpt2"]
    assert lookup("  Qwen2.5-7B ") is CATALOG["Qwen/Qwen2.5-7B"]
    assert lookup("Llama-2-7b") is None  # exact ids only; find() is the fuzzy one
    assert lookup("nobody/gpt2") is None
    assert lookup("") is None


def test_find_substring_and_fuzzy() -> None:
    assert [e.repo_id for e in find("mixtral")] == [
        "mistralai/Mixtral-8x7B-v0.1",
        "mistralai/Mixtral-8x22B-v0.1",
    ]
    assert {e.repo_id for e in find("llama 3.1")} == {
        "meta-llama/Llama-3.1-8B",
        "meta-llama/Llama-3.1-70B",
        "meta-llama/Llama-3.1-405B",
    }
    assert [e.repo_id for e in find("QWEN2.5-72")] == ["Qwen/Qwen2.5-72B"]
    assert find("")[0] is next(iter(CATALOG.values()))
    assert len(find("")) == len(CATALOG)
    # No substring match: the closest names (a typo).
    assert find("gema-7b")[0].repo_id == "google/gemma-7b"
    assert find("zzzzqqqq") == []
