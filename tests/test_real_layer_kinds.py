"""Layer kinds from the configuration (issue 45, item 2), on the 0.30 pair: with a configuration, the tests on
the layer index are decided for every layer, the layers grouped into kinds by their outcome, each kind walked
once and counted; the cost model sums the kinds."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.render.markdown import render_markdown

from .conftest import FIXTURES, validate_report


@pytest.fixture(scope="module")
def dsv3(session):
    return analyze_in(session, "deepseek-v3", Options(config="DeepSeek-V3"))


@pytest.fixture(scope="module", params=["full_attention_interval", "layer_types"])
def qwen3_next(session, tmp_path_factory, request):
    """A Qwen3-Next config.json as the checkpoint's (Qwen/Qwen3-Next-80B-A3B-Instruct): 48 layers, a
    full-attention layer every fourth, said by `full_attention_interval` alone (vLLM's Qwen3NextConfig builds
    `layer_types` in its __init__: the configuration reader runs that), or with `layer_types` written out."""
    layer_types = ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(48)]
    given = {"layer_types": layer_types} if request.param == "layer_types" else {}
    cfg = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "num_hidden_layers": 48,
           "full_attention_interval": 4, **given, "hidden_size": 2048,
           "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 5120,
           "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts": 512,
           "num_experts_per_tok": 10, "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
           "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "rms_norm_eps": 1e-6, "hidden_act": "silu"}
    assert ("layer_types" in cfg) == (request.param == "layer_types")
    path = tmp_path_factory.mktemp("qwen3next") / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return analyze_in(session, "Qwen3NextForCausalLM", Options(config=str(path)))


def test_deepseek_v3_dense_and_moe_layers(dsv3):
    kinds = dsv3.report["layer_kinds"]
    # layer 0 apart: the loop hands it no residual (`residual = None` before it), its input norm is the plain one
    assert [(k["ranges"], k["count"], k["of"]) for k in kinds] == [([[0, 0]], 1, 61), ([[1, 2]], 2, 61),
                                                                   ([[3, 60]], 58, 61)]
    assert [k["differs"]["mlp"] for k in kinds] == ["DeepseekV2MLP", "DeepseekV2MLP", "DeepseekV2MoE"]
    ops = dsv3.report["ops"]
    norms = {o["attrs"]["layer_kind"]: o["kind"] for o in ops if o["name"] == "input_layernorm"}
    assert norms == {0: "rmsnorm", 1: "add_rmsnorm", 2: "add_rmsnorm"}
    # each kind walked once: the MoE ops in the MoE kind only, every kind runs the MLA attention
    moe_kinds = {o["attrs"].get("layer_kind") for o in ops if o["kind"] == "moe"}
    assert moe_kinds == {2}
    assert {o["attrs"].get("layer_kind") for o in ops if o["kind"] == "mla_attention"} == {0, 1, 2}
    assert all("layer_kind" in o["attrs"] for o in ops if o["section"] == "layer")
    # rows say which kinds they hold in
    rows = {o["id"]: o for o in dsv3.report["opportunities"]}
    assert rows["router_experts@DeepseekV2MoE.forward"]["layer_kinds"] == [2]
    assert rows["add_rmsnorm@DeepseekV2DecoderLayer.forward"]["layer_kinds"] == [0, 1, 2]
    validate_report(dsv3.report)


def test_deepseek_v3_step_sums_the_kinds(dsv3):
    for name, model in dsv3.steps.items():
        step = model.step
        assert step.kind_counts == [1, 2, 58] and step.num_layers == 61 and step.moe_layers == 58
        once = sum(step.costs[o.id].time_us(model.device, model.launch) for o in model.ops
                   if o.section != "layer" and o.id in step.counted and step.costs[o.id].known)
        per_kind = [0.0, 0.0, 0.0]
        for o in model.ops:
            if o.section == "layer" and o.id in step.counted and step.costs[o.id].known:
                per_kind[o.attrs["layer_kind"]] += step.costs[o.id].time_us(model.device, model.launch)
        assert step.kind_us == pytest.approx(per_kind)
        assert per_kind[2] > per_kind[1] > 0 and per_kind[0] > 0, name  # a MoE layer costs more than a dense one
        assert step.total_us == pytest.approx(once + per_kind[0] + 2 * per_kind[1] + 58 * per_kind[2] - step.fused_us)
        j = dsv3.report["estimate"]["steps"][name]
        assert [k["count"] for k in j["layer_kinds"]] == [1, 2, 58]


def test_deepseek_v3_markdown_states_both_kinds(dsv3):
    md = render_markdown(dsv3, lang="en")
    assert "Decoder layer, kind 1: layers 0 (1 of 61)" in md and "the loop's initial value (the first layer)" in md
    assert "Decoder layer, kind 2: layers 1–2 (2 of 61)" in md
    assert "Decoder layer, kind 3: layers 3–60 (58 of 61)" in md
    assert "in kind 3 layers only" in md


def test_qwen3_next_linear_and_full_attention_layers(qwen3_next):
    kinds = qwen3_next.report["layer_kinds"]
    # the first layer apart (the loop hands it no residual: its input norm is the plain one)
    assert [(k["count"], k["of"]) for k in kinds] == [(1, 48), (35, 48), (12, 48)]
    assert kinds[0]["layers"] == [0] and kinds[1]["layers"] == [i for i in range(1, 48) if (i + 1) % 4]
    assert kinds[2]["layers"] == [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47]
    assert [k["differs"]["layer_type"] for k in kinds] == ["'linear_attention'"] * 2 + ["'full_attention'"]
    assert kinds[2]["differs"]["self_attn"] == "Qwen3NextAttention" and kinds[2]["differs"]["linear_attn"] == "not assigned in this kind"
    # the full-attention kind runs an attention op, the linear-attention kinds none
    attention = {o["attrs"].get("layer_kind") for o in qwen3_next.report["ops"] if o["kind"] == "attention"}
    assert attention == {2}
    md = render_markdown(qwen3_next, lang="en")
    assert "kind 2: layers 1–2, 4–6" in md and "(1 of 48)" in md and "(35 of 48)" in md and "(12 of 48)" in md
    validate_report(qwen3_next.report)


def test_without_configuration_one_layer_is_walked(session):
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options())
    assert a.configuration is None or not a.report["estimate"]["steps"]
    assert a.report["layer_kinds"] == []
    assert not any("layer_kind" in o["attrs"] for o in a.report["ops"])


def _analyze_with(session, hf, tmp_path, arch, cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": [arch], **cfg}), encoding="utf-8")
    return analyze_in(session, arch, Options(config=str(path), hf_root=hf))


def test_gemma3_sliding_window_decided_in_the_attention_class(session, hf, tmp_path):
    """Gemma3Attention reads its index from its prefix (`extract_layer_index(prefix)`, one level below the
    decoder layer) and `config.layer_types`, which Gemma3TextConfig builds from `sliding_window_pattern`: the
    kinds are told apart by `self_attn.is_sliding`."""
    a = _analyze_with(session, hf, tmp_path, "Gemma3ForCausalLM", {
        "model_type": "gemma3_text", "num_hidden_layers": 12, "sliding_window_pattern": 6, "sliding_window": 512,
        "hidden_size": 1152, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
        "intermediate_size": 6912, "vocab_size": 262144})
    kinds = a.report["layer_kinds"]
    assert [k["layers"] for k in kinds] == [[0], [1, 2, 3, 4, 6, 7, 8, 9, 10], [5, 11]]  # layer 0: no residual yet
    # told apart by `is_sliding`; what follows from it in the attention class is said too (the sliding layers'
    # window from the configuration, the full layers' None from the engine's cache_config; each kind's rotary
    # base and dimension: `if rotary_dim := rope_parameters.get("rope_dim", None):` read in the full layers'
    # configuration, the sliding layers' `dict(rope_type=..., rope_theta=...)` not read)
    assert [k["differs"]["self_attn.is_sliding"] for k in kinds] == ["True", "True", "False"]
    assert [k["differs"].get("self_attn.attn.sliding_window") for k in kinds] == ["512", "512", "None"]
    assert all(set(k["differs"]) <= {"self_attn.is_sliding", "self_attn.attn.sliding_window", "self_attn.rotary_emb.base",
                                     "self_attn.rotary_emb.rotary_dim", "residual"}
               for k in kinds), [k["differs"] for k in kinds]
    validate_report(a.report)


def test_qwen3_moe_mlp_only_layers(session, hf, tmp_path):
    """Qwen3MoeDecoderLayer: `layer_idx not in mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0`."""
    a = _analyze_with(session, hf, tmp_path, "Qwen3MoeForCausalLM", {
        "model_type": "qwen3_moe", "num_hidden_layers": 6, "mlp_only_layers": [0, 5], "decoder_sparse_step": 1,
        "num_experts": 8, "num_experts_per_tok": 2, "hidden_size": 512, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 1024, "moe_intermediate_size": 256,
        "vocab_size": 1000})
    kinds = a.report["layer_kinds"]
    first, rest = "the loop's initial value (the first layer)", "the previous layer's output"
    assert [(k["layers"], k["differs"]) for k in kinds] == [([0], {"mlp": "Qwen3MoeMLP", "residual": first}),
                                                             ([1, 2, 3, 4], {"mlp": "Qwen3MoeSparseMoeBlock"}),
                                                             ([5], {"mlp": "Qwen3MoeMLP", "residual": rest})]
    assert {o["attrs"].get("layer_kind") for o in a.report["ops"] if o["kind"] == "moe"} == {1}


@pytest.fixture(scope="module")
def kimi(session, hf):
    """Kimi-Linear (fixtures/configs/kimi-linear-kda-mla.json, 27 layers): vllm-ascend's AscendKimiDecoderLayer
    (models/kimi_k3.py) builds its attention by `config.is_kda_layer(layer_idx)`, a method of vLLM's
    KimiLinearConfig (`(idx + 1) in linear_attn_config["kda_layers"]`), and its MLP by `is_moe_layer` (a
    property `config.is_moe` and `layer_idx >= first_k_dense_replace`)."""
    return analyze_in(session, "KimiLinearForCausalLM", Options(config=str(FIXTURES / "configs" / "kimi-linear-kda-mla.json"),
                                                               hf_root=hf))


def test_kimi_kda_and_mla_layers_from_config_methods(kimi):
    kinds = kimi.report["layer_kinds"]
    mla = [i for i in range(27) if (i + 1) % 4 == 1 and i > 0]
    assert mla == [4, 8, 12, 16, 20, 24]
    assert [(k["layers"], k["count"], k["of"]) for k in kinds] == [
        ([0], 1, 27), ([i for i in range(1, 27) if i not in mla], 20, 27), (mla, 6, 27)]
    assert [(k["differs"]["self_attn"], k["differs"]["mlp"]) for k in kinds] == [
        ("AscendKimiK3DeltaAttention", "AscendKimiMLP"), ("AscendKimiK3DeltaAttention", "AscendKimiMoE"),
        ("AscendKimiMLAAttention", "AscendKimiMoE")]
    ops = kimi.report["ops"]

    def kinds_of(pred):
        return {o["attrs"].get("layer_kind") for o in ops if pred(o)}

    # each kind walks its own attention class: the KDA kernels (vllm_ascend/ops/kda.py) in the KDA kinds only,
    # the MLA op in the MLA kind only
    assert kinds_of(lambda o: o["name"].endswith("chunk_kda_fwd")) == {0, 1}
    assert kinds_of(lambda o: o["name"].endswith("recurrent_kda")) == {0, 1}
    assert kinds_of(lambda o: o["kind"] == "linear_attention") == {0, 1}
    assert kinds_of(lambda o: o["kind"] == "mla_attention") == {2}
    assert kinds_of(lambda o: o["kind"] == "moe") == {1, 2}
    assert not any(o["attrs"].get("other_branch") for o in ops if o["kind"] in ("linear_attention", "mla_attention"))
    for name, model in kimi.steps.items():
        assert model.step.kind_counts == [1, 20, 6], name
    validate_report(kimi.report)


def test_kimi_undecided_kda_choice_walks_both_classes(session, hf, tmp_path):
    """A configuration that does not say which layers are KDA (`kda_layers` left out): the choice stays
    undecided per layer; the MLA class (the default) is the walk's sequence, the KDA class is walked too,
    under its condition, as the other branch: never only one."""
    cfg = json.loads((FIXTURES / "configs" / "kimi-linear-kda-mla.json").read_text(encoding="utf-8"))
    del cfg["linear_attn_config"]["kda_layers"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    a = analyze_in(session, "KimiLinearForCausalLM", Options(config=str(path), hf_root=hf))
    kinds = a.report["layer_kinds"]
    assert [k["layers"] for k in kinds] == [[0], list(range(1, 27))]
    ops = a.report["ops"]
    for k in (0, 1):
        mla = [o for o in ops if o["kind"] == "mla_attention" and o["attrs"].get("layer_kind") == k]
        kda = [o for o in ops if o["kind"] == "linear_attention" and o["attrs"].get("layer_kind") == k]
        assert len(mla) == 1 and len(kda) == 1, k
        assert kda[0]["attrs"].get("other_branch") and not mla[0]["attrs"].get("other_branch")
        assert "is_kda_layer" in (kda[0].get("condition") or ""), kda[0]
    assert any(o["name"].endswith("chunk_kda_fwd") for o in ops)
    alt = next(x for x in a.report["alternatives"] if x["path"].endswith("layers.self_attn"))
    assert alt["chosen"] == "AscendKimiMLAAttention" and alt["others"][0][0] == "AscendKimiK3DeltaAttention"


@pytest.fixture(scope="module")
def glm_dsa(session, hf):
    return analyze_in(session, "GlmMoeDsaForCausalLM", Options(config=str(FIXTURES / "configs" / "glm-moe-dsa.json"),
                                                               hf_root=hf))


def test_glm_dsa_row_kinds_hold_every_op(glm_dsa):
    """A row's kinds are those every op of a match is walked in (`moe_norm`: the MoE op is in the MoE kind
    only, its norm in both), costed in those layers only; a row on the other branch of an undecided test of
    the attention impl shared by every kind (sfa_v1.py `_q_proj_and_k_up_proj`) holds in every kind."""
    kinds = glm_dsa.report["layer_kinds"]
    assert [(k["ranges"], k["count"]) for k in kinds] == [([[0, 0]], 1), ([[1, 2]], 2), ([[3, 77]], 75)]
    rows = {o["id"]: o for o in glm_dsa.report["opportunities"]}
    moe_norm = rows["moe_norm@DeepseekV2DecoderLayer.forward"]
    assert moe_norm["layer_kinds"] == [2]
    for name, n in moe_norm["benefit"]["numbers"].items():
        assert n["model"]["launches"] == n["per_layer"]["launches"] * 75, name
        assert n["model"]["time_us"] == pytest.approx(n["per_layer"]["time_us"] * 75, rel=0.01), name
    for rid in ("bmm@AscendSFAImpl._q_proj_and_k_up_proj", "transpose_matmul@AscendSFAImpl._q_proj_and_k_up_proj"):
        assert rows[rid]["layer_kinds"] == [0, 1, 2], rid
        held = {o["attrs"].get("layer_kind") for o in glm_dsa.report["ops"] if o["id"] in rows[rid]["ops"]}
        assert held == {0, 1, 2}, rid
    md = render_markdown(glm_dsa, lang="en")
    line = next(x for x in md.splitlines() if "(`bmm@AscendSFAImpl._q_proj_and_k_up_proj`)" in x and "open (" in x)
    assert "layers only" not in line
    line = next(x for x in md.splitlines() if "(`moe_norm@DeepseekV2DecoderLayer.forward`)" in x and "open (" in x)
    assert "in kind 3 layers only" in line
    validate_report(glm_dsa.report)


def test_glm_dsa_rows_join_only_ops_that_run_on_one_path(glm_dsa):
    """The SFA indexer quantises its query GEMM under `if isinstance(q_c, tuple):` (indexer.py), the
    `(q_c, scale)` pair only the fused PROLOG_V3 preprocess hands it. Which preprocess runs is set at load
    (sfa_v1.py `self.preprocess_type = self._resolve_preprocess_type(act_dtype)`), not read: both GEMMs are
    walked, each under its side of the test. No norm + quantize row joins the q_a_layernorm with the quantised
    GEMM; the norm's row is its GEMM q_proj, waiting on a quantised checkpoint. No match of any row joins two ops that cannot run on one path (match/matcher.py `exclusive`)."""
    from fusion_analyze.match.matcher import exclusive

    ops = glm_dsa.report["ops"]
    # the preprocess type is assigned again at load (process_weights_after_loading: `_resolve_preprocess_type`),
    # which the tool does not run: the quantised GEMM is walked only under its test, never unconditioned
    quant = [o for o in ops if o["name"] == "npu_quant_matmul" and o["file"].endswith("attention/indexer.py")]
    assert all("isinstance(q_c, tuple)" in (o["condition"] or "") for o in quant)
    wq_b = [o for o in ops if o["name"] == "wq_b" and o["file"].endswith("attention/indexer.py")]
    assert wq_b and all("not (isinstance(q_c, tuple))" in (o["condition"] or "") for o in wq_b)
    rows = {o["id"]: o for o in glm_dsa.report["opportunities"] if o["scenario"] == "norm_quant"}
    sfa = rows["norm_quant@AscendSFAImpl.forward"]
    assert sfa["status"] == "inactive" and {i.split(":")[-1].split("#")[0] for i in sfa["ops"]} == {"q_a_layernorm", "q_proj"}
    for row in glm_dsa.opportunities:
        for m in row.matches:
            assert not [(a.id, b.id) for i, a in enumerate(m.op_list) for b in m.op_list[i + 1:] if exclusive(a, b)]


