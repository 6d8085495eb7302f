"""What really runs on Ascend (issue 33), on the released 0.30 pair: the model classes vllm-ascend registers for
an architecture, MLA op by op, the MoE runner as it runs, native fallbacks as the vector work they are."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import Options, analyze_in, render
from fusion_analyze.catalog import kernel_covers

from .conftest import validate_report


def _text(session, file: str, line: int) -> str:
    root = session.vllm.root if file.startswith("vllm/") else session.ascend.root
    return (root / file).read_text().splitlines()[line - 1]


def test_model_vllm_ascend_registers_is_walked_in_its_own_class(session, hf):
    """DeepseekV4ForCausalLM: vllm_ascend/models/__init__.py registers AscendDeepseekV4ForCausalLM; every op of
    the decoder layer comes from vllm_ascend (its model and what it calls), none from vLLM's CUDA model."""
    a = analyze_in(session, "DeepseekV4ForCausalLM", Options(hf_root=hf))
    layer = [op for op in a.walk.ops if op.section == "layer"]
    # the layer's own code is vllm_ascend's; what it calls may be a vLLM helper (vllm/v1/attention/ops/pcp.py, the
    # forward_native of a vLLM activation its shared experts run: counted apart, as the layer's op above them)
    own_code = [op for op in layer if not op.attrs.get("native_of")]
    assert own_code and sum(op.file.startswith("vllm_ascend/") for op in own_code) > 0.8 * len(own_code)
    own = [op for op in layer if op.scope.startswith("DeepseekV4DecoderLayer.")]
    assert own and all(op.file == "vllm_ascend/models/deepseek_v4/model.py" for op in own), \
        sorted({op.file for op in own})
    assert not any("/nvidia/" in op.file for op in a.walk.ops)
    assert a.report["locations"]["model"]["class"] == "AscendDeepseekV4ForCausalLM"
    assert a.report["locations"]["decoder_layer"]["file"] == "vllm_ascend/models/deepseek_v4/model.py"
    # the registration is evidence, at its line
    ev = [e for e in a.location.verification if e.file == "vllm_ascend/models/__init__.py"]
    assert ev and '"DeepseekV4ForCausalLM"' in _text(session, ev[0].file, ev[0].line)
    # its own fused kernels, each an op at the line that calls it, and known to the catalog
    kernels = {k.name: k for op in layer for k in op.kernels}
    for name in ("torch.ops._C_ascend.npu_hc_pre_v2", "torch.ops._C_ascend.npu_hc_post",
                 "torch.ops._C_ascend.npu_rms_norm_cast"):
        assert name in kernels, name
        assert name.rsplit(".", 1)[-1] + "(" in _text(session, kernels[name].file, kernels[name].line)
        assert kernel_covers(name), name
    gating = [k for op in a.walk.ops for k in op.kernels if k.name == "torch.ops._C_ascend.moe_gating_top_k_hash"]
    assert gating and kernel_covers(gating[0].name) >= {"topk"}
    # a kernel of its own mixes residual streams: it is no add + RMSNorm, attention or MoE combine
    claimed = [o.id for o in a.opportunities if o.status.value != "open" and any(
        "npu_hc_pre" in str(e) or "npu_hc_post" in str(e) for e in o.evidence)]
    assert not claimed
    md = render(a, "md", lang="en")
    assert "/nvidia/" not in md.split("### 2.")[1].split("### 3.")[0]
    validate_report(a.report)


def test_triton_launch_is_one_kernel_and_shape_arithmetic_no_op(session, hf):
    """`muls_add_kernel[(num_programs,)](...)` (vllm_ascend/ops/triton/mul_add.py) is one device kernel at the
    launch; `(n_elements + BLOCK_SIZE - 1) // BLOCK_SIZE` on `x.shape[-1]` and `x.numel()` is integer arithmetic."""
    a = analyze_in(session, "DeepseekV4ForCausalLM", Options(hf_root=hf))
    in_wrapper = [op for op in a.walk.ops if op.file == "vllm_ascend/ops/triton/mul_add.py"]
    launches = [op for op in in_wrapper if op.name == "muls_add_kernel"]
    assert launches and all(op.kind == "kernel" for op in launches)
    assert launches[0].kernels[0].name == "triton:vllm_ascend.ops.triton.mul_add.muls_add_kernel"
    assert "muls_add_kernel[" in _text(session, launches[0].file, launches[0].line)
    assert not [op for op in in_wrapper if op.kind in ("add", "sub", "mul", "div")]


