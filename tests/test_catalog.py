"""The catalog: every model's computed parameter count equals its published total."""

from __future__ import annotations

import pytest

from memtui.estimator.catalog import (
    CATALOG,
    base_of_variant,
    find,
    lookup,
    lookup_id,
)
from memtui.estimator.configs import FAMILIES, ModelConfigError
from memtui.estimator.model_source import load_model, resolve_model

# docs/architecture.md, "Reference results" and docs/references.md, exactly as published.
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
    # the families people fine-tune now, and the published-measurement benchmark's
    new = {"qwen3", "qwen3_moe", "gemma3_text", "gemma3", "olmo2", "deepseek_v2", "phi", "stablelm"}
    assert new <= types
    for repo in (
        "meta-llama/Llama-3.3-70B-Instruct",
        "mistralai/Mistral-Nemo-Base-2407",
        "mistralai/Mistral-Small-24B-Base-2501",
        "microsoft/phi-4",
        "HuggingFaceTB/SmolLM2-1.7B",
        "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
        "stabilityai/stablelm-base-alpha-3b",
    ):
        assert repo in CATALOG


# The newer families' published counts, exactly as published (each catalog entry's source
# says where): a wrong config or reader would break these, not only the entry's own number.
PUBLISHED = {
    "meta-llama/Llama-3.3-70B-Instruct": 70_553_706_496,
    "Qwen/Qwen3-4B": 4_022_468_096,
    "Qwen/Qwen3-14B": 14_768_307_200,
    "Qwen/Qwen3-32B": 32_762_123_264,
    "Qwen/Qwen3-30B-A3B": 30_532_122_624,
    "Qwen/Qwen3-235B-A22B": 235_093_634_560,
    "google/gemma-3-1b-pt": 999_885_952,
    "microsoft/phi-4": 14_659_507_200,
    "microsoft/Phi-4-mini-instruct": 3_836_021_760,
    "microsoft/phi-1_5": 1_418_270_720,
    "microsoft/phi-2": 2_779_683_840,
    "mistralai/Mistral-Nemo-Base-2407": 12_247_782_400,
    "mistralai/Mistral-Small-24B-Base-2501": 23_572_403_200,
    "allenai/OLMo-2-1124-7B": 7_298_617_344,
    "allenai/OLMo-2-1124-13B": 13_716_198_400,
    "HuggingFaceTB/SmolLM2-135M": 134_515_008,
    "HuggingFaceTB/SmolLM2-360M": 361_821_120,
    "HuggingFaceTB/SmolLM2-1.7B": 1_711_376_384,
    "deepseek-ai/DeepSeek-V2-Lite": 15_706_484_224,
    "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T": 1_100_048_384,
    "codellama/CodeLlama-7b-hf": 6_738_546_688,
    "stabilityai/stablelm-3b-4e1t": 2_795_443_200,
    "stabilityai/stablelm-base-alpha-3b": 3_637_321_728,
    # the hub totals: text decoder, SigLIP vision tower and projector (towers.py)
    "google/gemma-3-4b-pt": 4_300_079_472,
    "google/gemma-3-12b-pt": 12_187_325_040,
    "google/gemma-3-27b-pt": 27_432_406_640,
}
# Hub totals that count more than the unique parameters (catalog.py's docstring).
HUB_TOTALS = {
    "Qwen/Qwen3-0.6B": 751_632_384,
    "Qwen/Qwen3-1.7B": 2_031_739_904,
}


@pytest.mark.parametrize(("repo_id", "count"), sorted(PUBLISHED.items()))
def test_new_families_published_counts(repo_id: str, count: int) -> None:
    entry = CATALOG[repo_id]
    assert entry.published_parameters == count
    assert entry.architecture.parameter_count == count
    assert entry.published_total is None and not entry.beyond_parameters


@pytest.mark.parametrize(("repo_id", "total"), sorted(HUB_TOTALS.items()))
def test_hub_totals_are_the_count_plus_named_parts(repo_id: str, total: int) -> None:
    entry = CATALOG[repo_id]
    arch = entry.architecture
    assert entry.published_total == total
    parts = dict(entry.beyond_parameters)
    assert entry.published_parameters + sum(parts.values()) == total
    assert arch.parameter_count == entry.published_parameters
    # a tied model whose checkpoint stores lm_head.weight anyway: one more V x h
    assert arch.model_type == "qwen3" and arch.tie_embeddings
    assert parts == {"lm_head.weight stored beside the tied embedding": 151936 * arch.hidden_size}


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


