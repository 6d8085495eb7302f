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
    # Two layer kinds (first_k_dense_replace = 3): the MoE layers' shared experts (a DeepseekV2MLP under
    # AscendSharedExperts) run the one fused kernel; the dense layers 0-2's DeepseekV2MLP runs AscendSiluAndMul's
    # npu_swiglu then W8A8_DYNAMIC's npu_dynamic_quant for down_proj (ops/activation.py, w8a8_dynamic.py), and no
    # graph pass of 0.30.0rc2 rewrites swiglu + quant: open. The old single row stood for the MoE layers only.
    rows = {o.id: o for o in deepseek_a3.opportunities if o.id.startswith("act_quant@")}
    assert {oid: o.status for oid, o in rows.items()} == {
        "act_quant@DeepseekV2MLP.forward": "open", "act_quant@DeepseekV2MLP.forward#2": "fused_by_ascend_kernel"}
    assert all(".shared_experts." in op for op in rows["act_quant@DeepseekV2MLP.forward#2"].ops)
    assert not any("shared_experts" in op for op in rows["act_quant@DeepseekV2MLP.forward"].ops)
    assert "npu_swiglu" in (rows["act_quant@DeepseekV2MLP.forward"].note or "")


def test_deepseek_a3_norm_quant_inside_the_moe_custom_op_is_not_claimed(deepseek_a3):
    """The shared experts' input quantisation runs inside torch.ops.vllm.moe_forward_shared (vLLM's MoE runner,
    an opaque custom op): AddRMSNormQuantFusionPass never sees it. The dense layers 0-2 (a layer kind of their
    own) quantise the MLP's input in the compiled graph, right after post_attention_layernorm's
    npu_add_rms_norm_bias: AddRMSNormDynamicQuantPatternWithBias (passes/norm_quant_fusion_pass.py) rewrites it."""
    rows = {o.id: o for o in deepseek_a3.opportunities if o.id.startswith("norm_quant@DeepseekV2DecoderLayer.")}
    assert rows.keys() == {"norm_quant@DeepseekV2DecoderLayer.forward", "norm_quant@DeepseekV2DecoderLayer.forward#2"}
    moe = rows["norm_quant@DeepseekV2DecoderLayer.forward#2"]
    assert any(".shared_experts." in op for op in moe.ops)
    assert moe.status == "open" and "moe_forward" in (moe.note or "")
    dense = rows["norm_quant@DeepseekV2DecoderLayer.forward"]
    assert not any("shared_experts" in op for op in dense.ops)
    assert dense.status == "fused_by_ascend_graph_pass"
    assert any("AddRMSNormDynamicQuantPatternWithBias" in e["what"] for e in dense.evidence)


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
    # AddRMSNormQuantFusionPass (compilation/passes/norm_quant_fusion_pass.py): npu_add_rms_norm_bias -> quantize,
    # in layers 1-35 (the loop hands them a residual); the pass has no pattern for the plain npu_rms_norm ->
    # quantize the first layer runs (no residual yet): that match is open, a row of its own
    rows = {o.id: o for o in qwen3_tp2.opportunities if o.id.startswith("norm_quant@Qwen3DecoderLayer.forward")}
    fused = [o for o in rows.values() if o.status == "fused_by_ascend_graph_pass"]
    assert len(fused) == 1
    assert {m.op_list[0].name for m in fused[0].matches} == {"input_layernorm", "post_attention_layernorm"}
    assert all(_names(m.op_list[0]) == ["npu_add_rms_norm_bias"] for m in fused[0].matches)
    first = [o for o in rows.values() if o.status == "open"]
    assert [(m.op_list[0].name, _names(m.op_list[0]), m.op_list[0].attrs.get("layer_kind")) for o in first
            for m in o.matches] == [("input_layernorm", ["npu_rms_norm"], 0)]
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
                   "additional_config": {"enable_fused_mc2": 1}}
    assert ignored == ["--gpu-memory-utilization"]
    d = build(**{k: v for k, v in got.items() if k != "model"})
    assert (d.tp_size, d.dp, d.ep, d.num_seqs) == (2, 4, 8, 64)
    with pytest.raises(UserError):
        build(additional_config="{not json")
    r = run("qwen3", "--vllm-root", "/nonexistent", "--additional-config", "[1]")
    assert r.exit_code == 2 and "--additional-config" in r.output and "Traceback" not in r.output