def test_mla_is_walked_op_by_op_in_the_ascend_implementation(session, hf):
    """DeepSeek-V3: AscendMLAImpl.forward (behind torch.ops.vllm.mla_forward) walked as code, its __init__ bound
    to the call in vLLM's MLAAttention.__init__ (`impl_cls(..., **extra_impl_args)`), so each projection,
    norm, cache write, attention kernel and batched matmul is an op at its mla_v1.py call line; the kv norm +
    RoPE + cache write is reported fused by npu_kv_rmsnorm_rope_cache."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf))
    # the preset's layers are two kinds (dense first_k_dense_replace = 3, then MoE), the first layer (no residual
    # yet) walked apart: all three run the MLA layer
    first, after = "the loop's initial value (the first layer)", "the previous layer's output"
    assert [kd["differs"] for kd in a.walk.layer_kinds] == [
        {"mlp": "DeepseekV2MLP", "residual": first}, {"mlp": "DeepseekV2MLP", "residual": after}, {"mlp": "DeepseekV2MoE"}]
    assert [kd["layers"] for kd in a.walk.layer_kinds] == [[0], [1, 2], list(range(3, 61))]
    for k in (0, 1, 2):
        mla = [op for op in a.walk.ops if op.file == "vllm_ascend/attention/mla_v1.py" and op.attrs.get("layer_kind") == k]
        by_name = {}
        for op in mla:
            by_name.setdefault(op.name if not op.layer_class else op.path.rsplit(".", 1)[-1], op)
        for name, kind in (("fused_qkv_a_proj", "matmul"), ("q_a_layernorm", "rmsnorm"), ("kv_b_proj", "matmul"),
                           ("o_proj", "matmul"), ("npu_kv_rmsnorm_rope_cache", "kernel"),
                           ("npu_transpose_batchmatmul", "kernel"), ("npu_fused_infer_attention_score", "kernel")):
            assert name in by_name, (k, name)
            op = by_name[name]
            assert op.kind == kind, (k, name, op.kind)
            statement = " ".join(_text(session, op.file, op.line + i) for i in range(4))  # a call over several lines
            assert f"{name}(" in statement, name
            assert not _text(session, op.file, op.line).lstrip().startswith("def "), name
        # at the report's deployment on A2 MLAPO is off (enabling_mlapo: no kv-consumer, kv_transfer_config None;
        # enable_fa_quant: no FP8 attention on A2): _mla_preprocess is the path that runs, mla_preprocess_only_decode not
        assert by_name["fused_qkv_a_proj"].steady and not by_name["fused_qkv_a_proj"].attrs.get("other_branch")
        assert not [op for op in mla if op.steady and "mla_prolog" in op.name]
        # use_mha decided: one arm, one MLA layer in each kind
        assert len([op for op in a.walk.ops if op.kind == "mla_attention" and op.attrs.get("layer_kind") == k]) == 1
        # the modules are the model's: DeepseekV2MLAAttention's, handed down through MLAModules and **kwargs
        assert by_name["kv_b_proj"].layer_class == "ColumnParallelLinear"
        assert by_name["o_proj"].layer_class == "RowParallelLinear"
    assert {op.attrs.get("layer_kind") for op in a.walk.ops if op.kind == "mla_attention"} == {0, 1, 2}
    fused = [o for o in a.opportunities if o.scenario == "rmsnorm_rope" and o.scope.startswith("AscendMLAImpl.")]
    assert fused and all(o.status.value == "fused_by_ascend_kernel" for o in fused)
    assert all("npu_kv_rmsnorm_rope_cache" in str(o.evidence) for o in fused)
    # the one kernel is that scenario, not a q/k norm + RoPE of attention heads
    assert not [o for o in a.opportunities if o.scenario == "qknorm_rope" and "npu_kv_rmsnorm_rope_cache" in str(o.evidence)]
    validate_report(a.report)


def test_a_native_fallback_is_walked_into_its_vector_work(session, hf):
    """Llama with a Llama-3.1 config.json: Llama3RotaryEmbedding has no Ascend class, so each layer runs vLLM's
    forward_native. Its PyTorch ops are listed under the rope op (index_select, the multiplies and adds, cat),
    the vector chain on them is open with the kernels it removes, the note names the registered Ascend class
    whose kernel computes the same math, and the CUDA column says what vLLM runs there: at its default
    compilation (Inductor, custom ops off: vllm/config/vllm.py) the same forward_native, fused by Inductor;
    forward_cuda's kernel only where custom_ops enables rotary_embedding."""
    from pathlib import Path

    config = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "llama-3.1-8b.json")
    a = analyze_in(session, "LlamaForCausalLM", Options(config=config, hf_root=hf))
    ops = a.walk.ops
    i = next(i for i, op in enumerate(ops) if op.kind == "rope")
    rope = ops[i]
    assert rope.layer_class == "Llama3RotaryEmbedding" and "forward_native" in rope.attrs["native"]
    native = [op for op in ops if op.attrs.get("native_of") == "rotary_emb (Llama3RotaryEmbedding)"]
    assert native and ops[i + 1] is native[0]  # right after the rope op, nested under it
    kinds = [op.kind for op in native]
    assert "gather" in kinds and kinds.count("mul") >= 4 and "sub" in kinds and "add" in kinds and "cat" in kinds
    gather = next(op for op in native if op.kind == "gather")
    assert "index_select(" in _text(session, gather.file, gather.line)
    assert rope.attrs["native_ops"] >= 10  # device kernels surely launched, views and casts apart
    (chain,) = [o for o in a.opportunities if o.scenario == "vector_elementwise_chain"
                and all(op_id in {op.id for op in native} for op_id in o.ops)]
    assert chain.status.value == "open" and chain.scope == rope.scope
    assert f"launches {rope.attrs['native_ops']} separate PyTorch kernels" in chain.note
    assert "AscendRotaryEmbedding" in chain.note and "_compute_inv_freq" in chain.note
    assert chain.cuda["status"] == "fused_by_inductor"
    ev = chain.cuda["evidence"]
    assert ev["file"] == "vllm/config/vllm.py" and 'custom_ops.append("none")' in _text(session, ev["file"], ev["line"])
    assert chain.cuda["kernels_if_enabled"] == ["vllm._custom_ops.rotary_embedding"]
    numbers = a.benefits[chain.id].numbers  # the kernels a fused one removes, per scenario
    assert all(n["per_layer"]["launches"] >= 1 for n in numbers.values()) and numbers
    md = render(a, "md", lang="en")
    assert "  · gather      index_select" in md
    validate_report(a.report)


