"""The step cost model on the 0.30 pair with published configurations (issue 35): MoE sizes, per-rank scaling
under --tp / --ep, branches that cannot both run counted once, and no saving larger than the step it is part of."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.estimate.cost import counted

# https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json (the fields the walk and the estimate read;
# quantization_config left out: the bf16 weights)
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "num_hidden_layers": 61, "first_k_dense_replace": 3, "num_attention_heads": 128,
    "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280, "max_position_embeddings": 163840,
    "rope_theta": 10000, "rms_norm_eps": 1e-06, "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4,
    "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "norm_topk_prob": True, "moe_layer_freq": 1,
    "torch_dtype": "bfloat16", "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
}


@pytest.fixture(scope="module")
def dsv3(tmp_path_factory):
    p = tmp_path_factory.mktemp("dsv3") / "config.json"
    p.write_text(json.dumps(DEEPSEEK_V3), encoding="utf-8")
    return str(p)


def _ops(a, pred):
    return [o for o in a.walk.ops if counted(o) and pred(o)]


def test_deepseek_v3_shared_and_routed_experts_are_sized_from_moe_intermediate_size(session, hf, dsv3):
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf, config=dsv3))
    step = a.steps["decode"].step
    n, h = 32, 7168
    # the shared expert: moe_intermediate_size x n_shared_experts = 2048 wide, not the dense 18432
    (shared,) = _ops(a, lambda o: o.attrs.get("role") == "shared_expert" and o.attrs.get("merged") == "gate_up")
    assert step.costs[shared.id].flops == 2 * n * h * 2 * 2048
    # the routed experts: num_experts_per_tok = 8 token-expert pairs per token through 2048-wide experts
    (gemm1,) = _ops(a, lambda o: o.attrs.get("step") == "gemm1")
    assert step.costs[gemm1.id].flops == 2 * (n * 8) * h * 2 * 2048
    # decode reads the weights of the experts its 256 pairs hit: 256 x (1 - (1 - 1/256)^256) of the 256
    hit = 256 * (1 - (1 - 1 / 256) ** (n * 8))
    assert step.costs[gemm1.id].bytes == pytest.approx((hit * h * 2 * 2048 + n * 8 * (h + 2 * 2048)) * 2)


def test_tp_and_ep_cost_one_rank(session, hf, dsv3):
    one = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf, config=dsv3))
    tp8 = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf, config=dsv3, tp=8))
    ep8 = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf, config=dsv3, tp=8, ep=8))

    def flops(a, pred):
        (o,) = _ops(a, pred)
        return a.steps["prefill"].step.costs[o.id].flops

    gemm1 = lambda o: o.attrs.get("step") == "gemm1"  # noqa: E731
    shared = lambda o: o.attrs.get("role") == "shared_expert" and o.attrs.get("merged") == "gate_up"  # noqa: E731
    assert flops(tp8, shared) == flops(one, shared) / 8
    assert flops(tp8, gemm1) == flops(one, gemm1) / 8  # without EP the experts' width is split by TP
    assert flops(ep8, gemm1) == flops(one, gemm1) / 8  # with EP a rank runs an eighth of the pairs, whole experts
    assert one.steps["prefill"].step.total_us > tp8.steps["prefill"].step.total_us
    # the report's numbers follow: a rank of TP 8 saves less per step than one rank alone
    row = "matmul_swiglu@Qwen2MLP.forward"
    q1 = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf, config="Qwen3-8B"))
    q2 = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf, config="Qwen3-8B", tp=2))
    b1, b2 = q1.benefits[row].numbers["prefill"], q2.benefits[row].numbers["prefill"]
    assert b2["per_layer"]["bytes"] == b1["per_layer"]["bytes"] / 2
    # an all-reduce fusion: nothing to fuse at vLLM's default TP 1, costed at TP 2
    ar = "allreduce_norm@Qwen3DecoderLayer.forward"
    assert q1.benefits[ar].rejected and q1.benefits[ar].numbers["decode"]["model"]["time_us"] == 0
    assert not q2.benefits[ar].rejected and q2.benefits[ar].numbers["decode"]["model"]["time_us"] > 0


def test_branches_that_cannot_both_run_are_counted_once(session, hf, dsv3):
    """DeepSeek-V3's MoE block sits under `if self.use_sequence_parallel_moe`, which the deployment decides (false
    at vLLM's defaults: it needs expert parallelism): one side is walked, and its fusions count once. Where a
    test stays open, both sides' matches count once too."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf, config=dsv3))
    (row,) = [o for o in a.opportunities if o.id == "router_experts@DeepseekV2MoE.forward"]
    for n in a.benefits[row.id].numbers.values():
        assert n["instances"] == 1
    # the step adds the ops of one side only
    moe = [o for o in a.walk.ops if o.kind == "moe" and o.section == "layer"]
    assert moe and sum(1 for o in moe if counted(o)) == 1
    sides = {tuple(sorted(o.branches)) for m in row.matches for o in m.op_list}
    assert len(row.matches) == len(sides)  # one match per side that can run


