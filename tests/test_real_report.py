"""The report on the primary pair: sections, line references into the real files, stubs, benefits."""

from __future__ import annotations

import ast
import json
import re

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in, render
from fusion_analyze.analysis.session import Session

from .conftest import FIXTURES, validate_report


@pytest.fixture(scope="module")
def session(real_tree):
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    return Session.open(str(vllm), str(ascend)), {"vllm": str(vllm), "vllm_ascend": str(ascend)}


@pytest.mark.parametrize("model", ["Qwen3ForCausalLM", "Qwen3MoeForCausalLM"])
def test_report_on_the_primary_pair(session, model):
    s, trees = session
    a = analyze_in(s, model, Options(config="Qwen3-30B-A3B" if "Moe" in model else "Qwen3-0.6B"))
    text = render(a, "md")
    doc = json.loads(render(a, "json"))
    validate_report(doc)
    for head in ("### 1.", "### 2.", "### 3.", "### 4."):
        assert head in text
    # every `file` L<line> of section 4 points at a real line of that file
    s4 = text.split("### 4.")[1]
    refs = re.findall(r"`((?:vllm|vllm_ascend)/[\w/]+\.py)` L(\d+)", s4)
    assert refs
    for f, line in refs:
        lines = open(f"{trees[f.split('/')[0]]}/{f}", encoding="utf-8").read().splitlines()
        assert 1 <= int(line) <= len(lines) and lines[int(line) - 1].strip(), (f, line)
    opens = [o for o in doc["opportunities"] if o["status"] == "open" and not o["benefit"].get("rejected")]
    assert opens
    for o in opens:
        ast.parse(o["interface"]["stub"])
        assert o["benefit"]["numbers"]["prefill"]["model"]["time_us"] > 0
        assert o["id"] in s4
    if "Moe" in model:
        assert any(o["category"] == "moe" for o in doc["opportunities"])


def test_compare_qwen3_between_023_and_030(run, tmp_path, real_tree):
    """One real regression, said with its cause: vllm-ascend 0.30.0rc2 no longer has 0.23's
    MatmulAllReduceAddRMSNormPass, so the GEMM + all-reduce and all-reduce + norm it took in are open. That pass
    is off by default in 0.23 (fuse_allreduce_rms=False, ascend_config.py:613, synced into additional_config by
    platform.py:496): with the defaults nothing regresses; with the base deployment enabling it, it does. Lines
    that only moved between the releases are no change at all."""
    trees = ("--base", str(real_tree("vllm==0.23.0")), "--base-ascend", str(real_tree("vllm-ascend==0.23.0")),
             "--head", str(real_tree("vllm==0.30.0")), "--head-ascend", str(real_tree("vllm-ascend==0.30.0rc2")))
    out = tmp_path / "default.md"
    r = run("compare", "Qwen3ForCausalLM", *trees, "-o", str(out))
    assert r.exit_code == 0, r.output  # the pass never ran by default: no regression
    assert "MatmulAllReduceAddRMSNormPass" not in out.read_text(encoding="utf-8").split("<details>", 1)[0]
    out = tmp_path / "cmp.md"
    r = run("compare", "Qwen3ForCausalLM", *trees,
            "--base-args", "--additional-config '{\"ascend_compilation_config\": {\"fuse_allreduce_rms\": true}}'",
            "--lang", "en", "-o", str(out))
    assert r.exit_code == 1, r.output  # --fail-on regression is the default
    text = out.read_text(encoding="utf-8")
    # the cause cites 0.30.0rc2's release note that removed the pass (compile path: release notes read)
    assert ("**R1. Ascend graph pass `MatmulAllReduceAddRMSNormPass`**: removed by the release: the new tree has no "
            "such pass (release note docs/source/user_guide/release_notes.md:300: - Removed matmul all-reduce") in text
    assert "**R2." not in text  # nothing else regressed
    block = text.split("<details><summary><b>Qwen3ForCausalLM</b>", 1)[1].split("</details>", 1)[0]
    assert "- ⚠ `allreduce_norm@Qwen3DecoderLayer.forward`: fused_by_ascend_graph_pass → open (cause R1)" in block
    assert "- ⚠ `matmul_allreduce@Qwen3Attention.forward`: fused_by_ascend_graph_pass → open (cause R1)" in block
    assert block.count("⚠") == 3  # the two above and Qwen2MLP's GEMM + all-reduce
    # it only moved from line 36 to 31: not an op change in the model's block (the "Kernels that come and go"
    # table does name it, for the kernels its linear runs in one tree only: maybe_all_gather_and_maybe_unpad)
    assert "`model.layers.self_attn.qkv_proj:qkv_proj`" not in block


