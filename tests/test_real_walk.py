"""The walker on the primary pair (vLLM 0.30.0 + vllm-ascend 0.30.0rc2) and a sweep of the registry."""

from __future__ import annotations

import re
import sys

import pytest

from fusion_analyze.locate.registry import TEXT_TABLE
from fusion_analyze.analysis.pipeline import analyze_in
from fusion_analyze.analysis.session import Session

from .completeness import figures


@pytest.fixture(scope="module")
def ascend(real_tree):
    return Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))


@pytest.fixture(scope="module")
def cuda(real_tree):
    return Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")), "cuda")


def _layer(a):
    return [op for op in a.walk.ops if op.section == "layer" and op.steady and op.kind not in ("view", "cast")]


QWEN3_LAYER = [
    ("add_rmsnorm", "input_layernorm", "RMSNorm"),
    ("matmul", "qkv_proj", "QKVParallelLinear"),
    ("split", "split", None),
    ("rmsnorm", "q_norm", "RMSNorm"),
    ("rmsnorm", "k_norm", "RMSNorm"),
    ("rope", "rotary_emb", "RotaryEmbedding"),
    ("attention", "attn", "Attention"),
    ("matmul", "o_proj", "RowParallelLinear"),
    ("allreduce", "o_proj.allreduce", None),  # RowParallelLinear.forward's own all-reduce (linear.py)
    ("add_rmsnorm", "post_attention_layernorm", "RMSNorm"),
    ("matmul", "gate_up_proj", "MergedColumnParallelLinear"),
    ("silu_mul", "act_fn", "SiluAndMul"),
    ("matmul", "down_proj", "RowParallelLinear"),
    ("allreduce", "down_proj.allreduce", None),
]


def test_qwen3_cuda_sequence_at_model_call_sites(cuda):
    a = analyze_in(cuda, "Qwen3ForCausalLM")
    layer = _layer(a)
    assert [(op.kind, op.name, op.layer_class) for op in layer] == QWEN3_LAYER
    where = [(op.file.rsplit("/", 1)[-1], op.line) for op in layer]
    assert where == [
        ("qwen3.py", 237), ("qwen3.py", 158), ("qwen3.py", 159), ("qwen3.py", 162), ("qwen3.py", 165),
        ("qwen3.py", 167), ("qwen3.py", 168), ("qwen3.py", 169), ("linear.py", 1776), ("qwen3.py", 244),
        ("qwen2.py", 112), ("qwen2.py", 113), ("qwen2.py", 114), ("linear.py", 1776),
    ]


def test_qwen3_ascend_sequence_kernels_and_patch(ascend):
    a = analyze_in(ascend, "Qwen3ForCausalLM")
    layer = _layer(a)
    assert [(op.kind, op.name, op.layer_class) for op in layer] == QWEN3_LAYER
    by_name = {op.name: op for op in layer if op.layer_class}
    assert [k.name for k in by_name["input_layernorm"].kernels] == ["torch.ops._C_ascend.npu_add_rms_norm_bias"]
    assert by_name["input_layernorm"].kernels[0].file == "vllm_ascend/ops/layernorm.py"
    assert by_name["input_layernorm"].attrs["ascend_class"] == "AscendRMSNorm"
    assert [k.name for k in by_name["act_fn"].kernels] == ["torch_npu.npu_swiglu"]
    assert by_name["act_fn"].attrs["ascend_class"] == "AscendSiluAndMul"
    assert "torch_npu.npu_rms_norm" in [k.name for k in by_name["q_norm"].kernels]
    # each linear names its GEMM kernel (AscendUnquantizedLinearMethod.apply: the explicit AscendLinearBase
    # __init__ chain builds it), and the row-parallel all-reduce is an op at RowParallelLinear.forward's line
    # under tp_size > 1: no custom parallel op by default (get_parallel_op's tuple, the AscendConfig defaults)
    for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        assert [k.name for k in by_name[name].kernels] == ["torch.ops.vllm.unquantized_gemm"], name
        assert by_name[name].kernels[0].file == "vllm_ascend/ops/linear.py"
    reduce = [op for op in layer if op.kind == "allreduce"]
    assert [(op.attrs["inside"], op.file, op.line, op.condition) for op in reduce] == [
        ("o_proj", "vllm/model_executor/layers/linear.py", 1776, "self.tp_size > 1"),
        ("down_proj", "vllm/model_executor/layers/linear.py", 1776, "self.tp_size > 1")]
    assert "tensor_model_parallel_all_reduce(output_parallel)" in (
        ascend.vllm.root / "vllm/model_executor/layers/linear.py").read_text().splitlines()[1775]
    assert [k.name for k in reduce[0].kernels] == ["torch.ops.vllm.all_reduce"]
    ops = {o.scenario: o for o in a.opportunities}
    assert ops["allreduce_norm"].evidence[0]["file"] == "vllm/model_executor/layers/linear.py"
    # On Ascend, vllm_ascend/patch/worker/patch_qwen3vl.py replaces Qwen3Attention.forward: walked and said.
    att = a.walk.locations["attention"]
    assert att.patched_by == "vllm_ascend/patch/worker/patch_qwen3vl.py:65"
    assert by_name["qkv_proj"].file == "vllm_ascend/patch/worker/patch_qwen3vl.py"
    assert by_name["input_layernorm"].file == "vllm/model_executor/models/qwen3.py"
    assert (by_name["gate_up_proj"].file, by_name["gate_up_proj"].line) == ("vllm/model_executor/models/qwen2.py", 112)
    assert a.walk.repeat == "config.num_hidden_layers"
    assert any(k.name.endswith("npu_fused_infer_attention_score") for k in by_name["attn"].kernels)


