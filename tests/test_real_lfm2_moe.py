"""LFM2-MoE (Lfm2MoeForCausalLM) on the 0.30 pair with the released LFM2-8B-A1B layout (fixtures/configs/
lfm2-moe.json: 24 layers, attention at 2, 6, 10, 14, 18, 21, two dense layers first), as a hand check of its
report found it: the MoE block is the class that calls the MoE layer, ShortConv's custom op is walked into
the layer's forward_cuda, the first layer runs the plain RMSNorm (the loop hands it no residual), and the MoE
runner's shared + routed join cannot run where the layer is built without shared experts."""

from __future__ import annotations

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in

from .conftest import FIXTURES, validate_report


@pytest.fixture(scope="module")
def lfm2(session, hf):
    return analyze_in(session, "Lfm2MoeForCausalLM", Options(config=str(FIXTURES / "configs" / "lfm2-moe.json"), hf_root=hf))


def _text(session, file: str, line: int) -> str:
    root = session.vllm.root if file.startswith("vllm/") else session.ascend.root
    return (root / file).read_text().splitlines()[line - 1]


def test_moe_location_is_the_block_that_calls_the_moe_layer(session, lfm2):
    """`Lfm2MoeMlp` (the dense FFN of layers 0-1) holds "Moe" in its name; the MoE block is the class whose
    forward calls the FusedMoE (`Lfm2MoeSparseMoeBlock`), and the dense block is the MLP."""
    loc = lfm2.report["locations"]
    assert loc["moe"]["class"] == "Lfm2MoeSparseMoeBlock"
    assert "class Lfm2MoeSparseMoeBlock" in _text(session, loc["moe"]["file"], loc["moe"]["line"])
    assert "def forward" in _text(session, loc["moe"]["forward_file"], loc["moe"]["forward_line"])
    assert loc["mlp"]["class"] == "Lfm2MoeMlp"
    moe = next(op for op in lfm2.walk.ops if op.kind == "moe")
    assert moe.scope.startswith("Lfm2MoeSparseMoeBlock.")


def test_short_conv_custom_op_is_walked_into_forward_cuda(session, lfm2):
    """`torch.ops.vllm.short_conv` runs `short_conv()`, which takes the layer from the forward context and,
    off CPU, runs its forward_cuda (short_conv.py): the in_proj / out_proj GEMMs and the convolution (vllm-
    ascend's patched causal_conv1d) are ops of the layer, not one opaque kernel."""
    ops = [op for op in lfm2.walk.ops if op.section == "layer"]
    assert not [op for op in ops if op.kind == "kernel" and op.name == "short_conv"]
    for kind in (0, 1, 3):  # the ShortConv kinds (layer 0, layer 1 and the MoE ones)
        mine = [op for op in ops if op.attrs.get("layer_kind") == kind and op.path.startswith("model.layers.short_conv")]
        names = [(op.kind, op.name) for op in mine]
        assert ("matmul", "in_proj") in names and ("matmul", "out_proj") in names, names
        proj = next(op for op in mine if op.name == "in_proj")
        assert proj.file == "vllm/model_executor/layers/mamba/short_conv.py"
        assert "self.in_proj(hidden_states)" in _text(session, proj.file, proj.line)
        assert [k.name for k in proj.kernels] == ["torch.ops.vllm.unquantized_gemm"]
        conv = [op for op in mine if "patch_triton.py" in str(op.attrs.get("replaced_by"))]
        assert conv and all(op.file == "vllm_ascend/ops/causal_conv1d.py" for op in conv)
    validate_report(lfm2.report)


def test_first_layer_runs_the_plain_rmsnorm(session, lfm2):
    """The model loop starts with `residual = None` (lfm2_moe.py:477): layer 0's operator_norm runs the plain
    RMSNorm (`npu_rms_norm`, lfm2_moe.py:380), the others add + RMSNorm (:382). Layers 0 and 1 (the dense
    ShortConv layers) are two kinds, told apart by the residual the loop hands them; the test is decided."""
    kinds = lfm2.report["layer_kinds"]
    assert [k["ranges"] for k in kinds[:2]] == [[[0, 0]], [[1, 1]]]
    assert [k["count"] for k in kinds] == [1, 1, 6, 16]
    assert {k["differs"]["feed_forward"] for k in kinds[:2]} == {"Lfm2MoeMlp"}
    assert [k["differs"]["residual"] for k in kinds[:2]] == ["the loop's initial value (the first layer)",
                                                             "the previous layer's output"]
    norms = {op.attrs["layer_kind"]: op for op in lfm2.walk.ops if op.name == "operator_norm"}
    assert sorted(norms) == [0, 1, 2, 3] and all(op.steady and op.condition is None for op in norms.values())
    first = norms[0]
    assert first.kind == "rmsnorm" and [k.name for k in first.kernels] == ["torch_npu.npu_rms_norm"]
    assert "self.operator_norm(hidden_states)" in _text(session, first.file, first.line)
    for kind in (1, 3):
        assert norms[kind].kind == "add_rmsnorm"
        assert [k.name for k in norms[kind].kernels] == ["torch.ops._C_ascend.npu_add_rms_norm_bias"]
        assert "self.operator_norm(hidden_states, residual)" in _text(session, norms[kind].file, norms[kind].line)
    assert not [u for u in lfm2.report["undecided"] if u["test"] == "residual is None"]
    for model in lfm2.steps.values():
        assert model.step.kind_counts == [1, 1, 6, 16]


def test_moe_join_without_shared_experts_is_not_walked(session, lfm2):
    """Lfm2MoeSparseMoeBlock builds its FusedMoE without shared experts (lfm2_moe.py:142-159), so the runner's
    `ascend_shared_experts` is None (vllm_ascend fused_moe.py:129) and `shared_output` stays None: the
    shared + routed `torch._foreach_add` join (fused_moe.py:240) never runs, and no join op is listed."""
    moe = [op for op in lfm2.walk.ops if op.kind == "moe"]
    assert moe and all("join" not in op.attrs.get("expanded", []) for op in moe)
    assert not [op for op in lfm2.walk.ops if op.kind == "moe_join"]
    assert not [k for op in lfm2.walk.ops for k in op.kernels if k.name == "torch._foreach_add"]
