"""Precision of claims on the released 0.30 pair (issue 20): a graph pass fits when the graph its pattern
traces is the model's (here: a per-head q/k norm is not a norm over the whole projection), and shapes are
attrs of the ops (from constructor arguments and configuration values)."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import Options, analyze_in
from .layers import after_first


def _opp(a, scenario):
    (o,) = [o for o in a.opportunities if o.scenario == scenario]
    return o


def test_a_full_width_qk_norm_is_not_the_per_head_pass(session, hf):
    """OLMoE builds q_norm = RMSNorm(total_num_heads * head_dim): one norm over the whole q projection
    (after an all-gather under tensor parallelism). QKNormRopeFusionPattern traces npu_rms_norm over
    q.view(..., self.head_dim), so it does not rewrite OLMoE: the scenario is open, with the widths said."""
    a = analyze_in(session, "OlmoeForCausalLM", Options(hf_root=hf))
    ops = {op.name: op for op in a.walk.ops if op.path.startswith("model.layers.self_attn")}
    assert ops["q_norm"].attrs["values"]["hidden_size"] == 2048  # OlmoeConfig: 16 heads x 128
    assert ops["rotary_emb"].attrs["values"]["head_size"] == 128
    o = _opp(a, "qknorm_rope")
    assert str(o.status) == "open"
    assert "QKNormRopeFusionPass would rewrite this, but its QKNormRopeFusionPattern traces another graph" in o.note
    assert "it normalises over self.head_dim" in o.note and "q_norm normalises 2048 values, the rotary head size is 128" in o.note
    # the tensor-parallel split after the norm: `splitter = partial(split_tensor_along_last_dim, ...)` then
    # splitter(q) runs split_tensor_along_last_dim (vllm/distributed/utils.py), under the test that guards it
    splits = [op for op in after_first(a.walk.ops) if op.kind == "split" and op.file == "vllm/distributed/utils.py"]
    assert len(splits) == 2 and all(op.condition == "self.tp_size > 1" for op in splits)
    assert not any(op.name in ("functools.partial", "splitter") for op in a.walk.ops)


def test_a_per_head_qk_norm_still_fits_the_pass(session, hf):
    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf))
    norms = [op for op in a.walk.ops if op.name in ("q_norm", "k_norm")]
    assert {op.attrs["values"]["hidden_size"] for op in norms} == {128}
    # projection shapes too, from the constructor arguments and the configuration (Qwen3Config's defaults)
    by = {op.name: op.attrs["values"] for op in a.walk.ops if op.kind == "matmul"}
    assert by["o_proj"] == {"input_size": 4096, "output_size": 4096}
    assert by["down_proj"] == {"input_size": 22016, "output_size": 4096}
    o = _opp(a, "qknorm_rope")
    assert str(o.status) == "fused_by_ascend_graph_pass"
    assert not any("normalise" in c for c in o.conditions)  # both widths known and equal: nothing to say


GRANITE = {"architectures": ["GraniteForCausalLM"], "model_type": "granite", "embedding_multiplier": 12.0,
           "residual_multiplier": 0.22, "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
           "num_hidden_layers": 40, "intermediate_size": 8192, "vocab_size": 49155}


def _chains(a):
    return sorted((o for o in a.opportunities if o.scenario == "vector_elementwise_chain"), key=lambda o: o.id)


def test_a_pass_fits_by_its_patterns_graph_not_by_op_kinds(session, hf, tmp_path):
    """MulsAddFusionPass traces `x * self.scale + y` (scale = routed_scaling_factor). Granite writes
    `residual + hidden_states * self.residual_multiplier`: the product is the add's right operand, so the
    pattern matcher finds nothing there; the pass is named with the part that does not fit."""
    import json

    a = analyze_in(session, "GraniteForCausalLM", Options(hf_root=hf))
    residual = [o for o in _chains(a) if str(o.status) == "open" and o.note and "is `x * self.scale + y`" in o.note]
    assert residual, [(o.id, str(o.status), o.note) for o in _chains(a)]
    assert "is `x * self.scale + y`" in residual[0].note
    assert "add at vllm/model_executor/models/granite.py:299 takes the mul result on the right, the pattern on the left" in residual[0].note
    line = (session.vllm.root / "vllm/model_executor/models/granite.py").read_text().splitlines()[298]
    assert "residual + hidden_states * self.residual_multiplier" in line
    # The first layer's add reads `hidden_states *= embedding_multiplier` (the embedding scale) on its left,
    # but its other operand comes from attention over those scaled embeddings: no element-wise chain, so no
    # row (test_real_decided_or_said.py names the pattern matcher's reasons); with Granite-3's config.json
    # nothing is fused by the pass either.
    assert not any(str(o.status) == "fused_by_ascend_graph_pass" for o in _chains(a))
    embed = next(op for op in a.walk.ops if op.section == "prologue" and op.kind == "mul")
    assert not any(embed.id in o.ops for o in _chains(a))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(GRANITE))
    b = analyze_in(session, "GraniteForCausalLM", Options(hf_root=hf, config=str(config)))
    assert not any(str(o.status) == "fused_by_ascend_graph_pass" for o in _chains(b))


def test_a_scalar_on_the_wrong_side_does_not_fit(session, hf):
    """DeepSeek's llama-4 scaling `1 + scaling_beta * torch.log(...)` multiplies a scalar by a tensor: the
    pattern's `x * self.scale` has the tensor on the left."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf))
    (o,) = [o for o in a.opportunities if o.id == "vector_elementwise_chain@deepseek_v2._get_llama_4_scaling"]
    assert str(o.status) == "open"
    assert "mul at vllm/model_executor/models/deepseek_v2.py:447 has the scalar scaling_beta on the left" in o.note