def test_compare_shows_qwen3_vl_qk_norm_rope_turning_fused_by_the_patch_kernel(run, tmp_path, real_tree):
    """vllm-ascend 0.23.0 added patch_qwen3vl.py: for M-RoPE models one triton kernel does split + q/k norm +
    rope. With an M-RoPE configuration the scenario goes open -> fused_by_ascend_kernel at that call, as one
    transition (its fused form), and the language model of the multimodal architecture is what is walked."""
    out = tmp_path / "cmp.json"
    r = run("compare", "Qwen3VLForConditionalGeneration",
            "--base", str(real_tree("vllm==0.13.0")), "--base-ascend", str(real_tree("vllm-ascend==0.13.0")),
            "--head", str(real_tree("vllm==0.23.0")), "--head-ascend", str(real_tree("vllm-ascend==0.23.0")),
            "--config", str(FIXTURES / "configs" / "qwen3-vl-mrope.json"), "--format", "json", "-o", str(out),
            "--fail-on", "none")
    assert r.exit_code == 0, r.output
    (model,) = json.loads(out.read_text(encoding="utf-8"))["models"]
    changed = {c["id"]: (c["old"], c["new"]) for c in model["opportunities"]["status_changed"]}
    assert changed["qknorm_rope@Qwen3Attention.forward"] == ("open", "fused_by_ascend_kernel")
    added = [o["id"] for o in model["ops"]["added"]]
    assert "language_model.model.layers.self_attn:triton_split_qkv_rmsnorm_mrope" in added
    head = run("Qwen3VLForConditionalGeneration", "--vllm-root", str(real_tree("vllm==0.23.0")), "--ascend-root",
               str(real_tree("vllm-ascend==0.23.0")), "--config", str(FIXTURES / "configs" / "qwen3-vl-mrope.json"),
               "--format", "json", "-o", str(tmp_path / "head.json"))
    assert head.exit_code == 0, head.output
    doc = json.loads((tmp_path / "head.json").read_text(encoding="utf-8"))
    (o,) = [o for o in doc["opportunities"] if o["id"] == "qknorm_rope@Qwen3Attention.forward"]
    assert o["evidence"][0]["file"] == "vllm_ascend/patch/worker/patch_qwen3vl.py"
    assert "triton_split_qkv_rmsnorm_mrope" in o["evidence"][0]["what"]


@pytest.mark.parametrize("model,expected", [
    # vllm-ascend 0.23 traces npu_rotary_embedding in its QKNormRopeFusionPass (0.13 traced a rope 0.13 did not run)
    # and added MatmulAllReduceAddRMSNormPass, which takes in GEMM + all-reduce and all-reduce + norm, but off by
    # default (AscendCompilationConfig.fuse_allreduce_rms=False, ascend_config.py:613, copied into
    # additional_config by platform.py:496, which the manager's .get reads): those two stay open (no change)
    ("Qwen3ForCausalLM", {"qknorm_rope@Qwen3Attention.forward": ("open", "fused_by_ascend_graph_pass", None),
                          "matmul_allreduce@Qwen3Attention.forward": None,
                          "allreduce_norm@Qwen3DecoderLayer.forward": None}),
    # 0.23 added muls_add_pass.py, whose `x * scale + y` fits Granite's ops only as the embedding scale and the
    # first residual add, across attention and with the scaled embeddings read by input_layernorm: torch's
    # pattern matcher replaces neither, so nothing changes (issue 34: no false "fused by the pass")
    ("GraniteForCausalLM", {"vector_elementwise_chain@GraniteDecoderLayer.forward": None}),
    # 0.23 registers RMSNormGated; vLLM moved the gated norm into QwenGatedDeltaNetAttention, whose forward
    # vllm-ascend 0.23 replaces by AscendGatedDeltaNetAttention.forward (patch_qwen3_5.py:207, not on 310P): the
    # norm runs at ops/gdn.py:142, one transition from 0.13's patched AscendQwen3Next_GatedDeltaNet.forward
    ("Qwen3NextForCausalLM", {"layernorm_gated@AscendGatedDeltaNetAttention.forward": (
        "open", "fused_by_ascend_kernel", "layernorm_gated@AscendQwen3Next_GatedDeltaNet.forward")}),
])
def test_compare_013_to_023_shows_what_vllm_ascend_fused(run, tmp_path, hf, model, expected, real_tree):
    out = tmp_path / "cmp.json"
    r = run("compare", model,
            "--base", str(real_tree("vllm==0.13.0")), "--base-ascend", str(real_tree("vllm-ascend==0.13.0")),
            "--head", str(real_tree("vllm==0.23.0")), "--head-ascend", str(real_tree("vllm-ascend==0.23.0")),
            "--hf-root", hf, "--format", "json", "-o", str(out), "--fail-on", "none")
    assert r.exit_code == 0, r.output
    (doc,) = json.loads(out.read_text(encoding="utf-8"))["models"]
    changed = {c["id"]: (c["old"], c["new"], c.get("was")) for c in doc["opportunities"]["status_changed"]}
    for scenario, transition in expected.items():
        assert changed.get(scenario) == transition, (scenario, changed)
    assert not doc["regressions"], doc["regressions"]


def test_compare_023_to_030_shows_the_moe_runner_design_fusing_dbrx_gating(run, tmp_path, hf, real_tree):
    """vLLM 0.23's DbrxExperts subclasses FusedMoE, which vllm-ascend replaces by name only (so vLLM's own
    FusedTopKRouter routes: open); vLLM 0.30 builds it with FusedMoEFactory (a MoERunner), which vllm-ascend
    0.30.0rc2 registers (AscendMoERunner, whose AscendFusedTopKRouter calls moe_gating_top_k)."""
    out = tmp_path / "cmp.json"
    r = run("compare", "DbrxForCausalLM",
            "--base", str(real_tree("vllm==0.23.0")), "--base-ascend", str(real_tree("vllm-ascend==0.23.0")),
            "--head", str(real_tree("vllm==0.30.0")), "--head-ascend", str(real_tree("vllm-ascend==0.30.0rc2")),
            "--hf-root", hf, "--format", "json", "-o", str(out), "--fail-on", "none")
    assert r.exit_code == 0, r.output
    (doc,) = json.loads(out.read_text(encoding="utf-8"))["models"]
    changed = {c["id"]: (c["old"], c["new"]) for c in doc["opportunities"]["status_changed"]}
    assert changed["gate_topk@DbrxMoE.forward"] == ("open", "fused_by_ascend_kernel")