@pytest.fixture(scope="module")
def bailing(session, hf):
    """BailingMoeV3 (fixtures/configs/bailing-moe-v3.json: 42 layers, layer_group_size 6, first_k_dense_replace
    2): its layer factory reads the index from the prefix into a local (`layer_idx = int(prefix.split(".")[-1])`)
    and hands that on (`layer_id=layer_idx`); the layer picks KDA unless `_is_kda_layer` (every sixth layer
    is MLA) and MoE where `layer_id >= first_k_dense_replace`."""
    return analyze_in(session, "BailingMoeV3ForCausalLM",
                      Options(config=str(FIXTURES / "configs" / "bailing-moe-v3.json"), hf_root=hf))


def test_bailing_v3_kinds_from_a_local_of_the_layer_factory(bailing):
    kinds = bailing.report["layer_kinds"]
    mla = [i for i in range(42) if (i + 1) % 6 == 0]
    assert mla == [5, 11, 17, 23, 29, 35, 41]
    assert [(k["layers"], k["count"], k["of"]) for k in kinds] == [  # layer 0 apart: no residual yet
        ([0], 1, 42), ([1], 1, 42), ([i for i in range(2, 42) if i not in mla], 33, 42), (mla, 7, 42)]
    assert [(k["differs"]["self_attn"], k["differs"]["mlp"]) for k in kinds] == [
        ("BailingMoeV3KimiDeltaAttention", "BailingMoeV3MLP"), ("BailingMoeV3KimiDeltaAttention", "BailingMoeV3MLP"),
        ("BailingMoeV3KimiDeltaAttention", "BailingMoeV3MoE"), ("BailingMoeV3MLAAttention", "BailingMoeV3MoE")]
    ops = bailing.report["ops"]

    def classes(k):
        return {(o["scope"] or "").split(".")[0] for o in ops if o["attrs"].get("layer_kind") == k}

    # the KDA kinds walk the KDA class only, the MLA kind the MLA class only; MoE in the MoE kinds
    for k in (0, 1, 2):
        assert "BailingMoeV3KimiDeltaAttention" in classes(k) and "BailingMoeV3MLAAttention" not in classes(k), k
    assert "BailingMoeV3MLAAttention" in classes(3) and "BailingMoeV3KimiDeltaAttention" not in classes(3)
    assert {o["attrs"].get("layer_kind") for o in ops if o["kind"] == "linear_attention"} == {0, 1, 2}
    assert {o["attrs"].get("layer_kind") for o in ops if o["kind"] == "mla_attention"} == {3}
    assert {o["attrs"].get("layer_kind") for o in ops if o["kind"] == "moe"} == {2, 3}
    for name, model in bailing.steps.items():
        assert model.step.kind_counts == [1, 1, 33, 7], name
    validate_report(bailing.report)