_MOE_ORDER = ["moe", "moe_gating", "moe_experts", "moe_dispatch", "expert_gemm", "expert_act", "expert_gemm",
              "moe_combine"]


def _moe_sequence(a):
    """The MoE layer's ops in walk order, from its router GEMM (or the layer op) to its join."""
    ops = [op for op in a.walk.ops if op.steady]
    i = next(i for i, op in enumerate(ops) if op.kind == "moe")
    # the router GEMM: run by the runner (role router), or by the model right before (`self.gate(h)`)
    start = i - 1 if i and (ops[i - 1].attrs.get("role") == "router"
                            or ops[i - 1].kind == "matmul" and ops[i - 1].name in ("gate", "router")) else i
    end = next((j for j in range(i, len(ops)) if ops[j].kind == "moe_join"), None)
    return ops[start:(end + 1) if end is not None else i + len(_MOE_ORDER)]


import pytest  # noqa: E402


@pytest.mark.parametrize("arch", ["Qwen3MoeForCausalLM", "Glm4MoeForCausalLM", "MixtralForCausalLM", "Qwen2MoeForCausalLM"])
def test_the_moe_runner_as_it_runs(session, hf, arch):
    """The MoE layer's ops at the lines that call their kernels, in the order AscendMoERunner runs them: the
    router GEMM, the gating kernel, the routed experts' steps, then the shared experts (where the model hands
    them over), then the join; no prepare / finalize step at DP 1 without EP or SP (their branches run no
    kernel); router_experts and shared_routed open with the separate kernels named."""
    a = analyze_in(session, arch, Options(hf_root=hf))
    seq = _moe_sequence(a)
    kinds = [op.kind for op in seq[1:] if op.attrs.get("role") not in ("router", "shared_expert")]
    assert kinds[:len(_MOE_ORDER)] == _MOE_ORDER, kinds
    assert not [op for op in a.walk.ops if op.kind in ("moe_prepare", "moe_finalize")]
    for op in seq:  # each at a call, none at the definition of the method that holds it
        text = _text(session, op.file, op.line).lstrip()
        assert not text.startswith("def "), (op.kind, op.file, op.line)
    assert seq[0].kind == "matmul" and (seq[0].attrs.get("role") == "router" or seq[0].name == "gate")
    shared = [i for i, op in enumerate(seq) if op.attrs.get("role") == "shared_expert"]
    joins = [i for i, op in enumerate(seq) if op.kind == "moe_join"]
    assert bool(joins) == bool(shared)  # the join of the shared experts' output: none without shared experts
    if shared:  # routed, then shared, then the join
        combine = max(i for i, op in enumerate(seq) if op.kind == "moe_combine")
        assert combine < min(shared) and joins and max(shared) < joins[0]
        # run by AscendSharedExperts (part1 / apply_activation / part2), not by the model's MLP forward
        assert all(seq[i].file == "vllm_ascend/ops/fused_moe/shared_experts.py" for i in shared)
        names = [seq[i].name if not seq[i].layer_class else seq[i].path.rsplit(".", 1)[-1] for i in shared]
        assert names[:3] == ["gate_up_proj", "act_fn", "down_proj"]
        gate = [seq[i] for i in shared if seq[i].path.endswith("expert_gate")]
        # the sigmoid expert gate only where the shared MLP has one (Qwen2/Qwen3-MoE's `expert_gate=`; GLM none)
        assert bool(gate) == arch.startswith(("Qwen2Moe", "Qwen3Moe"))
    (re,) = [o for o in a.opportunities if o.scenario == "router_experts"]
    assert re.status.value == "open" and "separate kernels" in (re.note or ""), re.note
    for o in [o for o in a.opportunities if o.scenario == "shared_routed"]:
        assert o.status.value == "open" and "separate kernels" in (o.note or "")


