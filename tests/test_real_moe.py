"""Composite MoE layers walked to their parts on the released 0.30 pair (issue 15): the router and the
routed experts after the MoE layer's op, with the kernels their code runs on Ascend, and the gating scenario
decided from those kernels. The classes come from the instance the walk built: vllm-ascend's
FusedMoEFactory patch, its router factory decided with the device profile and the model's arguments, and the
comm method setup_moe_comm_method registers without expert parallelism."""

from __future__ import annotations

import re

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in, render
from fusion_analyze.analysis.session import Session

from .conftest import FIXTURES, validate_report
from .layers import after_first


def _line(session, op_or_ev) -> str:
    file, line = (op_or_ev.file, op_or_ev.line) if hasattr(op_or_ev, "file") else (op_or_ev["file"], op_or_ev["line"])
    root = session.vllm.root if file.startswith("vllm/") else session.ascend.root
    return (root / file).read_text().splitlines()[line - 1]


def _moe(a, block):
    ops = after_first(a.walk.ops)
    i = next(i for i, op in enumerate(ops) if op.kind == "moe" and op.scope.startswith(block))
    return ops[i], ops[i + 1:i + 3]


@pytest.mark.parametrize("arch, block", [("Qwen3MoeForCausalLM", "Qwen3MoeSparseMoeBlock"),
                                         ("Glm4MoeForCausalLM", "Glm4MoE"),
                                         ("DeepseekV3ForCausalLM", "DeepseekV2MoE")])
def test_moe_layer_is_followed_by_its_router_and_experts(session, hf, arch, block):
    a = analyze_in(session, arch, Options(hf_root=hf))
    moe, parts = _moe(a, block)
    assert moe.layer_class == "MoERunner" and moe.attrs["ascend_class"] == "AscendMoERunner"
    # the join of the shared experts' output only where the model hands the runner shared experts
    shared = [op for op in after_first(a.walk.ops) if op.attrs.get("role") == "shared_expert" and op.path.startswith(moe.path + ".")]
    assert moe.attrs["expanded"] == ["router", "experts"] + (["join"] if shared else [])
    router, experts = parts
    assert router.path == f"{moe.path}.router" and router.kind == "moe_gating" and router.attrs["part"] == "router"
    assert router.layer_class == "AscendFusedTopKRouter"  # patch_fused_moe.py -> create_ascend_fused_moe_router
    # the method that computes the routing, where the kernel is called (AscendRoutedExperts._select_experts ->
    # router._select_experts -> _compute_routing), not vLLM's select_experts, which Ascend does not call
    # at the call of the gating kernel (issue 33: not at the def of the method that holds it)
    assert "torch.ops._C_ascend.moe_gating_top_k" in _line(session, router) and router.file.startswith("vllm_ascend/")
    gating = [k for k in router.kernels if k.name == "torch.ops._C_ascend.moe_gating_top_k"]
    assert gating and "torch.ops._C_ascend.moe_gating_top_k(" in _line(session, gating[0])
    assert experts.path == f"{moe.path}.experts" and experts.kind == "moe_experts"
    assert experts.layer_class == "AllGatherCommImpl"  # no expert parallelism: the one comm method registered
    names = [k.name for k in experts.kernels]
    for kernel in ("torch_npu.npu_moe_init_routing_v2", "torch_npu.npu_swiglu", "torch_npu.npu_moe_token_unpermute",
                   "torch_npu.npu_grouped_matmul"):  # the GEMMs through AscendRoutedExperts' quant method
        assert kernel in names, kernel
    assert names.index("torch_npu.npu_moe_init_routing_v2") < names.index("torch_npu.npu_moe_token_unpermute")
    locations = a.report["locations"]  # where a MoE user looks: the classes that run them on Ascend
    assert locations["moe_router"]["class"] == "AscendFusedTopKRouter"
    assert locations["moe_experts"]["class"] == "AscendRoutedExperts"
    assert "class AscendRoutedExperts" in _line(session, locations["moe_experts"])
    validate_report(a.report)


# At the report's deployment (TP only, DP 1, no EP, no sequence parallelism) prepare and finalize run no kernel
# (PrepareAndFinalizeWithAllGather: the EP/SP all-gather and reduce-scatter branches do not run): no step
_STEPS = [("dispatch", "moe_dispatch"), ("gemm1", "expert_gemm"), ("act", "expert_act"),
          ("gemm2", "expert_gemm"), ("combine", "moe_combine")]


@pytest.mark.parametrize("arch, block", [("Qwen3MoeForCausalLM", "Qwen3MoeSparseMoeBlock"),
                                         ("Glm4MoeForCausalLM", "Glm4MoE"),
                                         ("DeepseekV3ForCausalLM", "DeepseekV2MoE")])