@pytest.fixture(scope="module")
def mimo(session, hf):
    """MiMo-V2-Flash (fixtures/configs/mimo-v2-flash.json, 48 layers): MiMoV2FlashDecoderLayer builds its MLP
    by `self.is_moe_layer(layer_id)`, a method of the layer taking the index as an argument
    (`hasattr(self.config, "moe_layer_freq") and layer_idx >= 0 and not isinstance(..., int) and
    self.config.moe_layer_freq[layer_idx]`), and its attention by `self.is_compressed_softmax_layer()`
    (`hybrid_layer_pattern[self.layer_id] == 1`: sliding-window attention)."""
    return analyze_in(session, "MiMoV2FlashForCausalLM", Options(config=str(FIXTURES / "configs" / "mimo-v2-flash.json"),
                                                                hf_root=hf))


def test_mimo_three_kinds_from_a_method_with_arguments(mimo):
    cfg = json.loads((FIXTURES / "configs" / "mimo-v2-flash.json").read_text(encoding="utf-8"))
    moe = [i for i, f in enumerate(cfg["moe_layer_freq"]) if f]
    swa = [i for i, p in enumerate(cfg["hybrid_layer_pattern"]) if p == 1]
    expected = [[i for i in range(48) if i not in moe],  # dense MLP (layer 0: full attention)
                [i for i in range(48) if i in moe and i in swa],  # sliding-window attention + MoE
                [i for i in range(48) if i in moe and i not in swa]]  # full attention + MoE
    assert expected == [[0], expected[1], [5, 11, 17, 23, 29, 35, 41, 47]] and len(expected[1]) == 39
    kinds = mimo.report["layer_kinds"]
    assert [(k["layers"], k["count"], k["of"]) for k in kinds] == [(e, len(e), 48) for e in expected]
    assert [k["differs"]["mlp"] for k in kinds] == ["MiMoV2MLP", "MiMoV2MoE", "MiMoV2MoE"]
    # the method's value is its last operand, as Python's `and` gives it
    assert [k["differs"]["is_layer_sparse"] for k in kinds] == ["0", "1", "1"]
    ops = mimo.report["ops"]
    assert {o["attrs"].get("layer_kind") for o in ops if o["kind"] == "moe"} == {1, 2}
    # no op stands under the undecided test any more, and no MLP is an other-branch alternative
    assert not any("is_layer_sparse" in (o.get("condition") or "") for o in ops)
    assert not any(o["attrs"].get("other_branch") for o in ops if o["name"] in ("gate_up_proj", "experts"))
    for name, model in mimo.steps.items():
        assert model.step.kind_counts == [1, 39, 8], name
    md = render_markdown(mimo, lang="en")
    assert "Decoder layer, kind 1: layers 0 (1 of 48)" in md
    assert "(39 of 48)" in md and "(8 of 48)" in md
    validate_report(mimo.report)


def test_mimo_moe_norm_holds_in_every_moe_kind(mimo):
    """Every MoE layer's output feeds the next layer's residual add + norm (or the final norm), whichever kind
    the next layer is: the row holds in both MoE kinds (47 layers), not only in the kind walked last."""
    rows = {o["id"]: o for o in mimo.report["opportunities"]}
    row = rows["moe_norm@MiMoV2FlashDecoderLayer.forward"]
    assert row["layer_kinds"] == [1, 2]
    for name, n in row["benefit"]["numbers"].items():
        assert n["model"]["launches"] == n["per_layer"]["launches"] * 47, name
    for rid in ("router_experts@MiMoV2MoE.forward", "matmul_swiglu@MiMoV2MoE.forward"):
        assert rows[rid]["layer_kinds"] == [1, 2], rid
    assert rows["matmul_swiglu@MiMoV2MLP.forward"]["layer_kinds"] == [0]
    md = render_markdown(mimo, lang="en")
    line = next(x for x in md.splitlines() if "(`moe_norm@MiMoV2FlashDecoderLayer.forward`)" in x and "open (" in x)
    assert "in kind 2, 3 layers only" in line and "if `" not in line
