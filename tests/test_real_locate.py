"""Model resolution on released vLLM / vllm-ascend trees (fetched once into the user cache)."""

from __future__ import annotations

import pytest

from fusion_analyze.locate.registry import TEXT_TABLE
from fusion_analyze.analysis.session import Session


@pytest.fixture(scope="module")
def primary(real_tree):
    return Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))


@pytest.mark.parametrize(
    "query, arch, file, evidence",
    [
        ("GLM-4.7", "Glm4MoeForCausalLM", "vllm/model_executor/models/glm4_moe.py", "GLM-4.7"),
        ("GLM-4.7-Flash", "Glm4MoeLiteForCausalLM", "vllm/model_executor/models/glm4_moe_lite.py", "GLM-4.7-Flash"),
        ("qwen3", "Qwen3ForCausalLM", "vllm/model_executor/models/qwen3.py", "Qwen3"),
        ("DeepSeek-V3", "DeepseekV3ForCausalLM", "vllm/model_executor/models/deepseek_v2.py", "DeepseekV3"),
        ("Qwen3-30B-A3B", "Qwen3MoeForCausalLM", "vllm/model_executor/models/qwen3_moe.py", "Qwen3MoE"),
        ("Qwen3MoeForCausalLM", "Qwen3MoeForCausalLM", "vllm/model_executor/models/qwen3_moe.py", "Qwen3Moe"),
        ("glm4_moe", "Glm4MoeForCausalLM", "vllm/model_executor/models/glm4_moe.py", "Glm4Moe"),
        # a family name with a version: its own model file, never another model's prose (hyperclovax's
        # docstring mentions a "Qwen2.5 Vision Transformer")
        ("Qwen2.5", "Qwen2ForCausalLM", "vllm/model_executor/models/qwen2.py", "Qwen2"),
        ("Qwen2.5-7B-Instruct", "Qwen2ForCausalLM", "vllm/model_executor/models/qwen2.py", "Qwen2"),
        ("Llama-3.1-8B", "LlamaForCausalLM", "vllm/model_executor/models/llama.py", "Llama"),
    ],
)
def test_examples_resolve_as_stated(primary, query, arch, file, evidence):
    loc = primary.resolver.resolve(query)
    assert (loc.architecture, loc.file) == (arch, file)
    assert any(evidence in e.text for e in loc.verification), loc.verification
    assert loc.sources == {"vllm": {"version": "0.30.0"}, "vllm_ascend": {"version": "0.30.0rc2"}}


def test_qwen3_attention_patch_is_listed(primary):
    loc = primary.resolver.resolve("Qwen3ForCausalLM")
    targets = {p.target: p.file for p in loc.patches}
    assert targets["vllm.model_executor.models.qwen3.Qwen3Attention.forward"] == "vllm_ascend/patch/worker/patch_qwen3vl.py"


def test_ascend_override(primary):
    loc = primary.resolver.resolve("KimiLinearForCausalLM")
    assert loc.ascend_override is not None
    assert loc.ascend_override.class_name == "AscendKimiLinearForCausalLM"
    assert loc.ascend_override.file == "vllm_ascend/models/kimi_k3.py"


def _sweep(session):
    missing = []
    text = [e for e in session.resolver.entries if e.table == TEXT_TABLE]
    for e in text:
        try:
            loc = session.resolver.resolve(e.architecture)
        except Exception as exc:  # noqa: BLE001 - collected and reported below
            missing.append(f"{e.architecture}: {exc}")
            continue
        assert (session.vllm.root / loc.file).is_file()
    return text, missing


@pytest.mark.parametrize("spec", ["vllm==0.30.0", "vllm==0.34.0", "vllm==0.13.0"])
def test_every_text_generation_architecture_resolves(real_tree, spec):
    session = Session.open(str(real_tree(spec)), None)
    text, missing = _sweep(session)
    assert len(text) > 100
    assert missing == []


def test_034_dotted_packages(real_tree):
    session = Session.open(str(real_tree("vllm==0.34.0")), None)
    dotted = [e for e in session.resolver.entries if e.table == TEXT_TABLE and e.module.startswith("vllm.models.")]
    assert dotted, "0.34.0 registers models under vllm.models.<pkg>"
    for e in dotted:
        loc = session.resolver.resolve(e.architecture)
        assert loc.file.startswith("vllm/"), loc.file