@pytest.mark.parametrize("query, attn_kind, moe_cls", [
    ("Qwen3MoeForCausalLM", "attention", "Qwen3MoeSparseMoeBlock"),
    ("DeepSeek-V3", "mla_attention", "DeepseekV2MoE"),
    ("GLM-4.7", "attention", "Glm4MoE"),
])
def test_moe_models_attention_router_experts(ascend, query, attn_kind, moe_cls):
    a = analyze_in(ascend, query)
    layer = _layer(a)
    kinds = [op.kind for op in layer]
    assert attn_kind in kinds
    assert "moe" in kinds
    routers = [op for op in layer if op.attrs.get("role") == "router" or op.name == "gate"]
    assert routers and kinds.index("matmul", kinds.index(attn_kind)) <= layer.index(routers[0]) < kinds.index("moe")
    assert a.walk.locations["moe"].cls == moe_cls


def test_deepseek_dense_first_layers_are_an_alternative(ascend):
    a = analyze_in(ascend, "DeepseekV3ForCausalLM")
    alt = next(x for x in a.walk.alternatives if x["path"] == "model.layers.mlp")
    assert alt["chosen"] == "DeepseekV2MoE"
    assert any("first_k_dense_replace" in cond for _name, cond in alt["others"])
    shared = [op for op in a.walk.ops if op.attrs.get("role") == "shared_expert"]
    assert shared, "shared experts are walked"


def test_sweep_text_generation_architectures(ascend):
    """Every architecture analyses; the share with a complete decoder layer (tests/completeness.py) holds; no
    printed condition is a literal. The three releases' figures come from test_real_corpus.py."""
    text = [e.architecture for e in ascend.resolver.entries if e.table == TEXT_TABLE]
    reports, literal = {}, []
    for arch in text:
        a = analyze_in(ascend, arch)  # must not raise
        literal += [f"{arch}: {c}" for c in _printed_conditions(a.report) if _LITERAL.search(c)]
        reports[arch] = a.report
    good, total, bad = figures(reports)
    print(f"\nsweep vLLM 0.30.0: {good}/{total} architectures ({good / total:.1%}) yield a complete decoder "
          f"layer; not: {bad}", file=sys.stderr)
    assert good / total >= 0.95
    assert literal == []  # a condition that is a constant was never offered to the evaluator (issue 20)