# -- issue 47: engine arguments checked as the trees check them ------------------------------------------------------
def _tree_line(root, rel: str, needle: str) -> int:
    """The line of `needle` in a file of a tree (what the refusal must name, read here independently)."""
    lines = (root / rel).read_text(encoding="utf-8").splitlines()
    return next(i for i, t in enumerate(lines, 1) if needle in t)


def _pair(real_tree) -> list[str]:
    return ["--vllm-root", str(real_tree("vllm==0.30.0")), "--ascend-root", str(real_tree("vllm-ascend==0.30.0rc2"))]


def test_additional_config_typo_is_refused_with_the_trees_line(run, real_tree):
    """AscendConfig forbids unknown keys (`model_config = ConfigDict(extra="forbid")`, vllm_ascend/ascend_config.py):
    `enable_fused_mc22` (a typo) is one line and exit 2, naming that file:line, before any model is walked."""
    r = run("Qwen3-8B", *_pair(real_tree), "--additional-config", '{"enable_fused_mc22": true}')
    assert r.exit_code == 2
    forbid = _tree_line(real_tree("vllm-ascend==0.30.0rc2"), "vllm_ascend/ascend_config.py",
                        'model_config = ConfigDict(extra="forbid")')
    lines = r.output.strip().splitlines()
    assert len(lines) == 1, r.output
    assert f"vllm_ascend/ascend_config.py:{forbid}" in lines[0]
    assert "enable_fused_mc22" in lines[0] and "did you mean enable_fused_mc2?" in lines[0]


def test_additional_config_values_are_validated_as_the_class_does(run, real_tree):
    """The class's after-validator (`if self.weight_nz_mode not in (0, 1, 2): raise ValueError(...)`), its field
    types (pydantic's lax rules: "2" is an int, "false" a bool), nested classes field by field."""
    root = real_tree("vllm-ascend==0.30.0rc2")
    r = run("Qwen3-8B", *_pair(real_tree), "--additional-config", '{"weight_nz_mode": 7}')
    assert r.exit_code == 2
    raise_line = _tree_line(root, "vllm_ascend/ascend_config.py", 'raise ValueError(f"weight_nz_mode must be one of')
    assert r.output.strip() == (f"error: --additional-config: weight_nz_mode must be one of 0, 1, or 2; got 7 "
                                f"(AscendConfig._validate_user_input_ranges, vllm_ascend/ascend_config.py:{raise_line})")
    from fusion_analyze.analysis.session import Session
    from fusion_analyze.semantics.engine_args import check_additional_config

    s = Session.open(str(real_tree("vllm==0.30.0")), str(root))
    for ok in ({"weight_nz_mode": "2"}, {"enable_fused_mc2": True}, {"refresh": True},
               {"ascend_compilation_config": {"fuse_norm_quant": "false"}}):
        check_additional_config(s.index, ok)  # what pydantic takes (refresh: stripped by init_ascend_config)
    for bad, said in (({"combine_quant_mode": 1}, "Literal[0, 2, 3, 4]"),
                      ({"ascend_fusion_config": {"fusion_ops_gmmswigluquant": 2}}, "`bool`"),
                      ({"ascend_compilation_config": {"fuse_norm_qant": False}}, "vllm_ascend/config_utils.py:"),
                      ({"eplb_config": {"eplb_policy_type": 9}}, "EplbConfig")):
        with pytest.raises(UserError) as e:
            check_additional_config(s.index, bad)
        assert said in e.value.message


def test_unknown_quantization_is_refused_with_the_trees_line(run, real_tree):
    """vLLM's QUANTIZATION_METHODS (the Literal QuantizationMethods) plus vllm-ascend's
    @register_quantization_config; on Ascend, NPUPlatform.supported_quantization."""
    r = run("Qwen3-8B", *_pair(real_tree), "--quantization", "bogus")
    assert r.exit_code == 2
    line = _tree_line(real_tree("vllm==0.30.0"), "vllm/model_executor/layers/quantization/__init__.py",
                      "QuantizationMethods = Literal[")
    lines = r.output.strip().splitlines()
    assert len(lines) == 1, r.output
    assert f"vllm/model_executor/layers/quantization/__init__.py:{line}" in lines[0] and "bogus" in lines[0]
    r = run("Qwen3-8B", *_pair(real_tree), "--quantization", "awq")  # vLLM's, not the Ascend platform's
    assert r.exit_code == 2
    assert "vllm_ascend/platform.py:" in r.output and "supported_quantization" in r.output


