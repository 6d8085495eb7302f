"""Fusion status on released trees, derived from their sources (no per-model tables)."""

from __future__ import annotations

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.analysis.session import Session


@pytest.fixture(scope="module")
def qwen3(real_tree):
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
def test_gated_norm_fused_by_vllm_ascend_between_013_and_023(real_tree, vllm, ascend, status):
    """vllm-ascend 0.23.0 registers AscendRMSNormGated (a Triton gated-norm kernel); 0.13.0 has no
    replacement, so RMSNormGated runs forward_native on Ascend. Qwen3-Next's gated-delta-net output norm."""
    s = Session.open(str(real_tree(vllm)), str(real_tree(ascend)))
    gated = [o for o in analyze_in(s, "Qwen3NextForCausalLM").opportunities if o.scenario == "layernorm_gated"]
    assert gated and {o.status for o in gated} == {status}
    if status == "open":
        assert "forward_native" in gated[0].note
    else:
        assert gated[0].evidence[0]["file"] == "vllm_ascend/ops/triton/layernorm_gated.py"


def test_a_cuda_kernel_called_by_vllms_own_code_claims_nothing_on_ascend(real_tree):
    """MiniCPM's MoE calls vLLM's fused_experts, whose CUDA quant and activation kernels (torch.ops._C.*) are
    not what runs on Ascend: no row of the report rests on them (fused or open); on CUDA they are fused_in_model."""
    asc = Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))
    a = analyze_in(asc, "MiniCPMForCausalLM")
    foreign = {op.id for op in a.walk.ops if op.kind == "kernel" and not op.file.startswith("vllm_ascend/")}
    assert foreign, "the walk reaches fused_experts' kernel calls"
    assert not [o.id for o in a.opportunities if foreign & set(o.ops)]
    cuda = analyze_in(Session.open(str(real_tree("vllm==0.30.0")), None), "MiniCPMForCausalLM")
    assert any(o.scenario == "silu_mul" and str(o.status) == "fused_in_model" and o.id.endswith("fused_moe.fused_experts")
               for o in cuda.opportunities)


def test_vllm_ascend_environment_variables_are_read_at_their_defaults(real_tree):
    """`envs_ascend.VLLM_ASCEND_ENABLE_MATMUL_ALLREDUCE` (vllm_ascend/envs.py env_variables) is unset by default:
    on the 0.13 pair the row-parallel linear's npu_mm_all_reduce_base path is not taken, so QWen's MLP
    matmul + all-reduce is open, not fused."""
    s = Session.open(str(real_tree("vllm==0.13.0")), str(real_tree("vllm-ascend==0.13.0")))
    a = analyze_in(s, "QWenLMHeadModel")
    (o,) = [o for o in a.opportunities if o.id == "matmul_allreduce@QWenMLP.forward"]
    assert str(o.status) == "open"


def test_a_larger_pass_rewrite_fuses_the_scenarios_it_takes_in(real_tree):
    """vllm-ascend 0.23's MatmulAllReduceAddRMSNormPass rewrites row-parallel GEMM + all-reduce + add + RMSNorm:
    the all-reduce + norm and the GEMM + all-reduce scenarios inside that chain are fused by it, as part of it,
    where it runs; an explicit residual add it does not rewrite is not; 0.30.0rc2 has no such pass.
    It is off by default: AscendCompilationConfig declares fuse_allreduce_rms=False (ascend_config.py:613) and
    platform.py:496 copies vars() of that config into additional_config["ascend_compilation_config"], so the
    manager's `.get("fuse_allreduce_rms", True)` (graph_fusion_pass_manager.py:64) reads False. (This test once
    took the .get's own True as the default; the compile-path change reads the declared field first.)"""
    s23 = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    opps = {o.id: o for o in analyze_in(s23, "Qwen3ForCausalLM").opportunities}
    for oid in ("allreduce_norm@Qwen3DecoderLayer.forward", "matmul_allreduce@Qwen3Attention.forward"):
        o = opps[oid]
        assert str(o.status) == "open", oid
        assert "fuse_allreduce_rms is False by default" in (o.note or ""), oid
        assert any(c.startswith("as part of MiddleLayerMatmulAllReduceAddRMSNormPattern") for c in o.conditions)
    on = Options(additional_config='{"ascend_compilation_config": {"fuse_allreduce_rms": true}}')
    opps = {o.id: o for o in analyze_in(s23, "Qwen3ForCausalLM", on).opportunities}
    for oid in ("allreduce_norm@Qwen3DecoderLayer.forward", "matmul_allreduce@Qwen3Attention.forward"):
        o = opps[oid]
        assert str(o.status) == "fused_by_ascend_graph_pass", oid
        assert o.evidence[0]["file"] == "vllm_ascend/compilation/passes/allreduce_rmsnorm_fusion_pass.py"
        assert any(c.startswith("as part of MiddleLayerMatmulAllReduceAddRMSNormPattern") for c in o.conditions)
        assert any("tp_size > 1" in c for c in o.conditions)
    s30 = Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))
    opps = {o.id: o for o in analyze_in(s30, "Qwen3ForCausalLM").opportunities}
    assert str(opps["allreduce_norm@Qwen3DecoderLayer.forward"].status) == "open"


def test_a_chain_joins_no_ops_of_a_test_and_its_negation(session):
    """Falcon's layer adds the MLP's bias under `if self.reduce_row_parallel_results:` and, in another `if not
    self.reduce_row_parallel_results:`, adds the attention output and both biases: neither test is decided, so
    all the adds are in the sequence, but no element-wise chain joins an add of one side with one of the other
    (it joined the MLP bias add with the attention-output add); the chains within one side are still rows."""
    a = analyze_in(session, "FalconForCausalLM")
    rows = [o for o in a.opportunities if o.scenario == "vector_elementwise_chain"]
    test = "self.reduce_row_parallel_results"
    sides = [{op.condition for op in m.op_list} for o in rows for m in o.matches]
    assert not [s for s in sides if {test, f"not {test}"} <= s]
    assert {f"not {test}"} in sides  # the adds of the negated side (falcon.py L357, L359): one chain