def test_token_mixers_are_recognised_by_their_interface(ascend, cuda):
    """AttentionLayerBase subclasses are attention, Mamba / linear-attention mixers are ssm / linear_attention
    (by their mamba_type), each an op at its call with its own code walked under it."""
    def mixer(arch):
        a = analyze_in(ascend, arch)
        return [(op.kind, op.layer_class, op.file, op.line) for op in a.walk.ops if op.attrs.get("mixer")]

    # vllm-ascend registers its own MiniMaxM3SparseForCausalLM: its layer's attention is walked there
    assert ("attention", "MiniMaxM3SparseAttention", "vllm_ascend/models/minimax_m3/minimax_m3.py", 1081) in mixer("MiniMaxM3SparseForCausalLM")
    assert ("linear_attention", "QwenGatedDeltaNetAttention", "vllm/model_executor/models/qwen3_next.py", 568) in mixer("Qwen3NextForCausalLM")
    assert ("ssm", "MambaMixer", "vllm/model_executor/models/mamba.py", 96) in mixer("MambaForCausalLM")
    # a class returned by a selector function (`_select_dsv4_attn_cls(vllm_config)(...)`): undecided, listed;
    # `attention_config.backend` is the deployment's (AttentionConfig's default None: the returns for an explicit
    # backend are ruled out), the device capability (SM12) is not known
    dsv4 = analyze_in(cuda, "DeepseekV4ForCausalLM")  # vLLM's model (on Ascend, vllm-ascend's own class runs)
    assert [op.kind for op in dsv4.walk.ops if op.attrs.get("mixer")] == ["attention"]
    alt = next(x for x in dsv4.walk.alternatives if x["path"] == "model.layers.attn")
    assert alt["decided"] is False and alt["others"]
    assert all("device_capability" in cond and "backend" not in cond for _cls, cond in alt["others"])
    # layers appended to a local list, then nn.ModuleList(layers); next(cycle([...])) blocks (Zamba2)
    zamba = analyze_in(ascend, "Zamba2ForCausalLM")
    assert zamba.walk.locations["decoder_layer"].cls == "Zamba2HybridLayer"
    assert {"ssm", "attention"} <= {op.kind for op in zamba.walk.ops if op.section == "layer"}


def test_a_language_model_built_at_run_time_says_why_it_is_unknown(ascend):
    """init_vllm_registered_model(hf_config=config.text_config): the registry's class for the configuration's
    architectures; without them, the unknown says what would decide it."""
    a = analyze_in(ascend, "HCXVisionV2ForCausalLM")
    why = [u["reason"] for u in a.walk.unknowns if u["name"] == "self.language_model.model"]
    assert why and "init_vllm_registered_model from text_config.architectures" in why[0]


_LITERAL = re.compile(r"(^|\band |\bor |\bnot \(|when )\s*(True|False|None)\b")


def _printed_conditions(report: dict):
    """Every condition a report prints: ops', kernels', all-reduces' and opportunities'."""
    for op in report["ops"]:
        yield from [c for c in [op["condition"], op["attrs"].get("all_reduce")] if c]
        yield from [k["condition"] for k in op["kernels"] if k["condition"]]
    for o in report["opportunities"]:
        yield from o["conditions"]


@pytest.fixture(scope="module")
def v34(real_tree):
    return Session.open(str(real_tree("vllm==0.34.0")), None)


@pytest.mark.parametrize("arch, layer, mixer", [
    ("BeamForCausalLM", "BeamDecoderLayer", "attention"),  # for index in range(...): self.layers[index](...)
    ("ZayaForCausalLM", "ZayaDecoderLayer", "attention"),  # nn.ModuleList(Layer(...) for i in range(n))
    ("MiniMaxM3SparseForCausalLM", "MiniMaxM3DecoderLayer", "attention"),  # layer.forward_input_norm(...)
    ("FlintForCausalLM", "FlintDecoderLayer", "attention"),  # unified_attention_with_output(q, k, v, out, name)
])
def test_layer_idioms_of_newer_models(v34, arch, layer, mixer):
    a = analyze_in(v34, arch)
    assert a.walk.locations["decoder_layer"].cls == layer
    assert mixer in {op.kind for op in a.walk.ops if op.section == "layer"}


def test_a_conditional_expression_decided_by_its_test(ascend):
    """`shared = self.shared_expert(h) if self.replicate_shared_expert and ... else None` (Qwen3-Next,
    qwen3_next.py:252-256): `replicate_shared_expert` is `_should_replicate_misaligned_shared_expert(...)`
    (:161), False without a quantisation group size (:103-104, no quant_config), so `shared` is None and the add
    under `if shared is not None:` (:261) is not walked; the test is no undecided one. (An undecided conditional
    expression keeps its test on what it guards: tests/test_walk_maybe_none.py.)"""
    a = analyze_in(ascend, "Qwen3NextForCausalLM")
    adds = [op for op in a.walk.ops if op.kind == "add" and op.file.endswith("qwen3_next.py") and op.line == 261]
    assert not adds
    assert not [e for e in a.report["undecided"] if "replicate" in e["test"] or "replicated_shared_output" in e["test"]]