def test_mixtral_experts_are_a_merged_gate_up_and_a_swiglu_kernel(session, hf):
    """Inside Mixtral's routed experts: the first grouped GEMM runs on w13 (gate and up stacked): gate_up_merge
    fused in the model; the activation step is npu_swiglu: silu_mul fused by an Ascend kernel."""
    a = analyze_in(session, "MixtralForCausalLM", Options(hf_root=hf))
    rows = {o.scenario: o for o in a.opportunities if o.scope.startswith("MixtralMoE.")}
    assert rows["gate_up_merge"].status.value == "fused_in_model"
    assert "gemm1" in str(rows["gate_up_merge"].evidence)
    assert rows["silu_mul"].status.value == "fused_by_ascend_kernel"
    assert "torch_npu.npu_swiglu" in str(rows["silu_mul"].evidence)


def test_a_native_activation_inside_the_experts_is_walked(session, hf):
    """GPT-OSS's experts activate with swigluoai: on Ascend the MoE MLP calls SwigluOAIAndMul.forward_native
    (vllm_ascend/ops/activation.py), whose PyTorch ops (clamps, sigmoid, multiplies, add) are listed under the
    activation step, each at its line in vLLM's activation.py, and the chain on them is open with a note."""
    a = analyze_in(session, "GptOssForCausalLM", Options(hf_root=hf))
    # the preset's layers are two kinds, told apart by the sliding window (`if self.layer_idx % 2 == 0`):
    # every layer is a MoE layer; the first layer (no residual yet) walked apart
    kinds = a.walk.layer_kinds
    assert [kd["layers"] for kd in kinds] == [[0], list(range(1, 36, 2)), list(range(2, 36, 2))]
    assert [sorted(kd["differs"]) for kd in kinds] == [["attn.attn.sliding_window", "residual"],
                                                       ["attn.attn.sliding_window"],
                                                       ["attn.attn.sliding_window", "residual"]]
    for k in (0, 1, 2):
        ops = [op for op in a.walk.ops if op.attrs.get("layer_kind") == k]
        i = next(i for i, op in enumerate(ops) if op.kind == "expert_act")
        native = [op for op in ops if op.attrs.get("native_of") == "act (SwigluOAIAndMul)"]
        assert native and ops[i + 1] is native[0], k
        assert {op.file for op in native} == {"vllm/model_executor/layers/activation.py"}
        assert {"sigmoid", "mul", "add"} <= {op.kind for op in native}
        rows = [o for o in a.opportunities if set(o.ops) & {op.id for op in native}]
        assert rows and all(o.status.value == "open" and "native forward of act (SwigluOAIAndMul)" in (o.note or "")
                            for o in rows), k
        # the experts part is at the runner's call of the comm method, not at a kernel of one of its steps
        (experts,) = [op for op in ops if op.kind == "moe_experts"]
        assert "fused_experts(" in _text(session, experts.file, experts.line)
    assert len([op for op in a.walk.ops if op.kind == "moe_experts"]) == 3  # one per kind, none outside them


