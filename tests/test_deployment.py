"""The deployment decides the kernels (issue 36): engine arguments in vLLM's names, a quantised checkpoint folder
(config.json + msmodelslim's quant_model_description.json, no weights), the SoC and vllm-ascend's
additional_config, on the 0.30 pair. Each test states what vllm-ascend 0.30.0rc2 runs there, read by hand from
the trees (file:line in the asserts' messages and in docs/deployment.md)."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.ir.deployment import build, parse_serve_args
from fusion_analyze.errors import UserError

from tests.test_real_cost_model import DEEPSEEK_V3

# https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json (the fields the walk and the estimate read)
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000, "rms_norm_eps": 1e-06,
    "torch_dtype": "bfloat16", "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
}
# https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000, "rms_norm_eps": 1e-06,
    "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "torch_dtype": "bfloat16",
    "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
}


def _checkpoint(folder, config: dict, description: dict | None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if description is not None:
        (folder / "quant_model_description.json").write_text(json.dumps(description), encoding="utf-8")
    return str(folder)


def _deepseek_w8a8_dynamic() -> dict:
    """What msmodelslim writes for DeepSeek-V3 W8A8_DYNAMIC: every projection and expert int8, kv_b_proj (MLA
    asserts it unquantised, vllm_ascend/attention/mla_v1.py), the router gate, norms, embedding and lm_head FLOAT."""
    c, out = DEEPSEEK_V3, {}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}"
        for m in ("q_a_proj", "kv_a_proj_with_mqa", "q_b_proj", "o_proj"):
            out[f"{p}.self_attn.{m}.weight"] = "W8A8_DYNAMIC"
        for m in ("kv_b_proj", "q_a_layernorm", "kv_a_layernorm"):
            out[f"{p}.self_attn.{m}.weight"] = "FLOAT"
        out[f"{p}.input_layernorm.weight"] = out[f"{p}.post_attention_layernorm.weight"] = "FLOAT"
        for m in ("gate_proj", "up_proj", "down_proj"):
            if i < c["first_k_dense_replace"]:
                out[f"{p}.mlp.{m}.weight"] = "W8A8_DYNAMIC"
            else:
                out[f"{p}.mlp.shared_experts.{m}.weight"] = "W8A8_DYNAMIC"
                for e in range(c["n_routed_experts"]):
                    out[f"{p}.mlp.experts.{e}.{m}.weight"] = "W8A8_DYNAMIC"
        if i >= c["first_k_dense_replace"]:
            out[f"{p}.mlp.gate.weight"] = "FLOAT"
    out["model.embed_tokens.weight"] = out["model.norm.weight"] = out["lm_head.weight"] = "FLOAT"
    return out


def _qwen3_w8a8() -> dict:
    out = {}
    for i in range(QWEN3_8B["num_hidden_layers"]):
        p = f"model.layers.{i}"
        for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            out[f"{p}.{m}.weight"] = "W8A8"
        for m in ("input_layernorm", "post_attention_layernorm", "self_attn.q_norm", "self_attn.k_norm"):
            out[f"{p}.{m}.weight"] = "FLOAT"
    out["model.embed_tokens.weight"] = out["model.norm.weight"] = out["lm_head.weight"] = "FLOAT"
    return out


@pytest.fixture(scope="module")
def deepseek_ckpt(tmp_path_factory):
    return _checkpoint(tmp_path_factory.mktemp("ckpt") / "DeepSeek-V3-w8a8", DEEPSEEK_V3, _deepseek_w8a8_dynamic())


@pytest.fixture(scope="module")
def qwen3_ckpt(tmp_path_factory):
    return _checkpoint(tmp_path_factory.mktemp("ckpt") / "Qwen3-8B-w8a8", QWEN3_8B, _qwen3_w8a8())


@pytest.fixture(scope="module")
def qwen3_moe_ckpt(tmp_path_factory):
    return _checkpoint(tmp_path_factory.mktemp("ckpt") / "Qwen3-30B-A3B", QWEN3_30B_A3B, None)


def _status(a, prefix: str) -> dict:
    return {o.id: o.status for o in a.opportunities if o.id.startswith(prefix)}


def _names(op) -> list[str]:
    return [k.name.rsplit(".", 1)[-1] for k in op.kernels]


def _experts(a) -> list:
    return [o for o in a.walk.ops if o.kind == "moe_experts"]


def _steps(a, experts_op) -> dict:
    """The steps nested under this experts op (the ops right after it, under its path)."""
    ops = a.walk.ops
    out = {}
    for o in ops[ops.index(experts_op) + 1:]:
        if not o.path.startswith(experts_op.path + "."):
            break
        out[o.name] = o
    return out


# -- DeepSeek-V3 W8A8_DYNAMIC on A3, DP 16 + EP ----------------------------------------------------------------
@pytest.fixture(scope="module")
def deepseek_a3(session, hf, deepseek_ckpt):
    return analyze_in(session, deepseek_ckpt, Options(hf_root=hf, dp=16, enable_expert_parallel=True,
                                                      device="ascend_a3"))


def test_deepseek_a3_deployment_is_stated(deepseek_a3):
    d = deepseek_a3.report["deployment"]
    assert (d["tensor_parallel_size"], d["data_parallel_size"], d["expert_parallel_size"]) == (1, 16, 16)
    assert d["quantization"] == "ascend" and d["quant_description"].endswith("quant_model_description.json")
    assert d["stated"] == ["--data-parallel-size 16", "--enable-expert-parallel"]
    # set_mc2_tokens_capacity: min(max_num_seqs 256, 512) capture size (platform.py _get_reduced_cg_cap) per TP rank
    assert d["mc2_capacity"] == 256 and d["device"] == "ascend_a3"
    assert {c["class"]: c["paths"] for c in d["moe_comm"]} == {"MC2CommImpl": ["decode"], "AlltoAllCommImpl": ["prefill"]}


def test_deepseek_a3_mc2_dispatch_and_combine_on_decode_all_to_all_on_prefill(deepseek_a3):
    """A3's FUSED_OR_CAPACITY policy (device/hardware_profile.py): no enable_fused_mc2, so MC2 within the
    capacity (32 decode tokens <= 256), all-to-all above it (4096 prefill tokens)."""
    by_class = {o.layer_class: o for o in _experts(deepseek_a3)}
    assert set(by_class) == {"MC2CommImpl", "AlltoAllCommImpl"}
    mc2, a2a = by_class["MC2CommImpl"], by_class["AlltoAllCommImpl"]
    assert mc2.attrs["runs_on"] == ["decode"] and a2a.attrs["runs_on"] == ["prefill"]
    assert "select_moe_comm_method() picks MoECommType.MC2 on decode" in mc2.attrs["found_by"]
    steps = _steps(deepseek_a3, mc2)
    assert _names(steps["dispatch"]) == ["npu_moe_distribute_dispatch_v2"]  # token_dispatcher.py TokenDispatcherWithMC2
    assert _names(steps["combine"]) == ["npu_moe_distribute_combine_v2"]
    assert "npu_moe_distribute_dispatch_v2" not in _names(a2a)


def test_deepseek_a3_experts_run_the_fused_gemm_swiglu_quant(deepseek_a3):
    """W8A8_DYNAMIC experts (quantization/methods/w8a8/w8a8_dynamic.py AscendW8A8DynamicFusedMoEMethod):
    supports_fused_activation("silu") -> apply_gmm1_act_quant, whose `fusion` (quant_type W8A8 and
    fusion_ops_gmmswigluquant, True by default) runs grouped_matmul_swiglu_quant_weight_nz, unconditionally."""
    for experts in _experts(deepseek_a3):
        assert experts.attrs["quant_type"] == "W8A8_DYNAMIC"
        assert experts.attrs["quant_scheme"] == "AscendW8A8DynamicFusedMoEMethod"
        gemm1 = _steps(deepseek_a3, experts)["gemm1"]
        assert [(k.name, k.condition) for k in gemm1.kernels] == [
            ("torch.ops._C_ascend.grouped_matmul_swiglu_quant_weight_nz", None)]
    assert _status(deepseek_a3, "matmul_swiglu@DeepseekV2MoE") == {"matmul_swiglu@DeepseekV2MoE.forward": "fused_by_ascend_kernel"}


def test_deepseek_a3_projections_are_quantised_as_the_description_says(deepseek_a3):
    ops = {(o.path.rsplit(".", 1)[-1], o.kind): o for o in deepseek_a3.walk.ops if o.kind in ("matmul", "quant")}
    q = ops[("fused_qkv_a_proj", "quant")]  # q_a_proj + kv_a_proj_with_mqa, packed (deepseek_v2.py packed_modules_mapping)
    gemm = ops[("fused_qkv_a_proj", "matmul")]
    assert gemm.attrs["quant_type"] == "W8A8_DYNAMIC" and gemm.attrs["quant_scheme"] == "AscendW8A8DynamicLinearMethod"
    assert _names(q) == ["npu_dynamic_quant"] and _names(gemm) == ["npu_quant_matmul"]
    assert ops[("o_proj", "matmul")].attrs["quant_type"] == "W8A8_DYNAMIC"
    kv_b = ops[("kv_b_proj", "matmul")]
    assert kv_b.attrs["quant_type"] == "FLOAT" and _names(kv_b) == ["unquantized_gemm"]
    assert ("kv_b_proj", "quant") not in ops


def test_deepseek_a3_mla_kv_norm_rope_cache_is_one_kernel(deepseek_a3):
    found = {o.id: o for o in deepseek_a3.opportunities if o.id.startswith("rope_kvcache@AscendMLAImpl")}
    assert found and all(o.status == "fused_by_ascend_kernel" for o in found.values())
    assert any("npu_kv_rmsnorm_rope_cache" in e["what"] for o in found.values() for e in o.evidence)


def test_deepseek_a3_shared_experts_run_dequant_swiglu_quant(deepseek_a3):
    """AscendSharedExperts._select_mlp_path: quantised shared linears and the routed experts' QuantType.W8A8 ->
    A8_INT_FUSED, whose _run_a8_int_mlp runs npu_dequant_swiglu_quant (ops/fused_moe/shared_experts.py)."""
    acts = [o for o in deepseek_a3.walk.ops if o.attrs.get("role") == "shared_expert" and o.kind == "silu_mul"]
    assert acts and all(_names(o) == ["npu_dequant_swiglu_quant"] for o in acts)
    assert all(o.attrs["shared_path"] == "SharedExpertMLPPath.A8_INT_FUSED" for o in acts)
    assert _status(deepseek_a3, "act_quant@") == {"act_quant@DeepseekV2MLP.forward": "fused_by_ascend_kernel"}


def test_deepseek_a3_norm_quant_inside_the_moe_custom_op_is_not_claimed(deepseek_a3):
    """The shared experts' input quantisation runs inside torch.ops.vllm.moe_forward_shared (vLLM's MoE runner,
    an opaque custom op): AddRMSNormQuantFusionPass never sees it."""
    o = next(o for o in deepseek_a3.opportunities if o.id == "norm_quant@DeepseekV2DecoderLayer.forward")
    assert o.status == "open" and "moe_forward" in (o.note or "")


def test_deepseek_a3_with_fused_mc2_runs_dispatch_ffn_combine(session, hf, deepseek_ckpt):
    """additional_config.enable_fused_mc2 with EP 16 <= 32: FUSED_MC2 on every path (no token check), whose
    FusedMC2CommImpl.fused_experts runs the one dispatch_ffn_combine kernel, not the MLP."""
    a = analyze_in(session, deepseek_ckpt, Options(hf_root=hf, dp=16, enable_expert_parallel=True, device="ascend_a3",
                                                   additional_config='{"enable_fused_mc2": true}'))
    experts = _experts(a)
    assert [o.layer_class for o in experts] == ["FusedMC2CommImpl"] * len(experts) and experts
    assert all("runs_on" not in o.attrs for o in experts)
    for o in experts:
        names = [k.name for k in o.kernels]
        assert names == ["torch.ops._C_ascend.dispatch_ffn_combine"], names
    assert a.report["deployment"]["additional_config"] == {"enable_fused_mc2": True}


# -- Qwen3-8B W8A8 on A2, TP 2 -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def qwen3_tp2(session, hf, qwen3_ckpt):
    return analyze_in(session, qwen3_ckpt, Options(hf_root=hf, tp=2))


def test_qwen3_w8a8_linears_quantise_then_gemm(qwen3_tp2):
    """W8A8 (static) linears: AscendW8A8LinearMethod (w8a8_static.py) quantises with torch.ops.vllm.quantize
    (npu_quantize) and runs npu_quant_matmul; qkv_proj and gate_up_proj through their shards."""
    ops = {(o.name, o.kind): o for o in qwen3_tp2.walk.ops if o.kind in ("matmul", "quant")}
    for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        assert ops[(name, "matmul")].attrs["quant_scheme"] == "AscendW8A8LinearMethod"
        assert _names(ops[(name, "matmul")]) == ["npu_quant_matmul"]
        assert "npu_quantize" in _names(ops[(f"{name}.quant", "quant")])


def test_qwen3_w8a8_norm_quant_by_the_pass_swiglu_quant_and_communication_open(qwen3_tp2):
    st = {o.id: o.status for o in qwen3_tp2.opportunities}
    # AddRMSNormQuantFusionPass (compilation/passes/norm_quant_fusion_pass.py): npu_add_rms_norm_bias -> quantize
    assert st["norm_quant@Qwen3DecoderLayer.forward"] == "fused_by_ascend_graph_pass"
    norms = {m.op_list[0].name for o in qwen3_tp2.opportunities if o.id == "norm_quant@Qwen3DecoderLayer.forward"
             for m in o.matches}
    assert norms == {"input_layernorm", "post_attention_layernorm"}
    assert st["act_quant@Qwen2MLP.forward"] == "open"  # npu_swiglu, then the down projection's npu_quantize
    assert st["allreduce_norm@Qwen3DecoderLayer.forward"] == "open"
    assert st["matmul_allreduce@Qwen2MLP.forward"] == "open"
    assert qwen3_tp2.report["deployment"]["tensor_parallel_size"] == 2


def test_qwen3_w8a8_enforce_eager_turns_the_pass_off(session, hf, qwen3_ckpt):
    a = analyze_in(session, qwen3_ckpt, Options(hf_root=hf, tp=2, enforce_eager=True))
    o = next(o for o in a.opportunities if o.id == "norm_quant@Qwen3DecoderLayer.forward")
    assert o.status == "open" and "--enforce-eager" in (o.note or "")
    assert a.report["deployment"]["mode"] == {"decode": "eager", "prefill": "eager"}


# -- Qwen3-30B-A3B with EP 8 on A2 ---------------------------------------------------------------------------------
def test_qwen3_moe_ep8_on_a2_is_all_gather(session, hf, qwen3_moe_ckpt):
    """A2's CAPACITY_AND_EXPERT_DENSITY policy: MC2 needs an EP group of 16 or more; EP 8 all-gathers on every
    path (ascend_forward_context.py _select_capacity_and_expert_density_moe_comm_method)."""
    a = analyze_in(session, qwen3_moe_ckpt, Options(hf_root=hf, tp=8, enable_expert_parallel=True))
    experts = _experts(a)
    assert experts and {o.layer_class for o in experts} == {"AllGatherCommImpl"}
    assert all("runs_on" not in o.attrs for o in experts)
    assert "MoECommType.ALLGATHER on decode" in experts[0].attrs["found_by"]
    assert not [k for o in a.walk.ops for k in o.kernels if "distribute_dispatch" in k.name]
    d = a.report["deployment"]
    assert (d["expert_parallel_size"], d["quantization"]) == (8, None)


# -- the CLI --------------------------------------------------------------------------------------------------------
def test_compare_two_deployments_of_one_tree(run, real_tree, deepseek_ckpt, tmp_path):
    out = tmp_path / "cmp.md"
    r = run("compare", deepseek_ckpt, "--vllm-root", str(real_tree("vllm==0.30.0")),
            "--ascend-root", str(real_tree("vllm-ascend==0.30.0rc2")), "--device", "ascend_a3",
            "--base-args", "-dp 16 --enable-expert-parallel",
            "--head-args", "-dp 16 --enable-expert-parallel --additional-config '{\"enable_fused_mc2\": true}'",
            "--fail-on", "none", "-o", str(out))
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert "FusedMC2CommImpl" in text and "--additional-config" in text


def test_serve_args_and_bad_engine_arguments(run):
    got, ignored = parse_serve_args("vllm serve /m --tensor-parallel-size 2 -dp 4 --enable-expert-parallel "
                                    "--max-num-seqs 64 --gpu-memory-utilization 0.9 --additional-config "
                                    "'{\"enable_fused_mc2\": 1}'")
    assert got == {"model": "/m", "tp": 2, "dp": 4, "enable_expert_parallel": True, "max_num_seqs": 64,
                   "additional_config": '{"enable_fused_mc2": 1}'}
    assert ignored == ["--gpu-memory-utilization"]
    d = build(**{k: v for k, v in got.items() if k != "model"})
    assert (d.tp_size, d.dp, d.ep, d.num_seqs) == (2, 4, 8, 64)
    with pytest.raises(UserError):
        build(additional_config="{not json")
    r = run("qwen3", "--vllm-root", "/nonexistent", "--additional-config", "[1]")
    assert r.exit_code == 2 and "--additional-config" in r.output and "Traceback" not in r.output
