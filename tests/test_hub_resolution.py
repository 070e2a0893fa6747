"""Model ids resolved through the Hub: the real huggingface_hub client against a local server.

The server lays out files as the Hub serves them to huggingface_hub 2.4.0 (file_download.py
get_hf_file_metadata and hf_hub_download): `HEAD` and `GET` of
`/{repo}/resolve/{revision}/config.json`, answered with `ETag` and `X-Repo-Commit` (the client
refuses an answer without them), `Content-Length`, and for a refusal the status and
`X-Error-Code` its utils/_http.py hf_raise_for_status reads (GatedRepo, RepoNotFound).
HF_ENDPOINT points at it and the Hugging Face cache lives in tmp_path; memtui reads the
environment at call time, so no reload of huggingface_hub is needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memtui.estimator import Plan
from memtui.estimator.catalog import CATALOG, CatalogEntry
from memtui.estimator.configs import ModelConfigError
from memtui.estimator.model_source import resolve_model
from memtui.estimator.state import frozen_base_bytes
from memtui.plans.hub import MAX_CONFIG_BYTES, fetch_config

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "c0ffee" * 6 + "abcd"  # a 40-hex commit id, as X-Repo-Commit carries
QWEN3_4B = CATALOG["Qwen/Qwen3-4B"]  # its config.json subset, served under another repo id
SERVED = "acme/qwen3-4b-copy"


class Hub:
    """A local server holding repos: `configs` (repo -> config.json bytes), `gated`, `stall`
    (repos whose requests wait until the test ends), every request path in `asked`."""

    def __init__(self) -> None:
        self.configs: dict[str, bytes] = {}
        self.gated: set[str] = set()
        self.stall: set[str] = set()
        self.claimed_size: dict[str, int] = {}
        self.stall_download: set[str] = set()
        self.missing_status = 404
        self.token = ""  # a token that opens the gated repos
        self.asked: list[str] = []
        self.release = threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep the test output clean
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                hub.asked.append(f"{self.command} {self.path}")
                repo, sep, rest = self.path.lstrip("/").partition("/resolve/")
                if repo in hub.stall:
                    hub.release.wait(30)
                    return
                if not sep or not rest.endswith("/config.json"):
                    return self._refuse(404, "EntryNotFound")
                opened = hub.token and self.headers.get("Authorization") == f"Bearer {hub.token}"
                if repo in hub.gated and not opened:
                    return self._refuse(403, "GatedRepo")
                if repo not in hub.configs:
                    return self._refuse(hub.missing_status, "RepoNotFound")
                if body and repo in hub.stall_download:
                    hub.release.wait(30)
                    return
                data = hub.configs[repo]
                self.send_response(200)
                self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("Content-Length", str(hub.claimed_size.get(repo, len(data))))
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def _refuse(self, status: int, code: str) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", f"{code} for {self.path}")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    server = Hub()
    server.thread.start()
    server.configs[SERVED] = json.dumps(dict(QWEN3_4B.config)).encode()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    try:
        yield server
    finally:
        server.close()


def test_a_repo_id_resolves_from_its_config_json_alone_and_is_cached(
    hub: Hub, tmp_path: Path
) -> None:
    found = resolve_model(SERVED, fetch_config)
    assert found.origin == "hub" and found.spec.name == SERVED
    assert found.spec.parameters == QWEN3_4B.published_parameters
    assert found.config == dict(QWEN3_4B.config)
    # config.json alone was asked for, never weights (huggingface_hub also asks, once a day,
    # for /api/agent-harnesses to word its user agent: utils/_detect_agent.py)
    files = [p for p in hub.asked if "/resolve/" in p]
    assert files and all(p.endswith(f"/{SERVED}/resolve/main/config.json") for p in files)
    # stored where huggingface_hub stores it: the next resolution needs no server
    snapshot = tmp_path / "hf" / "hub" / "models--acme--qwen3-4b-copy" / "snapshots" / COMMIT
    assert (snapshot / "config.json").is_file()
    hub.close()
    again = resolve_model(SERVED, fetch_config)
    assert again.origin == "cache" and again.spec == found.spec


def test_a_gated_repo_says_to_accept_the_licence_and_set_hf_token(hub: Hub) -> None:
    hub.gated.add("meta-llama/Llama-4-Scout-17B-16E")
    with pytest.raises(ModelConfigError) as err:
        resolve_model("meta-llama/Llama-4-Scout-17B-16E", fetch_config)
    message = str(err.value)
    assert "\n" not in message and "gated" in message and "403" in message
    assert "HF_TOKEN" in message and "licence" in message


def test_hf_token_opens_a_gated_repo(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.gated.add(SERVED)
    hub.token = "hf_memtui_test_token"
    monkeypatch.setenv("HF_TOKEN", hub.token)  # read by huggingface_hub for each request
    assert resolve_model(SERVED, fetch_config).origin == "hub"


def test_a_missing_repo_is_not_found_saying_the_hub_was_asked(hub: Hub) -> None:
    with pytest.raises(ModelConfigError) as err:
        resolve_model("acme/absent", fetch_config)
    message = str(err.value)
    assert "\n" not in message and "model 'acme/absent' not found" in message
    assert "the Hub has no repo 'acme/absent'" in message
    # without a token the Hub answers 401 for a private repo and a missing one alike
    hub.missing_status = 401
    with pytest.raises(ModelConfigError, match="or it is private: set HF_TOKEN"):
        resolve_model("acme/absent-or-private", fetch_config)


def test_a_server_that_does_not_answer_is_a_bounded_one_line_error(hub: Hub) -> None:
    hub.stall.add("acme/slow")
    with pytest.raises(ModelConfigError) as err:
        resolve_model("acme/slow", fetch_config)
    message = str(err.value)
    assert "\n" not in message and "did not answer within 1 s" in message
    assert hub.url in message


def test_a_download_that_stalls_after_its_head_is_cut_off(hub: Hub) -> None:
    """huggingface_hub's GET waits HF_HUB_DOWNLOAD_TIMEOUT (10 s) per read and resumes up to 5
    times: memtui's own deadline (three timeouts) ends the wait."""
    hub.configs["acme/slow-body"] = hub.configs[SERVED]
    hub.stall_download.add("acme/slow-body")
    with pytest.raises(ModelConfigError, match="did not answer within 1 s"):
        resolve_model("acme/slow-body", fetch_config)
    assert [p.split()[0] for p in hub.asked if "/resolve/" in p][-1] == "GET"