def test_a_linear_built_with_reduce_results_false_has_no_all_reduce(session, hf):
    """Qwen2-MoE's shared expert builds down_proj with reduce_results=False: the reduction happens once, after
    the shared and routed outputs are combined. No all-reduce op at it, no GEMM + all-reduce scenario, and no
    printed condition carries the decided literal (`when False and ...`)."""
    a = analyze_in(session, "Qwen2MoeForCausalLM", Options(hf_root=hf))
    shared = [op for op in a.walk.ops if op.path.startswith("model.layers.mlp.experts.shared_experts")]
    assert any(op.name == "down_proj" for op in shared)
    assert not any(op.kind == "allreduce" for op in shared)
    reduces = [op for op in after_first(a.walk.ops) if op.kind == "allreduce"]
    assert [op.attrs["inside"] for op in reduces] == ["o_proj"]  # the attention's row-parallel all-reduce only
    assert [o.id for o in a.opportunities if o.scenario == "matmul_allreduce"] == ["matmul_allreduce@Qwen2MoeAttention.forward"]
    printed = [op.condition or "" for op in a.walk.ops] + [c for o in a.opportunities for c in o.conditions]
    assert not any("False and" in c or c.startswith("when False") for c in printed)


def test_dense_gemm_then_swiglu_is_open_on_ascend_with_a_stub_that_runs(session, hf, run, tmp_path, torch):
    """The gate/up GEMM and SwiGLU run as two kernels on Ascend (unquantized_gemm, then npu_swiglu): the
    MatMul + gated activation scenario is open, and its stub's reference runs on the CPU."""
    import importlib.util

    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf))
    o = _opp(a, "matmul_swiglu")
    assert str(o.status) == "open"
    assert o.note == "the Ascend path runs it as separate kernels: torch.ops.vllm.unquantized_gemm, torch_npu.npu_swiglu"
    assert [e["line"] for e in o.evidence] == [112, 113]  # qwen2.py: gate_up_proj, then act_fn
    stubs = tmp_path / "stubs.py"
    r = run("qwen3", "--vllm-root", str(session.vllm.root), "--ascend-root", str(session.ascend.root),
            "--hf-root", hf, "-o", str(tmp_path / "r.md"), "--stubs", str(stubs))
    assert r.exit_code == 0, r.output
    spec = importlib.util.spec_from_file_location("stubs", stubs)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.reference_fused_matmul_swiglu(**mod.example_inputs("fused_matmul_swiglu"))
    assert torch.is_tensor(out) and list(out.shape) == mod.expected_shapes("fused_matmul_swiglu")[0]


