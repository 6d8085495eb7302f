"""Precision of claims on the released 0.30 pair (issue 20): a graph pass fits when the graph its pattern
traces is the model's (here: a per-head q/k norm is not a norm over the whole projection), and shapes are
attrs of the ops (from constructor arguments and configuration values)."""

from __future__ import annotations

from fusion_analyze.pipeline import Options, analyze_in


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
    splits = [op for op in a.walk.ops if op.kind == "split" and op.file == "vllm/distributed/utils.py"]
    assert len(splits) == 2 and all(op.condition == "self.tp_size > 1" for op in splits)
    assert not any(op.name in ("functools.partial", "splitter") for op in a.walk.ops)


def test_a_per_head_qk_norm_still_fits_the_pass(session, hf):
    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf))
    norms = [op for op in a.walk.ops if op.name in ("q_norm", "k_norm")]
    assert {op.attrs["values"]["hidden_size"] for op in norms} == {128}
    o = _opp(a, "qknorm_rope")
    assert str(o.status) == "fused_by_ascend_graph_pass"
    assert not any("normalise" in c for c in o.conditions)  # both widths known and equal: nothing to say
