"""Status derivation on the mini trees: each status comes from what the trees contain, so changing the
tree (a registration, a pass pattern, a flag default) changes the status."""

from __future__ import annotations

import json

from fusion_analyze.analysis.pipeline import analyze

from .conftest import MINI, validate_report


def _opps(vllm, ascend=None, backend=None) -> dict:
    a = analyze("qwen3", str(vllm), str(ascend) if ascend else None, backend)
    return {o.id: o for o in a.opportunities}


def test_qwen3_mini_statuses_on_ascend():
    o = _opps(MINI, MINI)
    assert o["qkv_merge@Qwen3Attention.forward"].status == "fused_in_model"
    assert o["gate_up_merge@Qwen2MLP.forward"].status == "fused_in_model"
    add = o["add_rmsnorm@Qwen3DecoderLayer.forward"]
    assert add.status == "fused_by_ascend_kernel"
    assert add.evidence[0]["file"] == "vllm_ascend/ops/layernorm.py" and "npu_add_rms_norm_bias" in add.evidence[0]["what"]
    assert o["silu_mul@Qwen2MLP.forward"].status == "fused_by_ascend_kernel"
    qk = o["qknorm_rope@Qwen3Attention.forward"]
    assert qk.status == "fused_by_ascend_graph_pass"
    assert qk.evidence[0]["file"] == "vllm_ascend/compilation/passes/qknorm_rope_fusion_pass.py"
    assert "fuse_qknorm_rope = True by default (vllm_ascend/ascend_config.py:6)" in qk.conditions
    assert o["norm_quant@Qwen3DecoderLayer.forward"].status == "inactive"
    ar = o["allreduce_norm@Qwen3DecoderLayer.forward"]
    assert ar.status == "open" and ar.cuda["status"] == "fused_by_pass_if" and ar.cuda["pass"] == "AllReduceFusionPass"
    assert ar.cuda_only and any("tp_size > 1" in c for c in ar.conditions)


def test_cuda_backend_reports_model_level_fusions():
    o = _opps(MINI, MINI, "cuda")
    assert o["add_rmsnorm@Qwen3DecoderLayer.forward"].status == "fused_in_model"
    assert o["silu_mul@Qwen2MLP.forward"].status == "fused_in_model"
    assert o["qknorm_rope@Qwen3Attention.forward"].status == "open"  # no Ascend pass on the CUDA path


def test_a_pass_whose_pattern_no_longer_matches_leaves_the_scenario_open(mini):
    f = mini / "vllm_ascend/compilation/passes/qknorm_rope_fusion_pass.py"
    f.write_text(f.read_text().replace("torch.ops.vllm.npu_rotary_embedding(", "torch.ops.npu.npu_apply_rotary_pos_emb("))
    qk = _opps(mini, mini)["qknorm_rope@Qwen3Attention.forward"]
    assert qk.status == "open"


def test_a_pass_off_by_default_is_open_with_a_note(mini):
    f = mini / "vllm_ascend/ascend_config.py"
    f.write_text(f.read_text().replace("fuse_qknorm_rope: bool = True", "fuse_qknorm_rope: bool = False"))
    qk = _opps(mini, mini)["qknorm_rope@Qwen3Attention.forward"]
    assert qk.status == "open" and "fuse_qknorm_rope is False by default" in qk.note


def test_no_ascend_replacement_means_separate_native_ops(mini):
    f = mini / "vllm_ascend/utils.py"
    f.write_text(f.read_text().replace('        "SiluAndMul": AscendSiluAndMul,\n', ""))
    s = _opps(mini, mini)["silu_mul@Qwen2MLP.forward"]
    assert s.status == "open" and "forward_native" in s.note
    assert s.evidence[0]["file"] == "vllm/model_executor/layers/activation.py"


def test_opportunities_json_fields_and_ids(run, tmp_path):
    out = tmp_path / "r.json"
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json", "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    validate_report(doc)
    opps = doc["opportunities"]
    ids = [o["id"] for o in opps]
    assert len(ids) == len(set(ids))
    op_ids = {o["id"] for o in doc["ops"]}
    for o in opps:
        assert {"id", "scenario", "category", "status", "conditions", "cuda", "evidence", "ops", "file", "line"} <= set(o)
        assert o["id"].startswith(o["scenario"] + "@")
        assert set(o["ops"]) <= op_ids
        assert all(not e["file"].startswith("/") for e in o["evidence"])


def test_separate_kernels_name_what_always_runs_for_each_part():
    """An open scenario's note names, per part, the kernels that run for it unconditionally; a kernel that runs
    only under a test (the mrope kernel of a RoPE layer) is named only when nothing runs the part always."""
    from fusion_analyze.status.derive import _separate_kernels
    from fusion_analyze.ir.ops import Kernel, Op

    def op(name, *kernels):
        return Op(name, "rope", name, None, "m.py", 1, "S.forward", name, "layer", kernels=list(kernels))

    rope = op("rope", Kernel("torch.ops.vllm.npu_rotary_embedding", "r.py", 1),
              Kernel("torch_npu.npu_mrope", "r.py", 2, "self.mrope_section"))
    attn = op("attn", Kernel("torch.ops.vllm.unified_kv_cache_update", "a.py", 3, "kv_cache is not None"))
    assert _separate_kernels([rope, attn], ("rope", "kvcache")) == [
        "torch.ops.vllm.npu_rotary_embedding", "torch.ops.vllm.unified_kv_cache_update"]
    assert _separate_kernels([rope], ("rope", "kvcache")) == []  # no kernel writes the cache: nothing to name