# Variant ids (catalog.py _ALIASES and the aliases of the new entries), each compared with its
# base's config.json: each resolves to the base entry's architecture.
VARIANTS = {
    "meta-llama/Llama-2-7b-chat-hf": "meta-llama/Llama-2-7b-hf",
    "meta-llama/Meta-Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B",
    "Qwen/Qwen3-30B-A3B-Base": "Qwen/Qwen3-30B-A3B",
    "allenai/OLMo-2-1124-7B-Instruct": "allenai/OLMo-2-1124-7B",
    "allenai/OLMo-2-1124-13B-Instruct": "allenai/OLMo-2-1124-13B",
    "HuggingFaceTB/SmolLM2-135M-Instruct": "HuggingFaceTB/SmolLM2-135M",
    "HuggingFaceTB/SmolLM2-360M-Instruct": "HuggingFaceTB/SmolLM2-360M",
    "HuggingFaceTB/SmolLM2-1.7B-Instruct": "HuggingFaceTB/SmolLM2-1.7B",
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-ai/DeepSeek-V2-Lite",
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
    "stabilityai/stablelm-tuned-alpha-3b": "stabilityai/stablelm-base-alpha-3b",
    "mistralai/Mistral-Nemo-Instruct-2407": "mistralai/Mistral-Nemo-Base-2407",
    "mistralai/Mistral-Small-24B-Instruct-2501": "mistralai/Mistral-Small-24B-Base-2501",
    "google/gemma-3-1b-it": "google/gemma-3-1b-pt",
    "google/gemma-3-4b-it": "google/gemma-3-4b-pt",
    "google/gemma-3-12b-it": "google/gemma-3-12b-pt",
    "google/gemma-3-27b-it": "google/gemma-3-27b-pt",
    "meta-llama/CodeLlama-7b-hf": "codellama/CodeLlama-7b-hf",
}


@pytest.mark.parametrize(("variant", "base"), sorted(VARIANTS.items()))
def test_variant_ids_resolve_to_their_base(variant: str, base: str) -> None:
    assert lookup(variant) is CATALOG[base]
    assert lookup(variant.upper()) is CATALOG[base]
    assert lookup_id(f" {variant.lower()} ") == (variant, CATALOG[base])
    spec = load_model(variant)
    assert spec.name == variant  # the user's model, named as they named it
    assert spec.architecture == CATALOG[base].architecture
    assert spec.parameters == CATALOG[base].published_parameters
    assert resolve_model(variant).origin == "catalog"


def test_aliases_are_the_listed_ones_and_unique() -> None:
    listed = {alias: e.repo_id for e in CATALOG.values() for alias in e.aliases}
    assert listed == VARIANTS
    names = [n.lower() for e in CATALOG.values() for n in (e.repo_id, *e.aliases)]
    assert len(names) == len(set(names))


def test_variant_short_names_and_search() -> None:
    assert lookup("Llama-3.2-3B-Instruct") is CATALOG["meta-llama/Llama-3.2-3B"]
    assert [e.repo_id for e in find("3.2-3b instruct")] == ["meta-llama/Llama-3.2-3B"]
    assert [e.repo_id for e in find("nemo instruct")] == ["mistralai/Mistral-Nemo-Base-2407"]


@pytest.mark.parametrize(
    ("ref", "base"),
    [
        ("meta-llama/Llama-3.2-3B-chat", "meta-llama/Llama-3.2-3B"),  # not a published id
        ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B"),  # not confirmed
        ("google/gemma-2-9b-it", "google/gemma-2-9b"),
        ("someone/Llama-3.2-3B-Instruct", None),  # another organisation's fine-tune
        ("meta-llama/Llama-3.2-11B-Vision-Instruct", None),
    ],
)
def test_unknown_variant_still_fails_clearly(
    ref: str, base: str | None, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache
    assert lookup(ref) is None
    assert base_of_variant(ref) == base
    with pytest.raises(ModelConfigError) as err:
        load_model(ref)
    message = str(err.value)
    assert "\n" not in message and f"model {ref!r} not found" in message
    if base:
        assert f"the catalog has {base}, but not this variant of it" in message
    else:
        assert "the catalog has" not in message


def test_find_does_not_match_inside_a_word() -> None:
    # '3.1' is no part of TinyLlama's '...-step-1431k-3T'; 'llama' starts a word of TinyLlama
    assert "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T" not in {
        e.repo_id for e in find("llama 3.1")
    }
    assert "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T" in {
        e.repo_id for e in find("llama")
    }


def test_new_entries_join_their_organisation() -> None:
    order = list(CATALOG)
    assert order.index("Qwen/Qwen3-0.6B") == order.index("Qwen/Qwen3-8B") + 1
    assert order.index("microsoft/phi-4") > order.index("microsoft/Phi-3-medium-4k-instruct")
    assert order.index("google/gemma-3-1b-pt") == order.index("google/gemma-2-27b") + 1
