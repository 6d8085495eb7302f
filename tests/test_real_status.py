"""Fusion status on released trees, derived from their sources (no per-model tables)."""

from __future__ import annotations

import pytest

from fusion_analyze.pipeline import analyze_in
from fusion_analyze.session import Session

from .conftest import real_tree


@pytest.fixture(scope="module")
def qwen3():
    s = Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))
    return {o.scenario + "@" + o.scope: o for o in analyze_in(s, "Qwen3ForCausalLM").opportunities}


def test_qwen3_model_level_merges(qwen3):
    assert qwen3["qkv_merge@Qwen3Attention.forward"].status == "fused_in_model"
    assert qwen3["qkv_merge@Qwen3Attention.forward"].evidence[0]["file"] == "vllm/model_executor/layers/linear.py"
    assert qwen3["gate_up_merge@Qwen2MLP.forward"].status == "fused_in_model"


def test_qwen3_ascend_kernels(qwen3):
    add = qwen3["add_rmsnorm@Qwen3DecoderLayer.forward"]
    assert add.status == "fused_by_ascend_kernel"
    assert add.evidence[0]["file"] == "vllm_ascend/ops/layernorm.py" and "npu_add_rms_norm_bias" in add.evidence[0]["what"]
    silu = qwen3["silu_mul@Qwen2MLP.forward"]
    assert silu.status == "fused_by_ascend_kernel" and "npu_swiglu" in silu.evidence[0]["what"]


def test_qwen3_qknorm_rope_by_graph_pass_with_flag_and_default(qwen3):
    qk = qwen3["qknorm_rope@Qwen3Attention.forward"]
    assert qk.status == "fused_by_ascend_graph_pass"
    assert qk.evidence[0]["file"] == "vllm_ascend/compilation/passes/qknorm_rope_fusion_pass.py"
    assert "QKNormRopeFusionPass" in qk.evidence[0]["what"]
    assert "fuse_qknorm_rope = True by default (vllm_ascend/ascend_config.py:128)" in qk.conditions
    assert any("head_size != 128" in c for c in qk.conditions)  # the pass's own guard, read from its __init__


def test_qwen3_norm_quant_inactive_and_allreduce_norm_cuda_only(qwen3):
    nq = qwen3["norm_quant@Qwen3DecoderLayer.forward"]
    assert nq.status == "inactive" and "quantized checkpoint" in nq.conditions[0]
    ar = qwen3["allreduce_norm@Qwen3DecoderLayer.forward"]
    assert ar.status == "open"
    assert ar.cuda["status"] == "fused_by_pass_if" and ar.cuda["pass"] == "AllReduceFusionPass"
    assert ar.cuda["flag"] == "fuse_allreduce_rms" and any("TP > 1" in c for c in ar.cuda["conditions"])
    assert ar.cuda_only


@pytest.mark.parametrize("vllm,ascend,status", [
    ("vllm==0.13.0", "vllm-ascend==0.13.0", "open"),
    ("vllm==0.23.0", "vllm-ascend==0.23.0", "fused_by_ascend_kernel"),
])
def test_gated_norm_fused_by_vllm_ascend_between_013_and_023(vllm, ascend, status):
    """vllm-ascend 0.23.0 registers AscendRMSNormGated (a Triton gated-norm kernel); 0.13.0 has no
    replacement, so RMSNormGated runs forward_native on Ascend. Qwen3-Next's gated-delta-net output norm."""
    s = Session.open(str(real_tree(vllm)), str(real_tree(ascend)))
    gated = [o for o in analyze_in(s, "Qwen3NextForCausalLM").opportunities if o.scenario == "layernorm_gated"]
    assert gated and {o.status for o in gated} == {status}
    if status == "open":
        assert "forward_native" in gated[0].note
    else:
        assert gated[0].evidence[0]["file"] == "vllm_ascend/ops/triton/layernorm_gated.py"