@pytest.mark.parametrize("model, config", [
    ("Qwen3ForCausalLM", "Qwen3-8B"), ("Qwen3ForCausalLM", "Qwen3-0.6B"),
    ("Qwen3MoeForCausalLM", "Qwen3-30B-A3B"), ("DeepseekV3ForCausalLM", None)])
@pytest.mark.parametrize("tp", [1, 8])
def test_no_saving_larger_than_its_step(session, hf, dsv3, model, config, tp):
    a = analyze_in(session, model, Options(hf_root=hf, config=config or dsv3, tp=tp))
    assert a.steps, "a configuration gives every step a cost"
    for oid, b in a.benefits.items():
        for name, n in b.numbers.items():
            step = a.steps[name].step
            assert 0 <= n["model"]["time_us"] <= step.total_us + 0.1, (oid, name)
            assert n["per_layer"]["time_us"] <= step.layer_us + 0.01, (oid, name)
            assert 0 <= n["share_of_step"] <= 1


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_first_40_lines_name_the_top_open_opportunities_in_order_of_saving(session, hf, lang):
    """Qwen3-8B by its marketing name (its preset applied): the report's first 40 lines hold the ranked list,
    its rows the open rows that pay, largest share of a step first, each with its savings, where to change the
    code and the kernel to write."""
    from fusion_analyze.render.markdown import render_data, saving_share

    a = analyze_in(session, "Qwen3-8B", Options(hf_root=hf))
    head = render_data(a.report, lang=lang).splitlines()[:40]
    rows = [line for line in head if line.startswith("| ") and "`" in line and line.split("|")[1].strip().isdigit()]
    ranked = sorted((o for o in a.report["opportunities"] if saving_share(o) > 0),
                    key=lambda o: (-saving_share(o), o["id"]))
    assert len(ranked) >= 2 and len(rows) == min(len(ranked), 5)
    for i, (line, o) in enumerate(zip(rows, ranked), 1):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == str(i) and f"`{o['id']}`" in cells[1]
        assert cells[2].endswith("%)") and cells[3].endswith("%)")  # decode and prefill savings with their share
        assert f"`{o['file']}` L{o['line']}" == cells[4] and o["interface"]["name"] in cells[5]
    assert ranked[0]["id"] == "matmul_swiglu@Qwen2MLP.forward"  # the largest: a 4 ms prefill saving of 220 ms


def test_readable_choices_blocks_and_alternatives(session, hf):
    """Issue 35, readable: a class the configuration decided is one line (the list in the JSON); a condition a
    block of ops shares is said once above it; the other side of an undecided test (DeepSeek-V3's second MoE
    block) is listed apart, not as a second copy in the layer's sequence."""
    from fusion_analyze.render.markdown import render_data

    q = analyze_in(session, "Qwen3-8B", Options(hf_root=hf))
    text = render_data(q.report, lang="en")
    (alt,) = [a for a in q.report["alternatives"] if a["path"].endswith("rotary_emb")]
    assert alt["decided"] and len(alt["choices"]) >= 10  # the JSON keeps every class the other values build
    (line,) = [t for t in text.splitlines() if "rotary_emb`: `RotaryEmbedding`" in t]
    assert f"{len(alt['choices'])} other classes for other values" in line
    assert "YaRNScalingRotaryEmbedding" not in text

    d = analyze_in(session, "DeepSeek-V3", Options(hf_root=hf))
    text = render_data(d.report, lang="en")
    # the MoE layers' sequence block (layers 3-60: the first three are dense, a kind of their own, and the first
    # layer walked apart)
    seq = text.split("Decoder layer, kind 3: layers 3–60", 1)[1].split("```", 2)[1]
    assert sum(1 for t in seq.splitlines() if t.startswith("moe ")) == 1  # one MoE block on the walked path
    # `use_sequence_parallel_moe` is decided (false at TP 1): no other side of the MoE block is listed
    assert not any(not o["on_path"] and o["kind"] == "moe" for o in d.report["ops"])
    headers = [t for t in seq.splitlines() if t.startswith("# if ")]
    assert headers  # a shared condition said once
    after = seq.split(headers[0], 1)[1].splitlines()[1]
    assert "[" not in after or " if " not in after.split("[", 1)[1]  # not repeated on the ops under it