def test_an_early_return_conditions_what_follows_and_picks_the_module_built_for_that_path(v34):
    """Dory: `if self.is_attention: out = self.mixer(h); return ...` then `out = self.mixer(h)`. What follows the
    early return runs under `not (self.is_attention)`, where `self.mixer` is the DoryMLP built for that case,
    not the default pick (DoryAttention) walked again."""
    a = analyze_in(v34, "DoryForCausalLM")
    assert a.walk.locations["mlp"].cls == "DoryMLP"
    mlp_ops = [op for op in a.walk.ops if op.section == "layer" and op.path.startswith("backbone.layers.mixer.")
               and op.kind == "matmul" and op.condition and "not (self.is_attention)" in op.condition]
    assert {op.name for op in mlp_ops} >= {"gate_up_proj", "down_proj"}


def test_a_helper_reached_with_other_arguments_is_walked_again_and_an_elif_reads_the_locals(cuda):
    """Kimi's MLA decode calls fused_mla_decode_q_concat_kv_cache_insert on three paths: fp8_ds_mla (ds_mla=True),
    a quantized cache (q_scale_inv=...), the default (q_scale_inv left None). Inside, `fp8_q = q_scale_inv is not
    None` then `if ds_mla: ... elif fp8_q: <fp8 kernel> else: <plain kernel>`: the elif reads the local, and the
    quantized path, whose argument is not None, keeps the fp8 kernel under its own condition. The engine always
    builds vllm_config.cache_config, but its cache_dtype is not decided (EngineArgs resolves `--kv-cache-dtype
    auto` from the checkpoint's quantization config), so the callers' cache-dtype tests stay open."""
    a = analyze_in(cuda, "KimiLinearForCausalLM")  # vLLM's MLA (on Ascend, vllm-ascend's own class runs)
    fp8 = [k for op in a.walk.ops for k in op.kernels if k.name.endswith("decode_q_concat_kv_cache_fp8_insert")]
    assert fp8 and all("is_quantized_kv_cache(self.kv_cache_dtype)" in k.condition for k in fp8)
    assert all('self.kv_cache_dtype == "fp8_ds_mla" and' not in k.condition for k in fp8)
    # the plain kernel runs on the fp8_ds_mla path (ds_mla is not decided), the quantized one (when not fp8_q)
    # and the default one: its condition is the tests they share, then each path's own or-ed (or, past three
    # paths, how many), and each path's condition is kept for placing it on runtime paths
    plain = [k for op in a.walk.ops for k in op.kernels if k.name.endswith("decode_q_concat_kv_cache_insert")]
    for k in plain:
        assert k.condition.startswith("not (attn_metadata_by_layer is None) and num_mqa_tokens > 0")
        assert any("not (is_quantized_kv_cache(self.kv_cache_dtype))" in str(c) for c in k.alts)  # the default path
        assert any('self.kv_cache_dtype == "fp8_ds_mla"' in str(c) and "not (self.kv_cache_dtype" not in str(c)
                   for c in k.alts)
        assert k.paths is None  # runtime paths are read for the Ascend backend only (walk.yaml attention_paths)