def test_the_cuda_column_reads_what_vllm_runs_for_a_moe_layer(session, hf):
    """Item 5, the MoE router: on CUDA vLLM builds FusedTopKRouter (no Ascend factory patch), whose
    _compute_routing calls fused_topk, which calls the function dispatch_topk_softmax_func returns off ROCm
    (vllm_topk_softmax): its `_moe_C.topk_softmax` kernel is the CUDA column of gate_topk, with the test it runs
    under. Handing the gate or the shared experts to the layer is placement on CUDA too; what the experts run
    on CUDA is not read, so their rows say unknown, not open."""
    a = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    rows = {o.id: o for o in a.opportunities}
    gate = rows["gate_topk@Qwen3MoeSparseMoeBlock.forward"]
    assert gate.status.value == "fused_by_ascend_kernel"
    # every kernel that fuses it on some branch, each with its test: softmax scoring first (fewest tests)
    assert gate.cuda["status"] == "fused_by_kernel" and gate.cuda["kernels"][0] == "torch.ops._moe_C.topk_softmax"
    assert set(gate.cuda["kernels"]) <= {"torch.ops._moe_C.topk_softmax", "torch.ops._moe_C.topk_sigmoid"}
    assert gate.cuda["runs"] == "FusedTopKRouter._compute_routing"
    assert 'torch.ops._moe_C.topk_softmax runs when scoring_func == "softmax"' in gate.cuda["conditions"]
    routers = [op for op in a.walk.ops if op.kind == "moe_gating"]  # one per kind (the first layer walked apart)
    assert len(routers) == len(a.walk.layer_kinds) == 2
    assert {r.layer_class for r in routers} == {"AscendFusedTopKRouter"}  # the Ascend walk is unchanged
    for oid in ("router_experts@Qwen3MoeSparseMoeBlock.forward", "shared_routed@Qwen3MoeMLP.forward"):
        assert rows[oid].cuda["status"] == "open" and "separate kernels" in rows[oid].cuda["note"]
    act = rows["silu_mul@Qwen3MoeSparseMoeBlock.forward"]
    assert act.cuda["status"] == "unknown" and "not read" in act.cuda["note"]
    validate_report(a.report)


def test_the_cuda_column_on_a_cuda_walk_reads_the_ops_kernels(real_tree, hf):
    """Without vllm-ascend the walk is vLLM's CUDA path: the router's op holds topk_softmax (followed through
    the dispatcher's returned function), and the CUDA column of gate_topk says that kernel fuses it."""
    from fusion_analyze.analysis.session import Session

    cuda = Session.open(str(real_tree("vllm==0.30.0")), None)
    a = analyze_in(cuda, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    routers = [op for op in a.walk.ops if op.kind == "moe_gating"]  # one per kind (the first layer walked apart)
    assert len(routers) == len(a.walk.layer_kinds) == 2
    for router in routers:
        assert "torch.ops._moe_C.topk_softmax" in {k.name for k in router.kernels}
        assert "topk_softmax(" in (cuda.vllm.root / router.file).read_text().splitlines()[router.line - 1]
    (gate,) = [o for o in a.opportunities if o.scenario == "gate_topk"]
    assert gate.cuda["status"] == "fused_by_kernel" and gate.cuda["kernels"][0] == "torch.ops._moe_C.topk_softmax"


def test_inductor_fuses_plain_element_wise_chains_on_cuda(session, hf):
    """Item 5, Inductor: vLLM's default configuration compiles with Inductor and turns custom ops off
    (vllm/config/vllm.py `custom_ops.append("none")`), so a chain of the model's plain element-wise ops inside
    one piecewise graph is fused there by generated code: Granite's residual scale + add after attention.
    Nothing across attention or a GEMM is credited (Granite's embedding scale and the first residual add are
    no chain at all: the add's other operand comes through attention)."""
    a = analyze_in(session, "GraniteForCausalLM", Options(hf_root=hf))
    chains = [o for o in a.opportunities if o.scenario == "vector_elementwise_chain"]
    assert not [o for o in chains if any(op.section == "prologue" for op in a.walk.ops if op.id in o.ops)]
    within = [o for o in chains if o.cuda["status"] == "fused_by_inductor"]
    assert within
    ops = a.walk.ops
    for o in within:
        ev = o.cuda["evidence"]
        assert 'custom_ops.append("none")' in _text(session, ev["file"], ev["line"])
        first = o.matches[0].op_list  # the match the column is read from: no attention or GEMM inside it
        kinds = {op.kind for op in ops[ops.index(first[0]):ops.index(first[-1]) + 1]}
        assert not kinds & {"attention", "matmul"}, kinds