def test_the_routed_experts_are_the_steps_they_run_in_order_at_their_kernels_lines(session, hf, arch, block):
    """After the experts part, one op per step it runs (composites.yaml `steps`): all-gather, dispatch
    (npu_moe_init_routing_v2), gate/up grouped GEMM (the quant method's apply_gmm1), SwiGLU, down grouped GEMM
    (apply_gmm2), unpermute with the routing weights, reduce-scatter; each at the line that calls its kernel."""
    a = analyze_in(session, arch, Options(hf_root=hf))
    ops = after_first(a.walk.ops)
    moe, (_router, experts) = _moe(a, block)
    i = ops.index(experts)
    steps = ops[i + 1:i + 1 + len(_STEPS)]
    assert [(op.name, op.kind) for op in steps] == _STEPS
    for op in steps:
        assert op.path == f"{experts.path}.{op.name}" and op.attrs["step"] == op.name
        assert op.attrs["inside"] == "AllGatherCommImpl" and op.condition == experts.condition
        at = next((k for k in op.kernels if k.condition is None), op.kernels[0])  # one that always runs, if any
        assert (op.file, op.line) == (at.file, at.line)
        assert set(op.kernels) <= set(experts.kernels)  # the part keeps them all: what the statuses read
    by = {op.name: op for op in steps}
    calls = {"dispatch": "npu_moe_init_routing_v2(", "gemm1": "npu_grouped_matmul(", "act": "npu_swiglu(",
             "gemm2": "npu_grouped_matmul(", "combine": "npu_moe_token_unpermute("}
    for name, call in calls.items():
        assert call in _line(session, by[name]), name
        assert [k.name for k in by[name].kernels] == [f"torch_npu.{call[:-1]}"], name
    src = (session.ascend.root / by["gemm1"].file).read_text().splitlines()
    def_of = lambda line: next(t.strip() for t in reversed(src[:line]) if t.strip().startswith("def "))  # noqa: E731
    assert def_of(by["gemm1"].line).startswith("def apply_gmm1") and def_of(by["gemm2"].line).startswith("def apply_gmm2")
    assert "prepare" not in by and "finalize" not in by  # DP 1, no EP, no SP: their branches do not run
    validate_report(a.report)


def test_the_shared_experts_join_the_routed_output_in_the_runners_multi_tensor_add(session, hf):
    """AscendMoERunner.forward joins the shared experts' output and the routed one with torch._foreach_add (one
    launch), when the layer runs shared experts: the MoE layer's last part, its only kernel that add."""
    a = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    moe, _parts = _moe(a, "Qwen3MoeSparseMoeBlock")
    (join,) = [op for op in after_first(a.walk.ops) if op.kind == "moe_join"]
    assert join.path == f"{moe.path}.join" and join.attrs["part"] == "join"
    assert join.attrs["ascend_class"] == "AscendMoERunner" and "torch._foreach_add(" in _line(session, join)
    (k,) = join.kernels
    assert k.name == "torch._foreach_add" and k.condition == "shared_output is not None"
    assert "torch._foreach_add([shared_output], [fused_output])" in _line(session, k)


def test_the_report_indents_the_steps_under_the_experts(session, hf):
    a = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    lines = render(a, "md", lang="en").splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("  ↳ moe_experts"))
    n = len(_STEPS)
    assert [line.split()[1] for line in lines[i + 1:i + 1 + n]] == [kind for _n, kind in _STEPS]
    assert all(line.startswith("    ↳ ") for line in lines[i + 1:i + 1 + n])