def test_serve_args_short_forms_from_the_tree(session, hf, qwen3_ckpt):
    """`-q` and `-tp` are vLLM's own short forms (EngineArgs.add_cli_args); the ascend quantisation at TP 2."""
    from fusion_analyze.semantics.engine_args import serve_options

    spellings, flags, where = serve_options(session.index)
    assert spellings["-q"] == "--quantization" and spellings["-tp"] == "--tensor-parallel-size"
    assert spellings["-cc"] == "--compilation-config" and "--enforce-eager" in flags and where.startswith(
        "vllm/engine/arg_utils.py:")
    a = analyze_in(session, qwen3_ckpt, Options(hf_root=hf, serve_args=f"vllm serve {qwen3_ckpt} -q ascend -tp 2"))
    d = a.report["deployment"]
    assert (d["quantization"], d["tensor_parallel_size"]) == ("ascend", 2)
    assert d["stated"][:2] == ["--tensor-parallel-size 2", "--quantization ascend"]
    # the W8A8 linears' quant after the add + norm of layers 1-35 (the first layer's plain norm: a row of its own)
    rows = [o.status for o in a.opportunities if o.id.startswith("norm_quant@Qwen3DecoderLayer.forward")]
    assert sorted(map(str, rows)) == ["fused_by_ascend_graph_pass", "open"]


def test_serve_args_cli_analyses_ascend_at_tp2(run, real_tree, tmp_path):
    out = tmp_path / "r.json"
    r = run("Qwen/Qwen3-8B", *_pair(real_tree), "--serve-args", "vllm serve Qwen/Qwen3-8B -q ascend -tp 2",
            "--format", "json", "-o", str(out))
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text(encoding="utf-8"))["deployment"]
    assert (d["quantization"], d["tensor_parallel_size"]) == ("ascend", 2)


def test_O0_and_compilation_mode_none_run_no_graph_pass(session, hf, qwen3_ckpt):
    """-O0 (OptimizationLevel.O0: no compilation, no graphs) and `--compilation-config '{"mode": 0}'`
    (CompilationMode.NONE) run no graph pass, as --enforce-eager; the note does not advise a flag."""
    for args, why in (("-tp 2 -O0", "-O0"), ("-tp 2 -cc '{\"mode\": 0}'", "--compilation-config mode 0")):
        a = analyze_in(session, qwen3_ckpt, Options(hf_root=hf, serve_args=args))
        o = next(o for o in a.opportunities if o.id == "norm_quant@Qwen3DecoderLayer.forward")
        assert o.status == "open"
        assert why in (o.note or "") and "enable it" not in (o.note or "")
        assert a.report["deployment"]["graph_passes"] is False
    d = analyze_in(session, qwen3_ckpt, Options(hf_root=hf, serve_args="-tp 2 -O0")).report["deployment"]
    assert d["mode"] == {"decode": "eager", "prefill": "eager"} and d["optimization_level"] == "0"


def test_enforce_eager_advises_no_graph_pass(session, hf):
    a = analyze_in(session, "Qwen3-8B", Options(hf_root=hf, enforce_eager=True))
    notes = [o.note or "" for o in a.opportunities]
    assert any("--enforce-eager" in n for n in notes)
    assert not any("enable it to fuse" in n for n in notes)