def test_an_unreachable_hub_is_part_of_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{closed.server_address[1]}"
    closed.server_close()  # nothing listens there now: the connection is refused
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(ModelConfigError) as err:
        resolve_model("acme/nowhere", fetch_config)
    message = str(err.value)
    assert "\n" not in message and "model 'acme/nowhere' not found" in message
    assert f"the Hub at {url} cannot be reached" in message and "HF_HUB_OFFLINE=1" in message


def test_offline_mode_does_not_ask_the_hub_and_says_so(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelConfigError) as err:
        resolve_model(SERVED, fetch_config)
    assert "HF_HUB_OFFLINE is set, so the Hub was not asked" in str(err.value)
    assert hub.asked == []


def test_a_config_json_larger_than_the_bound_is_refused_before_download(hub: Hub) -> None:
    hub.claimed_size["acme/huge"] = MAX_CONFIG_BYTES + 1
    hub.configs["acme/huge"] = b"{}"
    with pytest.raises(ModelConfigError, match="memtui reads at most"):
        resolve_model("acme/huge", fetch_config)
    assert [p.split()[0] for p in hub.asked if "/resolve/" in p] == ["HEAD"]


def test_the_cli_resolves_a_hub_id_with_the_users_environment(hub: Hub, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_HUB_OFFLINE")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run(
        [sys.executable, "-m", "memtui", "estimate", "--model", SERVED, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["plan"]["model"]["parameters"] == QWEN3_4B.published_parameters
    assert run.stderr == ""


# Pre-quantized checkpoints: their config.json is the base model's with the
# `quantization_config` that transformers' own config classes write on save_pretrained
# (utils/quantization_config.py, 5.24: `model.config.quantization_config` is their to_dict()).
LLAMA2_7B = CATALOG["meta-llama/Llama-2-7b-hf"]
LLAMA2_LINEARS = [(4096, 4096)] * 4 + [(4096, 11008)] * 2 + [(11008, 4096)]  # per layer
LLAMA2_OTHERS = 2 * 32000 * 4096 + (2 * 32 + 1) * 4096  # embed, lm_head, RMSNorms


def serve_quantized(hub: Hub, repo: str, base: CatalogEntry, quantization: dict) -> None:
    config = {**dict(base.config), "quantization_config": quantization}
    hub.configs[repo] = json.dumps(config).encode()


def lora(repo: str, **changes: object) -> Plan:
    spec = resolve_model(repo, fetch_config).spec
    return Plan(model=spec, method="lora", **changes)


def test_a_gptq_checkpoint_is_sized_by_its_packed_weights(hub: Hub) -> None:
    from transformers import GPTQConfig

    serve_quantized(
        hub, "acme/llama-2-7b-gptq", LLAMA2_7B, GPTQConfig(bits=4, group_size=128).to_dict()
    )
    plan = lora("acme/llama-2-7b-gptq")
    stored = plan.model.architecture.quantized
    assert stored is not None and (stored.method.value, stored.bits, stored.group_size) == (
        "gptq",
        4,
        128,
    )

    # AutoGPTQ's QuantLinear buffers (nn_modules/qlinear, the layout gptqmodel keeps): qweight
    # (in // 32 * bits, out) int32, qzeros (ceil(in / group), out // 32 * bits) int32, scales
    # (ceil(in / group), out) fp16, g_idx (in,) int32
    def quant_linear(d_in: int, d_out: int) -> int:
        groups = -(-d_in // 128)
        return (
            4 * (d_in // 32 * 4 * d_out)
            + 4 * (groups * d_out // 32 * 4)
            + 2 * groups * d_out
            + 4 * d_in
        )

    linears = 32 * sum(quant_linear(i, o) for i, o in LLAMA2_LINEARS)
    # PEFT leaves a GPTQ model's other parameters 16-bit (utils/other.py is_gptq_quantized)
    assert frozen_base_bytes(plan, base_bytes=2) == linears + 2 * LLAMA2_OTHERS
    # about 3.9 GB, against 13.5 GB for the 16-bit checkpoint
    assert 3.8e9 < frozen_base_bytes(plan, base_bytes=2) < 4.0e9


def test_an_fp8_checkpoint_is_sized_by_transformers_own_fp8_linear(hub: Hub) -> None:
    import torch
    from transformers import FineGrainedFP8Config
    from transformers.integrations.finegrained_fp8 import FP8Linear

    serve_quantized(hub, "acme/llama-2-7b-fp8", LLAMA2_7B, FineGrainedFP8Config().to_dict())
    plan = lora("acme/llama-2-7b-fp8", qlora_upcast=False)
    with torch.device("meta"):  # shapes and dtypes, no memory
        modules = [FP8Linear(i, o, block_size=(128, 128)) for i, o in LLAMA2_LINEARS]
    linears = 32 * sum(p.numel() * p.element_size() for m in modules for p in m.parameters())
    assert frozen_base_bytes(plan, base_bytes=2) == linears + 2 * LLAMA2_OTHERS
    # PEFT's k-bit preparation (on by default) upcasts the 16-bit rest to fp32
    assert (
        frozen_base_bytes(lora("acme/llama-2-7b-fp8"), base_bytes=2) == linears + 4 * LLAMA2_OTHERS
    )


def test_bitsandbytes_checkpoints_and_the_modules_they_leave_16_bit(hub: Hub) -> None:
    from transformers import BitsAndBytesConfig

    nf4 = BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True
    )
    serve_quantized(hub, "acme/llama-2-7b-bnb-4bit", LLAMA2_7B, nf4.to_dict())
    # the checkpoint's 4-bit storage is QLoRA's, with its own double quantization; QLoRA is
    # its default method
    spec = resolve_model("acme/llama-2-7b-bnb-4bit", fetch_config).spec
    assert spec.default_method.value == "qlora"
    stored = lora("acme/llama-2-7b-bnb-4bit", qlora_double_quant=False)
    qlora = Plan(model=resolve_model("meta-llama/Llama-2-7b-hf").spec, method="qlora")
    assert frozen_base_bytes(stored) == frozen_base_bytes(qlora)

    int8 = BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=["down_proj"])
    serve_quantized(hub, "acme/llama-2-7b-int8", LLAMA2_7B, int8.to_dict())
    plan = lora("acme/llama-2-7b-int8", qlora_upcast=False)
    # bitsandbytes Int8Params: int8 weight and an fp32 scale per output row; down_proj 16-bit
    converted = 32 * sum(i * o + 4 * o for i, o in LLAMA2_LINEARS[:-1])
    kept = 32 * 11008 * 4096
    assert frozen_base_bytes(plan, base_bytes=2) == converted + 2 * (kept + LLAMA2_OTHERS)


def test_a_quantized_checkpoint_trains_adapters_only(hub: Hub, tmp_path: Path) -> None:
    from transformers import AwqConfig

    serve_quantized(
        hub, "acme/llama-2-7b-awq", LLAMA2_7B, AwqConfig(bits=4, group_size=128).to_dict()
    )
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")

    def estimate_cli(*flags: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "memtui", "estimate", "--model", "acme/llama-2-7b-awq"]
        return subprocess.run(
            [*argv, *flags], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )

    out = estimate_cli("--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["plan"]["method"] == "lora"  # its default method
    refused = estimate_cli("--method", "full", "--json")
    assert refused.returncode == 2 and refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "pre-quantized (awq)" in lines[0] and "lora" in lines[0]


def test_quantization_memtui_cannot_size_is_refused_and_mxfp4_trains_dequantized(hub: Hub) -> None:
    serve_quantized(hub, "acme/llama-2-7b-hqq", LLAMA2_7B, {"quant_method": "hqq", "nbits": 4})
    with pytest.raises(ModelConfigError) as err:
        resolve_model("acme/llama-2-7b-hqq", fetch_config)
    message = str(err.value)
    assert (
        "\n" not in message and "quantization_config.quant_method" in message and "'hqq'" in message
    )
    # gpt-oss's mxfp4 experts are dequantized to bf16 for training (quantizer_mxfp4.py
    # is_trainable False; Mxfp4Config(dequantize=True))
    serve_quantized(
        hub,
        "acme/llama-2-7b-mxfp4",
        LLAMA2_7B,
        {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]},
    )
    spec = resolve_model("acme/llama-2-7b-mxfp4", fetch_config).spec
    assert spec.architecture.quantized is None and spec.parameters == LLAMA2_7B.published_parameters


def test_a_mirror_resolves_to_its_originals_entry_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    found = resolve_model("NousResearch/Meta-Llama-3-8B", fetch_config)
    assert found.origin == "catalog" and found.spec.name == "NousResearch/Meta-Llama-3-8B"
    original = CATALOG["meta-llama/Meta-Llama-3-8B"]
    assert found.spec.parameters == original.published_parameters
    # the name after the slash still means the original, not one of its mirrors
    assert resolve_model("Meta-Llama-3-8B").spec.name == "meta-llama/Meta-Llama-3-8B"


def test_the_local_cache_comes_before_the_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog id whose real config.json is in the user's cache is read from it: here a
    quantized checkpoint saved under the catalog's id, sized as stored, not as the catalog's
    16-bit copy."""
    from transformers import BitsAndBytesConfig

    snapshot = tmp_path / "models--meta-llama--Llama-2-7b-hf" / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (tmp_path / "models--meta-llama--Llama-2-7b-hf" / "refs").mkdir()
    (tmp_path / "models--meta-llama--Llama-2-7b-hf" / "refs" / "main").write_text(COMMIT)
    config = {
        **dict(LLAMA2_7B.config),
        "quantization_config": BitsAndBytesConfig(load_in_4bit=True).to_dict(),
    }
    (snapshot / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    found = resolve_model("meta-llama/Llama-2-7b-hf")
    assert found.origin == "cache" and found.spec.architecture.quantized is not None


def test_current_architectures_resolve_from_the_hub(hub: Hub) -> None:
    """The models the catalog lacks, served as their repos: gpt-oss (its config as
    transformers' GptOssConfig writes gpt-oss-20b's shape, with the repo's mxfp4
    quantization_config), Mistral Small 3.1 (Mistral3Config's own defaults are that model's
    text and vision shapes), a Qwen3 re-release; counts as transformers builds them."""
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM, Mistral3Config

    gpt_oss = GptOssConfig(num_hidden_layers=24, num_local_experts=32)
    quantization = {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}
    hub.configs["openai/gpt-oss-20b"] = json.dumps(
        {**gpt_oss.to_dict(), "quantization_config": quantization}
    ).encode()
    mistral = "mistralai/Mistral-Small-3.1-24B-Instruct-2503"
    hub.configs[mistral] = json.dumps(Mistral3Config().to_dict()).encode()
    hub.configs["Qwen/Qwen3-4B-Instruct-2507"] = json.dumps(dict(QWEN3_4B.config)).encode()
    with torch.device("meta"):
        real = sum(p.numel() for p in GptOssForCausalLM(gpt_oss).parameters())
    assert resolve_model("openai/gpt-oss-20b", fetch_config).spec.parameters == real
    assert resolve_model(mistral, fetch_config).spec.architecture.hidden_size == 5120
    qwen = resolve_model("Qwen/Qwen3-4B-Instruct-2507", fetch_config)
    assert (qwen.origin, qwen.spec.parameters) == ("hub", QWEN3_4B.published_parameters)
    # Qwen3.5's hybrid linear attention, sized as transformers builds its text decoder
    from hybrid_configs import QWEN3_5_27B
    from transformers import AutoModelForCausalLM, Qwen3_5Config

    hub.configs["Qwen/Qwen3.5-27B"] = json.dumps(QWEN3_5_27B).encode()
    with torch.device("meta"):
        config = Qwen3_5Config(**{k: v for k, v in QWEN3_5_27B.items() if k != "model_type"})
        text = AutoModelForCausalLM.from_config(config)
    qwen35 = resolve_model("Qwen/Qwen3.5-27B", fetch_config)
    assert qwen35.spec.parameters == sum(p.numel() for p in text.parameters())
    # a family memtui has no reader for is one line naming it, never a guess
    hub.configs["state-spaces/mamba-2.8b-hf"] = json.dumps({"model_type": "mamba"}).encode()
    with pytest.raises(ModelConfigError, match="'mamba', which memtui cannot read"):
        resolve_model("state-spaces/mamba-2.8b-hf", fetch_config)