def test_the_other_branch_of_an_undecided_test_is_listed_apart(ascend):
    """IQuest-LoopCoder's attention: `if loop_idx == 0:` (the index of the model's own loop over its attention
    modules, a runtime value) runs one attention, else a global and a local one mixed by a gate. The walk
    follows the `if` branch; the `else` branch, which may be the one that runs, is kept with its ops (marked
    `other_branch`) and the report lists it apart; a first-layer-only branch (`residual is None`) is not."""
    from fusion_analyze.analysis.pipeline import render

    a = analyze_in(ascend, "IQuestLoopCoderForCausalLM")
    rel = "vllm/model_executor/models/iquest_loopcoder.py"
    lines = (ascend.vllm.root / rel).read_text().splitlines()
    local = next(n for n, line in enumerate(lines, 1) if "local_attn_output = local_attn(q, k, v)" in line)
    other = [(op.kind, op.name, op.line) for op in a.walk.ops if op.attrs.get("other_branch")]
    assert ("attention", "local_attn", local) in other and ("attention", "global_attn", local - 1) in other
    assert not any(op.steady for op in a.walk.ops if op.attrs.get("other_branch"))
    assert all("not (loop_idx == 0)" in str(op.condition) for op in a.walk.ops if op.attrs.get("other_branch"))
    md = render(a, "md", lang="en")
    section = md.split("The other branch of tests the walk could not decide")[1].split("```")[1]
    assert "local_attn" in section and f"{rel}:{local}" in section
    # the input layernorm's `residual is None` side runs on the first layer only: not an undecided test
    assert not any(op.attrs.get("other_branch") for op in a.walk.ops if op.name == "input_layernorm")
    # the patterns are matched on that side too, in place of the `if` side (the gate's mix of the outputs)
    opps = {o.id: o for o in a.opportunities}
    held = {op.id for op in a.walk.ops if op.attrs.get("other_branch")}
    mixed = [o for o in opps.values() if held & set(o.ops)]
    assert mixed and all(o.conditions[0].startswith("not (loop_idx == 0)") for o in mixed)
    # and what the `if` side runs is still matched on its own (its attention's kernels)
    assert opps["flash_attention@LoopCoderAttention.forward"].conditions[0] == "loop_idx == 0"


def test_hunyuan_v3_hpc_rope_norm_is_off_without_the_hpc_backend(ascend):
    """HunYuan V3's attention builds `self.hpc_rope_norm` only where `HpcRopeNorm.support(...)` holds, a
    classmethod that first asks `vllm_config.attention_config.backend != AttentionBackendEnum.HPC_ATTN`: the
    deployment gives no attention backend (AttentionConfig's default None, as the selector reads it; vllm-ascend
    resets it to None anyway), so it is False and `if self.hpc_rope_norm is not None:` is decided: q_norm,
    k_norm, rope and attention are the sequence, nothing of it is another branch."""
    a = analyze_in(ascend, "HYV3ForCausalLM")
    assert not any(op.attrs.get("other_branch") for op in a.walk.ops if op.file.endswith("hy_v3.py"))
    assert not any("hpc_rope_norm" in op.name for op in a.walk.ops)
    steady = [(op.kind, op.name) for op in a.walk.ops if op.steady and op.file.endswith("hy_v3.py")]
    assert ("rmsnorm", "q_norm") in steady and ("attention", "attn") in steady
    opps = {o.id: o for o in a.opportunities}
    assert not any("hpc_rope_norm" in c for o in opps.values() for c in o.conditions)
    assert "flash_attention@HYV3Attention.forward" in opps


def test_the_other_layer_classes_of_an_undecided_per_layer_choice_are_walked(ascend):
    """NemotronH builds one decoder-layer class per character of `hybrid_override_pattern`, which the defaults
    do not give: the sequence is the default class's (the MoE layer), and the Mamba, MLP and attention layers
    are walked too, as the other branch of that choice, each under its selecting condition, and matched."""
    a = analyze_in(ascend, "NemotronHForCausalLM")
    other = {(op.kind, op.name, op.line, op.condition.split(" and ")[0]) for op in a.walk.ops
             if op.attrs.get("other_branch")}
    assert ("ssm", "mixer", 416, "layer_type == 'M'") in other
    assert ("attention", "attn", 492, "layer_type == '*'") in other
    assert ("matmul", "up_proj", 126, "layer_type == '-'") in other
    assert not any(op.steady for op in a.walk.ops if op.attrs.get("other_branch"))
    assert not any(op.kind in ("attention", "ssm") for op in a.walk.ops if op.steady)  # the MoE layer has none
    opps = {o.id: o for o in a.opportunities}
    flash = opps["flash_attention@NemotronHAttention.forward"]
    assert flash.status == "fused_by_ascend_kernel" and flash.conditions[0] == "layer_type == '*'"
    assert opps["qkv_merge@NemotronHAttention.forward"].conditions[0] == "layer_type == '*'"