def test_a_bias_the_configuration_sets_is_decided(session, hf):
    """GLM-4 builds qkv_proj with bias=getattr(config, "attention_bias", False); Glm4Config declares
    attention_bias = True, so the bias is in the GEMM (vllm-ascend's unquantized_gemm: F.linear(x, w, bias)),
    not a non-default configuration; o_proj has none, so no bias scenario there."""
    a = analyze_in(session, "Glm4ForCausalLM", Options(hf_root=hf))
    by = {op.name: op for op in a.walk.ops if op.kind == "matmul"}
    assert by["qkv_proj"].attrs["bias"] == "True" and by["o_proj"].attrs["bias"] == "False"
    (o,) = [o for o in a.opportunities if o.scenario == "matmul_bias"]
    assert str(o.status) == "fused_in_model" and o.id == "matmul_bias@Glm4Attention.forward"


def test_a_cuda_pass_a_function_turns_off_is_off(session, hf):
    """QkNormRopeKvCacheFusionPass is on at O2 only when enable_qk_norm_rope_kvcache() holds, which returns
    False unless ROCm's AITER is enabled: on CUDA it is off, so RoPE + KV-cache is no CUDA-only fusion."""
    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf))
    (o,) = [o for o in a.opportunities if o.scenario == "rope_kvcache"]
    assert o.cuda["status"] == "pass_off_by_default" and not o.cuda_only
    _ascend, cuda = session.passes()
    (p,) = [p for p in cuda if p.name == "QkNormRopeKvCacheFusionPass"]
    assert p.default.startswith("False (enable_qk_norm_rope_kvcache() on CUDA, vllm/config/vllm.py:")


def test_gpt_oss_rope_is_yarn_from_its_own_dict_literal(session, hf):
    """gpt_oss.py passes get_rope a rope_parameters dict whose "rope_type" is the literal "yarn" (its other
    items are configuration values): YaRNScalingRotaryEmbedding, AscendYaRNRotaryEmbedding on Ascend."""
    a = analyze_in(session, "GptOssForCausalLM", Options(hf_root=hf))
    # one rope op per kind of decoder layer (the preset's two: sliding-window layers and the others, the first
    # layer walked apart), the same
    assert [kd["layers"] for kd in a.walk.layer_kinds] == [[0], list(range(1, 36, 2)), list(range(2, 36, 2))]
    ropes = [op for op in a.walk.ops if op.kind == "rope"]
    assert [op.attrs.get("layer_kind") for op in ropes] == [0, 1, 2]
    for rope in ropes:
        assert rope.layer_class == "YaRNScalingRotaryEmbedding" and rope.attrs["ascend_class"] == "AscendYaRNRotaryEmbedding"
        assert rope.condition is None


def test_one_row_per_fusion_across_the_layer_boundary(session, hf):
    """The all-reduce of each layer's down_proj feeds the next layer's input norm, and the last layer's the
    final norm: one fusion with one row, two instances per layer (o_proj's and down_proj's), none counted
    twice (issue 17)."""
    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf, config="Qwen3-8B", tp=2))
    rows = [o for o in a.opportunities if o.scenario == "allreduce_norm"]
    assert [o.id for o in rows] == ["allreduce_norm@Qwen3DecoderLayer.forward"]
    (o,) = rows
    assert "model.norm:norm" in o.ops  # the final norm is one of its sites
    b = a.report["opportunities"][[x["id"] for x in a.report["opportunities"]].index(o.id)]["benefit"]
    assert b["numbers"]["decode"]["instances"] == 2  # o_proj's and down_proj's, the final norm's not again
    assert b["numbers"]["decode"]["model"]["launches"] == 2 * 36  # Qwen3-8B: 36 layers