def test_where_one_function_runs_the_experts_mlp_it_is_one_step(hf, real_tree):
    """0.23's MoE MLP runs GEMM, activation and GEMM in one function, a branch per quantization: the GEMMs
    are not told apart by the method that runs them, so they stay one `mlp` step, not a guessed gemm1/gemm2."""
    s23 = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    a = analyze_in(s23, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    ops = after_first(a.walk.ops)
    i = next(i for i, op in enumerate(ops) if op.kind == "moe_experts")
    steps = [op.name for op in ops[i + 1:] if op.attrs.get("step")][:5]
    assert steps == ["prepare", "dispatch", "mlp", "combine", "finalize"]
    mlp = next(op for op in ops[i + 1:] if op.name == "mlp")
    names = {k.name for k in mlp.kernels}
    assert {"torch_npu.npu_grouped_matmul", "torch_npu.npu_swiglu"} <= names
    assert "npu_grouped_matmul(" in _line(s23, mlp)
    ids = [op.id for op in ops]  # the second experts part (the other layer class's) numbers its steps
    assert len(ids) == len(set(ids))


def test_the_router_gemm_a_moe_layer_is_given_is_where_the_ascend_runner_runs_it(session, hf):
    """Qwen3-MoE hands its gate to the MoE layer (gate=...): on Ascend AscendMoERunner._apply_router_linear runs
    it, an FP32 `F.linear` on the gate's pre-cast weight when it has one, else the gate's own forward; the op is
    there, each GEMM under its test (whether the weight was pre-cast is load-time state: not decided)."""
    a = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    (gate,) = [op for op in after_first(a.walk.ops) if op.attrs.get("role") == "router"]
    assert gate.path.endswith("mlp.experts.gate") and gate.file == "vllm_ascend/ops/fused_moe/fused_moe.py"
    assert "F.linear(router_input, gate.weight_fp32)" in _line(session, gate)  # the GEMM's call
    assert gate.attrs["runs"] == "AscendMoERunner._apply_router_linear" and gate.attrs["inside"] == "MoERunner"
    (fp32,) = [k for k in gate.kernels if k.name == "torch.nn.functional.linear"]
    assert "F.linear(router_input, gate.weight_fp32)" in _line(session, fp32)
    assert fp32.condition == 'hasattr(gate, "weight_fp32")'
    (own,) = [k for k in gate.kernels if k.name == "torch.ops.vllm.unquantized_gemm"]  # the gate's forward
    assert own.condition == 'not (hasattr(gate, "weight_fp32"))' and own.file == "vllm_ascend/ops/linear.py"
    assert "params_dtype" not in gate.attrs  # ReplicatedLinear's weights take the model's dtype
    # handing the gate to the MoE layer is placement, not fusion: the runner still runs the router GEMM, the
    # gating kernel and the grouped GEMMs as separate kernels (issue 33)
    (o,) = [o for o in a.opportunities if o.scenario == "router_experts"]
    assert str(o.status) == "open" and "the Ascend runner runs separate kernels" in o.note
    for name in ("torch.ops._C_ascend.moe_gating_top_k", "torch_npu.npu_grouped_matmul"):
        assert name in o.note


def test_an_ascend_gate_linear_builds_fp32_router_weights(session, hf):
    """DeepSeek-V3's GateLinear is AscendGateLinear on Ascend, whose __init__ passes params_dtype=torch.float32:
    the router op says so, read from the class's construction."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf))
    gates = [op for op in after_first(a.walk.ops) if op.attrs.get("role") == "router"]
    assert gates and all(op.attrs["ascend_class"] == "AscendGateLinear" for op in gates)
    assert all(op.attrs["params_dtype"] == "torch.float32" for op in gates)
    md = render(a, "md", lang="en")
    assert any(line.startswith("router matmul") and "weights torch.float32" in line for line in md.splitlines())


@pytest.mark.parametrize("arch", ["Qwen3MoeForCausalLM", "Glm4MoeForCausalLM", "MixtralForCausalLM"])
def test_gating_is_fused_by_the_routers_kernel(session, hf, arch):
    """AscendFusedTopKRouter._compute_routing falls back to the unfused routing where `not
    self.is_fused_supported(hidden_states)` (vllm_ascend/ops/fused_moe/router/fused_topk_router.py:148): that
    method is run on the router the walk built (its top_k and groups) with the routed hidden states' width, which
    the runner pads to `moe_config.hidden_dim` (composites.yaml `widths`): the fused kernel runs, under no test."""
    a = analyze_in(session, arch, Options(hf_root=hf))
    (o,) = [o for o in a.opportunities if o.scenario == "gate_topk"]
    assert str(o.status) == "fused_by_ascend_kernel"
    assert o.evidence[0]["file"] == "vllm_ascend/device/device_op.py"
    assert "moe_gating_top_k(" in _line(session, o.evidence[0])
    assert not any("is_fused_supported" in c for c in o.conditions), o.conditions


def test_the_report_indents_the_parts_under_the_moe_layer(session, hf):
    a = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    md = render(a, "md", lang="en")
    lines = md.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("moe ") and "experts (MoERunner" in line)
    assert lines[i + 1].startswith("  ↳ moe_gating") and "router (AscendFusedTopKRouter)" in lines[i + 1]
    assert lines[i + 2].startswith("  ↳ moe_experts") and "experts (AllGatherCommImpl)" in lines[i + 2]


def test_on_cuda_the_router_is_vllms_own(hf, real_tree):
    s = Session.open(str(real_tree("vllm==0.30.0")), None)
    a = analyze_in(s, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    _moe_op, (router, experts) = _moe(a, "Qwen3MoeSparseMoeBlock")
    # neither ROCm's aiter router (rocm_aiter_ops.is_*() is None off ROCm) nor the routing simulator (its
    # environment variable is unset by default)
    assert router.layer_class == "FusedTopKRouter"
    assert experts.layer_class == "RoutedExperts" and "def forward_modular" in _line(s, experts)
    # the gate it is handed runs inline in MoERunner._forward_impl (`router_logits, _ = self.gate(hidden_states)`)
    (gate,) = [op for op in after_first(a.walk.ops) if op.attrs.get("role") == "router"]
    assert gate.attrs["runs"] == "MoERunner._forward_impl" and "def _forward_impl" in _line(s, gate)
    assert not any(k.name.endswith("functional.linear") for k in gate.kernels)  # no shared expert gate to fuse


def test_deepseek_v3_dense_first_layers_are_the_moe_layers_alternative(session, hf):
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf))
    (alt,) = [x for x in a.report["alternatives"] if x["path"] == "model.layers.mlp"]
    assert alt["chosen"] == "DeepseekV2MoE" and not alt["decided"]
    (dense,) = [o for o in alt["others"] if o[0] == "DeepseekV2MLP"]
    assert "first_k_dense_replace" in dense[1]  # the layers before it are dense, with the test that says so


def test_a_module_called_under_a_test_runs_under_it(session, hf):
    """DeepseekV2DecoderLayer calls self.mlp in both arms of `if self.use_sequence_parallel_moe`, which the
    deployment decides (vLLM's defaults: false), so the MoE layer is walked once, in the arm that runs. `if self.use_mha` is decided by the configuration
    (`config.model_type == "deepseek" or all(dim == 0 for dim in (qk_nope_head_dim, qk_rope_head_dim))` is
    false for DeepSeek-V3), so the MLA layer is walked once, in the arm that runs."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf))
    # the preset's layers are two kinds: dense (first_k_dense_replace = 3), then MoE, the first layer (no residual
    # yet) walked apart; each runs the MLA layer once
    assert [kd["differs"].get("mlp") for kd in a.walk.layer_kinds] == ["DeepseekV2MLP", "DeepseekV2MLP", "DeepseekV2MoE"]
    layer = [op for op in a.walk.ops if op.section == "layer"]
    for k in (0, 1, 2):
        attn = [op for op in layer if op.kind == "mla_attention" and op.attrs.get("layer_kind") == k]
        assert len(attn) == 1 and "self.use_mha" not in (attn[0].condition or ""), k
    assert {op.attrs.get("layer_kind") for op in layer if op.kind == "mla_attention"} == {0, 1, 2}
    moe = [op for op in layer if op.path.startswith("model.layers.mlp") and op.attrs.get("layer_kind") == 2]
    # `self.use_sequence_parallel_moe` is decided at vLLM's defaults (it needs expert parallelism: vllm-ascend's
    # patch_parallel_config.py): only its false arm runs, and no op carries the test
    assert moe and not any("use_sequence_parallel_moe" in (op.condition or "") for op in moe)
    kinds = [op.kind for op in moe]  # the arm that runs runs the whole MoE layer: the runner and both of its parts
    assert kinds.count("moe") == 1 and "moe_gating" in kinds and "moe_experts" in kinds
    # the dense kind runs no MoE op
    assert not [op for op in layer if op.kind.startswith("moe") and op.attrs.get("layer_kind") != 2]


def test_routed_experts_grouped_gemm_and_swiglu_are_separate_kernels(session, hf):
    """Unquantized experts on Ascend run npu_grouped_matmul, then npu_swiglu: GEMM + gated activation is open
    at the experts part (issue 16: the experts' grouped GEMM -> activation)."""
    a = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    (o,) = [o for o in a.opportunities if o.id == "matmul_swiglu@Qwen3MoeSparseMoeBlock.forward"]
    assert str(o.status) == "open" and o.evidence[0]["what"] == "experts (AllGatherCommImpl)"
    (part,) = [op for op in after_first(a.walk.ops) if op.kind == "moe_experts"]
    names = [k.name for k in part.kernels]
    assert "torch_npu.npu_grouped_matmul" in names and "torch_npu.npu_swiglu" in names
    assert "torch_npu.npu_grouped_matmul_swiglu_quant" not in names  # the W8A8 method is not this checkpoint's


@pytest.mark.parametrize("arch, runs, code, never", [
    # activation default "silu": the else branch's kernel
    ("Qwen3MoeForCausalLM", "torch_npu.npu_swiglu", "hidden_states = torch_npu.npu_swiglu(hidden_states)",
     "torch_npu.npu_clipped_swiglu"),
    # activation="swigluoai": AscendSwigluOAIAndMul.swiglu_oai_forward runs SwigluOAIAndMul.forward_native,
    # plain PyTorch ops, listed as such at the call
    ("GptOssForCausalLM", "native:SwigluOAIAndMul.forward_native", "return SwigluOAIAndMul.forward_native(layer, x)",
     "torch_npu.npu_swiglu"),
])
def test_the_experts_activation_kernel_is_the_one_the_layers_activation_selects(session, hf, arch, runs, code, never):
    """vllm-ascend's MoE MLP branches on `mlp_compute_input.activation == MoEActivation.X` (an if/elif chain);
    the part's walk reads it as the activation the MoE layer was built with (composites.yaml `fields`)."""
    a = analyze_in(session, arch, Options(hf_root=hf))
    # one experts part per kind of decoder layer (GPT-OSS: two, by the sliding window; Qwen3-MoE: one), each
    # with the same kernels
    # (the first layer, handed no residual yet, walked apart)
    kinds = [kd["differs"] for kd in a.walk.layer_kinds]
    if arch == "Qwen3MoeForCausalLM":
        assert [list(k) for k in kinds] == [["residual"]] * 2
    else:  # the sliding layers' window, and the others' engine window: GptOssConfig's `layer_types` alternate,
        # so EngineArgs leaves `cache_config.sliding_window` None (vllm/engine/arg_utils.py:2083-2087)
        assert [k.get("attn.attn.sliding_window") for k in kinds] == ["128", "None", "128"], kinds
    parts = [op for op in after_first(a.walk.ops) if op.kind == "moe_experts"]
    acts = [op for op in after_first(a.walk.ops) if op.attrs.get("step") == "act"]  # the experts' activation step
    assert [op.attrs.get("layer_kind") for op in parts] == [op.attrs.get("layer_kind") for op in acts] == (
        [None] if not kinds else list(range(1, len(kinds))))  # (the first layer's apart)
    for part, act in zip(parts, acts):
        by = {k.name: k for k in part.kernels}
        assert never not in by
        assert not any("MoEActivation" in (k.condition or "") for k in part.kernels)  # the chain is decided
        assert _line(session, by[runs]).strip() == code
        # the unquantised method has no fused GEMM + activation form (AscendUnquantizedFusedMoEMethod.
        # supports_fused_activation returns False, vllm_ascend/ops/fused_moe/routed_experts.py:100): its
        # `apply` passes itself (`quant_method=self`, :174), so the MLP's tests on it are decided
        assert "quant_method" not in (by[runs].condition or "")
        assert "torch_npu.npu_grouped_matmul" in by  # the expert GEMMs run either way
        assert [k.name for k in act.kernels] == [runs] and (act.file, act.line) == (by[runs].file, by[runs].line)
    (o,) = [o for o in a.opportunities if o.id.startswith("matmul_swiglu@") and o.evidence[0]["what"].startswith("experts")]
    assert str(o.status) == "open"  # a forward_native covers no scenario: never a fused claim


@pytest.mark.parametrize("arch, config", [("DeepseekV3ForCausalLM", None),
                                          ("KimiLinearForCausalLM", "kimi-linear-kda-mla.json")])
def test_shared_experts_run_by_the_moe_layer_are_still_separate_kernels_on_ascend(session, hf, arch, config):
    """DeepSeek-V3 and Kimi-Linear hand their shared experts to the MoE runner (shared_experts=...): on Ascend
    AscendMoERunner._forward_impl (fused_moe.py) runs the routed pipeline (routed_experts.forward_impl), then
    AscendSharedExperts.forward, the shared MLP's own GEMMs and SwiGLU (shared_experts.py part1 /
    apply_activation / part2), then joins them with torch._foreach_add (fused_moe.py L240). They overlap on a
    second stream only with multistream_overlap_shared_expert (npu_stream_switch(..., enabled=
    self.multistream_overlap); AscendConfig's default False), and no kernel computes both: open, with the
    separate kernels named. Placement in the runner is not fusion."""
    a = analyze_in(session, arch, Options(hf_root=hf, config=str(FIXTURES / "configs" / config) if config else None))
    (o,) = [o for o in a.opportunities if o.scenario == "shared_routed"]
    assert str(o.status) == "open" and "the Ascend runner runs separate kernels" in o.note
    for name in ("torch_npu.npu_grouped_matmul", "torch_npu.npu_swiglu", "torch._foreach_add"):
        assert name in o.note, name
    (m, *_) = o.matches
    seq = [op for op in after_first(a.walk.ops) if op.path.startswith(m.op_list[0].path + ".") and op.steady
           and op.attrs.get("layer_kind") == m.op_list[0].attrs.get("layer_kind")]
    shared = [i for i, op in enumerate(seq) if op.attrs.get("role") == "shared_expert"]
    combine = [i for i, op in enumerate(seq) if op.kind == "moe_combine"]
    join = [op for op in seq if op.kind == "moe_join"]
    assert shared and combine and max(combine) < min(shared)  # routed first, then the shared MLP
    assert {seq[i].file for i in shared} == {"vllm_ascend/ops/fused_moe/shared_experts.py"}
    assert [(op.file, op.line, [k.name for k in op.kernels]) for op in join] == [
        ("vllm_ascend/ops/fused_moe/fused_moe.py", 240, ["torch._foreach_add"])]


def test_older_releases_read_the_moe_layer_vllm_ascend_registers_for_that_vllm_version(hf, real_tree):
    """vllm-ascend 0.23 registers AscendFusedMoE only `if vllm_version_is("0.23.0")`, and imports the class of
    that version (fused_moe_0_23_0.py): both decided by the --vllm-root tree's version. On the 0.13 pair the
    layer's `torch.ops.vllm.moe_forward` runs the layer's own forward_impl (walk.yaml layer_dispatch), read with
    the values the layer is built with (multistream_overlap_gate is False without --additional-config), so the
    gating kernel of the default path is the evidence."""
    s23 = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    a = analyze_in(s23, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    moe = next(op for op in after_first(a.walk.ops) if op.kind == "moe")
    assert moe.attrs["ascend_class"] == "AscendFusedMoE"
    assert moe.attrs["ascend_file"] == "vllm_ascend/ops/fused_moe/fused_moe_0_23_0.py"
    s13 = Session.open(str(real_tree("vllm==0.13.0")), str(real_tree("vllm-ascend==0.13.0")))
    a = analyze_in(s13, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    (o,) = [o for o in a.opportunities if o.scenario == "gate_topk"]
    assert str(o.status) == "fused_by_ascend_kernel"
    assert o.evidence[0]["file"] == "vllm_ascend/ops/fused_moe/experts_selector.py"
    assert not any("multistream_overlap_gate" in c for c in o.conditions)


def test_the_routed_experts_of_vllm_ascends_own_moe_layer_are_the_comm_methods_part(hf, real_tree):
    """Before the runner design (0.23), AscendFusedMoE.forward_impl routes itself and runs the routed experts
    through `_EXTRA_CTX.moe_comm_method`: the experts part follows the layer as in the runner design (the comm
    method setup_moe_comm_method registers without expert parallelism), and the gating stays the layer's. On
    0.13 setup_moe_comm_method registers four comm methods whatever the configuration: which one runs is
    chosen at run time, and the part is an unknown callee that names them, not a guess."""
    s23 = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    a = analyze_in(s23, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    ops = after_first(a.walk.ops)
    i = next(i for i, op in enumerate(ops) if op.kind == "moe")
    moe, experts = ops[i], ops[i + 1]
    assert moe.attrs["runs"] == "AscendFusedMoE.forward_impl" and "expanded" not in moe.attrs
    assert experts.kind == "moe_experts" and experts.layer_class == "AllGatherCommImpl"
    assert experts.path == f"{moe.path}.experts"
    assert "moe_router" not in a.walk.locations  # the layer routes itself: vLLM's router is not its
    always = {k.name for k in experts.kernels if k.condition is None}
    assert {"torch.ops._C_ascend.npu_moe_init_routing_custom", "torch_npu.npu_moe_token_unpermute"} <= always
    assert "torch_npu.npu_grouped_matmul" in {k.name for k in experts.kernels}
    (o,) = [o for o in a.opportunities if o.scenario == "gate_topk"]
    assert str(o.status) == "fused_by_ascend_kernel"  # the layer's own gating kernel, as before
    # GEMM + SwiGLU of the experts is one scenario at the part (not the part and the layer counted twice)
    (sw,) = [o for o in a.report["opportunities"] if o["id"] == "matmul_swiglu@Qwen3MoeSparseMoeBlock.forward"]
    kinds = {op.id: op for op in a.walk.ops}  # one experts part per kind of layer (the first layer walked apart)
    assert experts.id in sw["ops"] and {kinds[i].kind for i in sw["ops"]} == {"moe_experts"}
    assert len(sw["ops"]) == len(a.walk.layer_kinds)
    s13 = Session.open(str(real_tree("vllm==0.13.0")), str(real_tree("vllm-ascend==0.13.0")))
    a = analyze_in(s13, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    assert not any(op.kind == "moe_experts" for op in after_first(a.walk.ops))
    whys = [u for u in a.report["unknown_callees"] if u["name"].endswith(".experts.experts")]  # one per kind of layer
    assert whys and all("AllGatherCommImpl" in why["reason"] and "MC2CommImpl" in why["reason"] for why in whys)


def test_vllm_ascends_own_moe_layer_before_the_runner_design_is_read_in_its_forward_impl(hf, real_tree):
    """On the 0.23 pair AscendFusedMoE routes and computes in its own forward_impl (composites.yaml own_method):
    the layer's kernels are read there, the runner design's router part (vLLM's FusedTopKRouter, which it does
    not call) is not listed (its experts part is: the comm method's), gating is fused by the default branch's
    kernel (not the sqrtsoftplus hash variant), and the experts' GEMM + SwiGLU stays a scenario (open)."""
    s23 = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    a = analyze_in(s23, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    moe = next(op for op in after_first(a.walk.ops) if op.kind == "moe")
    assert moe.attrs["runs"] == "AscendFusedMoE.forward_impl" and "expanded" not in moe.attrs
    assert {op.attrs["part"] for op in after_first(a.walk.ops) if op.attrs.get("part")} == {"experts"}
    (o,) = [o for o in a.opportunities if o.scenario == "gate_topk"]
    assert str(o.status) == "fused_by_ascend_kernel"
    assert o.evidence[0]["what"].startswith("torch.ops._C_ascend.moe_gating_top_k ")
    (sw,) = [o for o in a.opportunities if o.id == "matmul_swiglu@Qwen3MoeSparseMoeBlock.forward"]
    assert str(sw.status) == "open"


def test_a_custom_routing_function_keeps_vllm_ascends_native_gating(hf, real_tree):
    """vllm-ascend 0.23's check_npu_moe_gating_top_k returns False when a custom routing function is given:
    Llama4 (`Llama4MoE.custom_routing_function`) and PhiMoE (`phimoe_routing_function`) run
    _native_select_experts, so their gate_topk is open; Qwen3-MoE passes none and stays fused (the walk reads
    the layer's `self.custom_routing_function` through the calls to the check, whose every remaining return
    gives False)."""
    s23 = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    for arch, status in (("Llama4ForCausalLM", "open"), ("PhiMoEForCausalLM", "open"),
                         ("Qwen3MoeForCausalLM", "fused_by_ascend_kernel")):
        a = analyze_in(s23, arch, Options(hf_root=hf))
        (o,) = [o for o in a.opportunities if o.scenario == "gate_topk"]
        assert str(o.status) == status, (arch, o.status, o.conditions)


def test_qwen3_next_shared_experts_run_inside_the_moe_runner(session, hf):
    """Qwen3-Next passes `shared_experts=(None if self.replicate_shared_expert else self.shared_expert)`: the
    module runs inside the MoE runner (fused in the model); the `+=` of a replicated shared expert is not on the
    default path (replicate_shared_expert is False there)."""
    a = analyze_in(session, "Qwen3NextForCausalLM", Options(hf_root=hf))
    found = [o for o in a.opportunities if o.scenario == "shared_routed"]
    assert [str(o.status) for o in found] == ["open"]  # handed to the runner: still separate kernels on Ascend
    assert "the MoE layer runs the shared experts itself" in found[0].note
    # replicate_shared_expert is decided: no quantization gives no group size, so
    # _should_replicate_misaligned_shared_expert returns False (qwen3_next.py:103-104): the module is passed
    assert not any("replicate_shared_expert" in c for c in found[0].conditions), found[0].conditions


def test_a_triton_helper_imported_inside_the_function_that_calls_it_is_followed(session, hf):
    """AscendSwigluStepAndMul.swiglustep_forward imports its Triton wrapper inside the method, under
    `if HAS_TRITON:` (activation.py): the kernel walk reads that import and reaches the kernel's launch."""
    a = analyze_in(session, "Step3p5ForCausalLM", Options(hf_root=hf))
    (part,) = [op for op in after_first(a.walk.ops) if op.kind == "moe_experts"]
    (k,) = [k for k in part.kernels if k.name == "triton:vllm_ascend.ops.triton.activation.swiglustep._swiglustep_kernel"]
    assert _line(session, k).strip().startswith("_swiglustep_kernel[")
    assert k.condition.endswith("activation == MoEActivation.SWIGLUSTEP and HAS_TRITON")


def test_a_feed_forward_block_named_mlp_that_runs_a_moe_layer_is_the_moe_block(session, hf):
    """GPT-OSS's layer calls `self.mlp`, an `MLPBlock` whose forward routes to experts: the MoE block a user
    looks for, not a dense MLP (Qwen3's `self.mlp`, a Qwen2MLP, stays the MLP)."""
    a = analyze_in(session, "GptOssForCausalLM", Options(hf_root=hf))
    assert "mlp" not in a.walk.locations
    moe = a.walk.locations["moe"]
    assert (moe.cls, moe.file, moe.line, moe.forward_line) == ("MLPBlock", "vllm/model_executor/models/gpt_oss.py", 357, 404)
    assert _line(session, moe) == "class MLPBlock(torch.nn.Module):"
    dense = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf)).walk.locations
    assert dense["mlp"].cls == "Qwen2MLP" and "moe" not in dense  # qwen3.py imports Qwen2MLP as Qwen3MLP


# -- the experts' grouped GEMM + SwiGLU, and routers the code builds in fp32 (hand checks of MiniMax-M2, MiMo-V2) --
MINIMAX = FIXTURES / "configs" / "minimax-m2.json"
MIMO = FIXTURES / "configs" / "mimo-v2-flash.json"


def _report_opp(a, scenario: str, scope: str) -> dict:
    (o,) = [o for o in a.report["opportunities"] if o["scenario"] == scenario and o["id"].endswith(f"@{scope}")]
    return o


@pytest.mark.parametrize("arch, config, moe", [("MiniMaxM2ForCausalLM", MINIMAX, "MiniMaxM2MoE"),
                                               ("MiMoV2FlashForCausalLM", MIMO, "MiMoV2MoE")])
def test_the_experts_gemm_and_swiglu_get_a_grouped_interface_in_the_experts_sizes(session, hf, arch, config, moe):
    """matmul_swiglu matched on a MoE layer's routed experts (their first GEMM is npu_grouped_matmul over every
    expert, routed_experts.py) is given the grouped interface: the token-expert pairs, [experts, 2 x the
    experts' intermediate size, hidden] weights and the rows per expert; not the dense MLP's [2 x
    intermediate_size, hidden] (MiMo-V2's dense MLP is 16384 wide, its experts 2048). Its estimate moves the
    pairs' gate/up output, as wide as the experts' intermediate size."""
    a = analyze_in(session, arch, Options(config=str(config), hf_root=hf))
    dims = a.shapes.dims
    h, e, k, i = dims["hidden_size"], dims["num_experts"], dims["top_k"], dims["moe_intermediate_size"]
    o = _report_opp(a, "matmul_swiglu", f"{moe}.forward")
    assert {m.form.id for op in a.opportunities if op.id == o["id"] for m in op.matches} == {"routed_experts"}
    stub = o["interface"]["stub"]
    assert o["interface"]["name"] == "fused_grouped_matmul_swiglu"
    assert f"hidden_states: torch.Tensor [num_tokens * top_k, hidden_size={h}]" in stub
    assert f"weight: torch.Tensor [num_experts={e}, 2 * moe_intermediate_size={2 * i}, hidden_size={h}]" in stub
    assert f"group_list: torch.Tensor [num_experts={e}], int64" in stub
    assert f"out: [num_tokens * top_k, moe_intermediate_size={i}]" in stub
    assert "intermediate_size=" not in stub.replace("moe_intermediate_size=", "")  # no dense MLP size
    prefill = o["benefit"]["numbers"]["prefill"]
    pairs = prefill["num_tokens"] * k
    assert prefill["per_layer"]["bytes"] == 2 * pairs * 2 * i * a.shapes.dtype_bytes  # written, read back
    md = render(a, "md", lang="en")
    assert "def fused_grouped_matmul_swiglu(hidden_states: torch.Tensor, weight: torch.Tensor, group_list: torch.Tensor)" in md


def test_a_match_in_each_kind_of_decoder_layer_is_counted_once_a_layer(session, hf):
    """MiMo-V2-Flash's decoder layers are of kinds (full and sliding-window attention): the experts' GEMM +
    SwiGLU is matched in each kind and saves per layer what one match saves, in each kind's layers (the
    per-layer bytes and launches are one layer's, not the sum over the kinds)."""
    a = analyze_in(session, "MiMoV2FlashForCausalLM", Options(config=str(MIMO), hf_root=hf))
    o = _report_opp(a, "matmul_swiglu", "MiMoV2MoE.forward")
    for name, numbers in o["benefit"]["numbers"].items():
        step = a.steps[name].step
        # a match in each kind running the experts, one of them in each layer (instances: a layer's matches)
        assert len(step.kind_counts) > 1 and numbers["instances"] == 1
        assert len({i.split("#")[0] for i in o["ops"]}) < len(o["ops"])  # the same ops, matched in several kinds
        assert numbers["per_layer"]["launches"] == 1
        assert numbers["model"]["launches"] == step.moe_layers  # once in each layer that runs the experts
        per_layer = numbers["per_layer"]["bytes"]
        assert numbers["model"]["bytes"] == pytest.approx(per_layer * step.moe_layers, rel=1e-6)


def test_the_dense_mlp_of_the_first_layer_pays_in_that_layer_only(session, hf):
    """MiMo-V2-Flash builds a dense MLP in layer 0 (`moe_layer_freq[0] == 0`) and the MoE block in the 47 others:
    the MLP's GEMM + SwiGLU saves in one layer, the experts' in 47."""
    a = analyze_in(session, "MiMoV2FlashForCausalLM", Options(config=str(MIMO), hf_root=hf))
    dense = _report_opp(a, "matmul_swiglu", "MiMoV2MLP.forward")["benefit"]["numbers"]["decode"]
    experts = _report_opp(a, "matmul_swiglu", "MiMoV2MoE.forward")["benefit"]["numbers"]["decode"]
    assert dense["model"]["launches"] == 1 and experts["model"]["launches"] == 47
    assert dense["model"]["time_us"] == pytest.approx(dense["per_layer"]["time_us"], abs=0.1)


def test_an_ascend_gate_linears_own_forward_casts_the_activations_to_fp32(session, hf):
    """MiniMax-M2 calls its gate itself (`self.gate(hidden_states)`), a GateLinear that vllm-ascend replaces by
    AscendGateLinear: its forward casts the input to fp32 (`if x.dtype != torch.float32: x = x.to(torch.float32)`)
    before ReplicatedLinear.forward, on weights its __init__ builds in fp32. The cast is an op at that line, in
    every layer (the activations are in the model's dtype, never fp32 under --dtype auto), the router GEMM reads
    its output and is costed in fp32, and the router + experts interface gives the router weight as fp32."""
    a = analyze_in(session, "MiniMaxM2ForCausalLM", Options(config=str(MINIMAX), hf_root=hf))
    ops = after_first(a.walk.ops)
    (gate,) = [op for op in ops if op.attrs.get("role") == "router"]
    assert gate.attrs["ascend_class"] == "AscendGateLinear" and gate.attrs["params_dtype"] == "torch.float32"
    (cast,) = [op for op in ops if op.kind == "cast" and op.path == gate.path]
    assert cast.file == "vllm_ascend/ops/fused_moe/gate_linear.py" and cast.scope == "AscendGateLinear.forward"
    assert "x = x.to(torch.float32)" in _line(session, cast)
    assert cast.steady and cast.condition is None and cast.attrs["dtype"] == "torch.float32"
    assert gate.inputs == cast.outputs and ops.index(cast) < ops.index(gate)
    md = render(a, "md", lang="en")
    assert any(line.startswith("cast") and "→ torch.float32" in line and "gate_linear.py:60" in line
               for line in md.splitlines())
    h, e = a.shapes.dims["hidden_size"], a.shapes.dims["num_experts"]
    model = a.steps["prefill"]
    n = model.n
    assert model.step.costs[gate.id].bytes == (h * e + n * (h + e)) * 4
    assert model.step.costs[cast.id].bytes == n * h * (a.shapes.dtype_bytes + 4)
    stub = _report_opp(a, "router_experts", "MiniMaxM2MoE.forward")["interface"]["stub"]
    assert f"router_weight: torch.Tensor [num_experts={e}, hidden_size={h}], float32" in stub
    assert f"hidden_states: torch.Tensor [num_tokens, hidden_size={h}], model dtype" in stub


def test_a_router_the_model_builds_in_fp32_is_costed_in_fp32(session, hf):
    """MiMo-V2-Flash's gate is a plain `nn.Linear(hidden, n_routed_experts, dtype=self.gate_dtype)` with
    gate_dtype float32 (the config's moe_router_dtype, default "float32"), its input cast in the model's forward
    (`hidden_states.to(self.gate_dtype)`): the cast shows in the sequence, the GEMM's sizes and dtype come from
    the constructor's arguments (so the router + experts saving is costed), and the interface says fp32."""
    a = analyze_in(session, "MiMoV2FlashForCausalLM", Options(config=str(MIMO), hf_root=hf))
    gates = [op for op in after_first(a.walk.ops) if op.path.endswith("mlp.gate") and op.kind == "matmul"]
    h, e = a.shapes.dims["hidden_size"], a.shapes.dims["num_experts"]
    assert gates and all(g.attrs["params_dtype"] == "torch.float32" for g in gates)
    assert all(g.attrs["values"] == {"input_size": h, "output_size": e} for g in gates)
    casts = [op for op in after_first(a.walk.ops) if op.kind == "cast" and op.file.endswith("mimo_v2.py")]
    assert casts and all(c.attrs.get("dtype") == "torch.float32" and "gate_input = hidden_states.to(self.gate_dtype)"
                         in _line(session, c) for c in casts)
    md = render(a, "md", lang="en")
    assert any(line.startswith("cast") and "mimo_v2.py:197" in line for line in md.splitlines())
    o = _report_opp(a, "router_experts", "MiMoV2MoE.forward")
    assert o["benefit"]["numbers"], o["benefit"]
    assert f"router_weight: torch.Tensor [num_experts={e}, hidden_size={h}], float32" in o["interface"]["stub"]


def test_a_router_in_the_models_dtype_is_said_so(session, hf):
    """Qwen3-MoE's gate is a ReplicatedLinear built with the model's dtype: no fp32 said for it."""
    a = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    stub = _report_opp(a, "router_experts", "Qwen3MoeSparseMoeBlock.forward")["interface"]["stub"]
    assert "router_weight: torch.Tensor [num_experts, hidden_size], model dtype (bf16/fp16)" in stub
    assert "float32" not in stub.split("NPU notes")[0]


@pytest.mark.parametrize("arch, config, rows", [
    # LongCat-Flash: the MoE reads the copy of the hidden states taken after the first post-attention norm
    # (longcat_flash.py:450-456, `hidden_states.clone()`), the tensor added at :476 is mlps[1]'s output after
    # the second attention (:464-474): different inputs, no shared expert
    ("LongcatFlashForCausalLM", "longcat-flash.json", {}),
    ("LongcatFlashForCausalLM", None, {}),
    # the routed output added to the residual: no shared branch at all
    ("DbrxForCausalLM", None, {}),
    ("PhiMoEForCausalLM", None, {}),
    # a shared MLP whose first GEMM reads what the experts read, added to their output in the model's code
    ("Step3TextForCausalLM", None, {"shared_routed@Step3TextDecoderLayer.forward": ["gate_up_proj", "experts", "add"]}),
    ("HunYuanMoEV1ForCausalLM", None, {"shared_routed@HunYuanMoEV1Moe.forward": ["gate_up_proj", "experts", "add"]}),
    # (the MoE reads `hidden_states.clone()` of what the shared MLP reads: a copy, looked through)
    ("GraniteMoeHybridForCausalLM", None,
     {"shared_routed@GraniteMoeHybridMambaDecoderLayer.forward": ["experts", "input_linear", "add#2"]}),
    # shared experts handed to the MoE layer (shared_experts=...)
    ("DeepseekV3ForCausalLM", None, {"shared_routed@DeepseekV2MLP.forward": ["experts", "layer.gate_up_proj"]}),
    ("Qwen2MoeForCausalLM", None,
     {"shared_routed@Qwen2MoeMLP.forward": ["experts", "layer.gate_up_proj", "layer.expert_gate"]}),
    ("Qwen3NextForCausalLM", None,
     {"shared_routed@Qwen2MoeMLP.forward": ["experts", "layer.gate_up_proj", "layer.expert_gate", "experts#2",
                                            "layer.gate_up_proj#2", "layer.expert_gate#2"]}),
])
def test_shared_and_routed_experts_read_the_same_input(session, hf, arch, config, rows):
    """shared_routed (patterns/moe/shared_routed.yaml): the routed experts' output added to a shared branch is a
    row only where that branch's first GEMM reads what the experts read (dataflow, views and copies looked
    through) and the add takes what the branch computes from it (its GEMMs, activation, gate)."""
    a = analyze_in(session, arch, Options(hf_root=hf, config=str(FIXTURES / "configs" / config) if config else None))
    # each kind of layer numbers its copy of an op (`experts#2`): the ops by name, whatever the kinds
    def names(ids):
        return sorted({re.sub(r"#\d+$", "", i) for i in ids})

    got = {o.id: [i.split(":")[1] for i in o.ops] for o in a.opportunities if o.scenario == "shared_routed"}
    assert {k: names(v) for k, v in got.items()} == {k: names(v) for k, v in rows.items()}