def test_compare_tp1_tp4_lists_the_all_reduce_fusions(run, real_tree, tmp_path):
    """At TP 1 there is no all-reduce: RowParallelLinear.forward's `if self.reduce_results and self.tp_size > 1`
    (vllm/model_executor/layers/linear.py:1775) is decided False at the stated TP, so the walk has no all-reduce
    op and the all-reduce rows do not exist (they used to be rows ruled out by the deployment, when the test was
    undecided); at TP 4 the all-reduce ops and their rows are there: rows and ops added, a change."""
    out = tmp_path / "cmp.json"
    r = run("compare", "Qwen3-8B", *_pair(real_tree), "--base-args", "-tp 1", "--head-args", "-tp 4",
            "--format", "json", "--fail-on", "none", "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["summary"]["changed"] == 1
    model = doc["models"][0]
    dep = model["deployment"]
    added = {c["id"]: c["status"] for c in model["opportunities"]["added"]}
    assert {"matmul_allreduce@Qwen2MLP.forward", "matmul_allreduce@Qwen3Attention.forward",
            "allreduce_norm@Qwen3DecoderLayer.forward"} <= added.keys()
    assert not model["opportunities"]["removed"]
    assert {o["kind"] for o in model["ops"]["added"]} == {"allreduce"} and not model["ops"]["removed"]
    assert any("torch.ops.vllm.all_reduce" in c["added"] for c in dep["kernels_changed"])
    assert dep["steps"]["decode"]["new_step_us"] < dep["steps"]["decode"]["old_step_us"]
    md = tmp_path / "cmp.md"
    r = run("compare", "Qwen3-8B", *_pair(real_tree), "--base-args", "-tp 1", "--head-args", "-tp 4",
            "--fail-on", "none", "--lang", "en", "-o", str(md))
    assert r.exit_code == 0, r.output
    text = md.read_text(encoding="utf-8")
    assert "1 changed" in text and "matmul_allreduce@Qwen2MLP.forward" in text and "torch.ops.vllm.all_reduce" in text


def test_deepseek_v3_with_no_flags_does_not_fit(run, real_tree, tmp_path):
    """671 B weights at 2 bytes on one 64 GiB A2 card: a warning, and the smallest TP / EP that holds them."""
    out = tmp_path / "ds.md"
    r = run("DeepSeek-V3", *_pair(real_tree), "--lang", "en", "-o", str(out))
    assert r.exit_code == 0
    assert "warning: the deployment cannot run" in r.output
    assert "--tensor-parallel-size 32" in r.output and "--enable-expert-parallel" in r.output
    header = out.read_text(encoding="utf-8").split("### ", 1)[0]
    assert "this deployment cannot run" in header and "64.0 GiB" in header


def test_memory_fit_arithmetic():
    from fusion_analyze.estimate.memory import fit, weight_parts
    from fusion_analyze.estimate.shapes import _from_config

    dims = _from_config(DEEPSEEK_V3, "test").dims
    parts = weight_parts(dims, DEEPSEEK_V3)
    total = parts["embed"] + parts["dense"] + parts["experts"]
    assert 660e9 < total < 680e9  # DeepSeek-V3's 671 B parameters (without the MTP layer)
    device = {"memory_gib": 64, "name": "A2"}
    f = fit(dims, DEEPSEEK_V3, build(), device, 2)
    assert not f["fits"] and f["smallest_tp"] == 32  # 1250 GiB / 16 = 78 > 64; / 32 = 39
    assert fit(dims, DEEPSEEK_V3, build(tp=32), device, 2)["fits"]
    q = _from_config(QWEN3_8B, "test").dims
    assert fit(q, QWEN3_8B, build(), device, 2)["fits"]


def test_quant_config_is_none_only_where_the_quantisation_is_known():
    """`vllm_config.quant_config` is None (VllmConfig._get_quantization_config) where a config.json was read that
    names no quantisation and none is stated; without a configuration, or with a quantised one, it is not
    stated (an object, or not known)."""
    plain = {"architectures": ["X"], "hidden_size": 8}
    assert build(config_values=plain).vllm_config(None)["quant_config"] is None
    assert "quant_config" not in build().vllm_config(None)
    assert "quant_config" not in build(config_values={**plain, "quantization_config": {"quant_method": "fp8"}}).vllm_config(None)
    assert "quant_config" not in build(config_values={**plain, "compression_config": {}}).vllm_config(None)
    assert "quant_config" not in build(config_values={**plain, "quantization_config": {}}).vllm_config(None)
    assert "quant_config" not in build(config_values={**plain, "text_config": {"quantization_config": {}}}).vllm_config(None)
    assert "quant_config" not in build(quantization="fp8", config_values=plain).vllm_config(None)
