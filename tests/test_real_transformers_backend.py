"""Architectures vLLM serves through its Transformers modeling backend (issue 18): the transformers modeling
file is walked, with the backend's load-time rewrites (fuser.py FUSERS) applied as vLLM applies them, on the
0.30 pair with transformers 5.23.0, and Gemma on vLLM 0.34.0 (where it moved to the backend)."""

from __future__ import annotations

import pytest

from fusion_analyze.errors import UserError
from fusion_analyze.analysis.pipeline import Options, analyze_in

from .conftest import validate_report


def _op(a, path_end: str, kind: str | None = None):
    found = [op for op in a.walk.ops if (op.path.endswith(path_end) or op.id.endswith(path_end))
             and (kind is None or op.kind == kind)]
    assert found, f"no op {path_end} in {[op.path for op in a.walk.ops]}"
    return found[0]


def _status(a, scenario: str):
    found = [o for o in a.opportunities if o.scenario == scenario]
    assert found, f"no {scenario} in {[o.scenario for o in a.opportunities]}"
    return found[0]


def _order(a, *ops):
    positions = [a.walk.ops.index(op) for op in ops]
    assert positions == sorted(positions), [op.path for op in ops]


def test_olmo2_walks_the_modeling_file_with_the_backend_fusers(session, hf):
    a = analyze_in(session, "Olmo2ForCausalLM", Options(hf_root=hf))
    src = "transformers/models/olmo2/modeling_olmo2.py"
    assert a.report["locations"]["model"]["class"] == "TransformersForCausalLM"
    assert a.report["locations"]["decoder_layer"] == {**a.report["locations"]["decoder_layer"], "class": "Olmo2DecoderLayer",
                                                      "file": src, "line": 277}
    ev = a.report["model"]["verification"]
    assert ev[0]["file"] == "vllm/model_executor/models/registry.py" and '"Olmo2ForCausalLM": ("transformers"' in ev[0]["text"]
    assert {"file": src, "line": 412, "text": "class Olmo2ForCausalLM"} in ev

    qkv = _op(a, "self_attn.qkv_proj")  # QKVFuser: q_proj, k_proj, v_proj -> one QKVParallelLinear
    assert (qkv.kind, qkv.layer_class, qkv.file, qkv.line) == ("matmul", "QKVParallelLinear", src, 227)
    assert qkv.attrs["ascend_class"] == "AscendQKVParallelLinear" and "QKVFuser" in qkv.attrs["fused_by"]
    assert not [op for op in a.walk.ops if op.path.endswith((".q_proj", ".k_proj", ".v_proj"))]
    q_norm = _op(a, "self_attn.q_norm")  # RMSNormFuser: vLLM's RMSNorm behind TPAwareRMSNorm ...
    assert (q_norm.kind, q_norm.layer_class, q_norm.line) == ("rmsnorm", "TPAwareRMSNorm", 227)
    assert "forward_native" in q_norm.attrs["native"]  # ... whose registered name Ascend does not replace
    rope = _op(a, "self_attn:apply_rotary_pos_emb")
    assert (rope.kind, rope.line) == ("rope", 236) and "PyTorch ops" in rope.attrs["native"]
    attn = _op(a, "self_attn.attn", "attention")  # AttentionFuser: the interface call runs vLLM's Attention
    assert (attn.layer_class, attn.line) == ("Attention", 245)
    assert any("attention" in k.name for k in attn.kernels)
    o_proj = _op(a, "self_attn.o_proj", "matmul")
    assert (o_proj.layer_class, o_proj.attrs["ascend_class"], o_proj.line) == ("RowParallelLinear", "AscendRowParallelLinear", 257)
    gate_up = _op(a, "mlp.gate_up_proj")  # GLUFuser: act(gate(x)) * up(x) -> act(gate_up(x))
    act = _op(a, "mlp.act_fn")
    down = _op(a, "mlp.down_proj", "matmul")
    assert (gate_up.layer_class, gate_up.line) == ("MergedColumnParallelLinear", 273)
    assert (act.kind, act.layer_class, act.attrs["ascend_class"]) == ("silu_mul", "SiluAndMul", "AscendSiluAndMul")
    assert [k.name for k in act.kernels] == ["torch_npu.npu_swiglu"]
    assert down.layer_class == "RowParallelLinear"
    assert not [op for op in a.walk.ops if op.path.endswith((".gate_proj", ".up_proj"))]
    _order(a, qkv, q_norm, rope, attn, o_proj, gate_up, act, down)

    merge = _status(a, "gate_up_merge")
    assert merge.status == "fused_in_model" and "GLUFuser" in merge.evidence[0]["what"]
    assert _status(a, "qkv_merge").status == "fused_in_model"
    assert _status(a, "silu_mul").status == "fused_by_ascend_kernel"
    assert _status(a, "qknorm_rope").status == "open"  # native norms and rope primitives on Ascend

    fusers = a.report["load_time_fusers"]
    assert {(f["class"], f["fuser"].split()[0]) for f in fusers["applied"]} == {
        ("Olmo2Attention", "AttentionFuser"), ("Olmo2Attention", "QKVFuser"), ("Olmo2MLP", "GLUFuser"),
        ("Olmo2RMSNorm", "RMSNormFuser")}
    # read from fuser.py FUSERS: the three the catalog does not model are listed, never silently ignored
    assert fusers["not_modelled"] == ["MLAFuser", "MergedColumnParallelFuser"]
    assert not [u for u in a.report["unknown_callees"] if "modeling_olmo2" not in u["file"]]
    validate_report(a.report)


def test_starcoder2_keeps_its_layernorm_and_takes_the_tp_plan_for_its_mlp(session, hf):
    a = analyze_in(session, "Starcoder2ForCausalLM", Options(hf_root=hf))
    src = "transformers/models/starcoder2/modeling_starcoder2.py"
    norm = _op(a, "input_layernorm")
    assert (norm.kind, norm.layer_class, norm.file, norm.line) == ("layernorm", "LayerNorm", src, 224)
    assert "ascend_class" not in norm.attrs  # nn.LayerNorm: no fuser rewrites it
    qkv = _op(a, "self_attn.qkv_proj")
    attn = _op(a, "self_attn.attn", "attention")
    c_fc = _op(a, "mlp.c_fc", "matmul")  # tp_plan "layers.*.mlp.c_fc": "colwise"
    gelu = _op(a, "mlp.act:gelu")  # ACT2FN["gelu_pytorch_tanh"]: GELUTanh's partial(nn.functional.gelu)
    c_proj = _op(a, "mlp.c_proj", "matmul")  # tp_plan "rowwise"
    assert (qkv.line, attn.line) == (169, 183)
    assert (c_fc.layer_class, c_fc.attrs["ascend_class"], c_fc.line) == ("ColumnParallelLinear", "AscendColumnParallelLinear", 62)
    assert (gelu.kind, gelu.file, gelu.line) == ("gelu", "transformers/activations.py", 51)
    assert (c_proj.layer_class, c_proj.line) == ("RowParallelLinear", 64)
    _order(a, norm, qkv, attn, c_fc, gelu, c_proj)
    assert not [f for f in a.report["load_time_fusers"]["applied"] if f["fuser"].startswith("GLUFuser")]
    validate_report(a.report)


def test_gpt_bigcode_packed_qkv_becomes_one_qkv_parallel_linear(session, hf):
    a = analyze_in(session, "GPTBigCodeForCausalLM", Options(hf_root=hf))
    c_attn = _op(a, "attn.c_attn", "matmul")  # PackedQKVFuser: c_attn(x).split((q, kv, kv)) -> QKVParallelLinear
    assert (c_attn.layer_class, c_attn.line) == ("QKVParallelLinear", 201) and "PackedQKVFuser" in c_attn.attrs["fused_by"]
    assert _op(a, "attn.c_proj", "matmul").layer_class == "RowParallelLinear"
    assert _op(a, "mlp.c_proj", "matmul").layer_class == "ReplicatedLinear"  # no tp_plan: "replicate"
    validate_report(a.report)


def test_the_moe_backend_replaces_the_experts_and_routes_as_moe_mixin_decides(session, hf):
    """TransformersMoEForCausalLM (MoEMixin) replaces each MoE block's `experts` with what its
    FusedMoEFactory(...) builds. FlexOlmo's router holds only a `weight` and computes topk(softmax(linear(x))):
    the block's forward becomes `_moe_block_forward` and the runner routes (internal routing), on Ascend through
    AscendMoERunner's router kernel. HunYuan-MoE's gate holds an nn.Linear: its own forward routes (external
    routing) and the experts are a TransformersMoERunner, which the Ascend registry does not replace."""
    a = analyze_in(session, "FlexOlmoForCausalLM", Options(hf_root=hf))
    experts = _op(a, "mlp.experts", "moe")
    assert (experts.layer_class, experts.attrs["ascend_class"]) == ("MoERunner", "AscendMoERunner")
    assert experts.file == "vllm/model_executor/models/transformers/fusers/moe.py"  # _moe_block_forward
    assert "MoEMixin" in experts.attrs["fused_by"]
    router = _op(a, "mlp.experts.router")
    assert router.layer_class == "AscendFusedTopKRouter"
    assert not [op for op in a.walk.ops if ".mlp.gate" in op.path]  # the HF router is not walked: the runner routes
    assert _status(a, "gate_topk").status == "fused_by_ascend_kernel"
    applied = {(f["class"], f["what"]) for f in a.report["load_time_fusers"]["applied"] if f["fuser"].startswith("MoEMixin")}
    assert applied == {("FlexOlmoSparseMoeBlock", "experts -> MoERunner, forward -> _moe_block_forward (internal routing)")}

    a = analyze_in(session, "HunYuanMoEV1ForCausalLM", Options(hf_root=hf))
    experts = _op(a, "mlp.experts", "moe")
    assert experts.layer_class == "TransformersMoERunner" and "ascend_class" not in experts.attrs
    assert not [op for op in a.walk.ops if op.path.startswith("model.layers.mlp.experts.")]  # no runner parts
    topk = _op(a, "mlp.gate:topk")  # the block's own gate routes
    assert topk.file.endswith("modeling_hunyuan_v1_moe.py")
    assert {str(o.status) for o in a.opportunities if o.scenario == "gate_topk"} == {"open"}


def test_smollm3_rope_stays_under_its_per_layer_condition(session, hf):
    """SmolLM3Attention.__init__: `self.use_rope = config.no_rope_layers[layer_idx]` (SmolLM3Config builds the
    list: a NoPE layer every `no_rope_layer_interval` = 4th of 36), its forward `if self.use_rope:`. The index
    reaches the attention as `layer_idx=layer_idx`: the layers are two kinds, told apart by
    self_attn.use_rope, and the rope op runs in the RoPE kind only, where the test is decided (no condition)."""
    a = analyze_in(session, "SmolLM3ForCausalLM", Options(hf_root=hf))
    kinds = a.walk.layer_kinds
    assert [kd["differs"] for kd in kinds] == [{"self_attn.use_rope": "1"}, {"self_attn.use_rope": "0"}]
    assert kinds[0]["layers"] == [i for i in range(36) if (i + 1) % 4] and kinds[1]["layers"] == list(range(3, 36, 4))
    ropes = [op for op in a.walk.ops if op.id.split("#")[0].endswith("self_attn:apply_rotary_pos_emb")]
    assert [(op.kind, op.attrs.get("layer_kind"), op.condition) for op in ropes] == [("rope", 0, None)]
    for k in (0, 1):  # the rest of the layer is the same in both kinds
        ops = [op for op in a.walk.ops if op.section == "layer" and op.attrs.get("layer_kind") == k]
        assert [op.layer_class for op in ops if op.path.endswith("input_layernorm")] == ["TPAwareRMSNorm"], k
        assert [op.layer_class for op in ops if op.path.endswith("mlp.act_fn")] == ["SiluAndMul"], k
        assert [op.line for op in ops if op.kind == "attention"] == [225], k
    assert {op.attrs.get("layer_kind") for op in a.walk.ops if op.section == "layer"} == {0, 1}
    validate_report(a.report)


def test_a_backend_model_without_a_transformers_tree_is_an_error_not_an_empty_report(tmp_path, real_tree):
    from fusion_analyze.analysis.session import Session

    s = Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))
    if s.hf_tree(None) is not None:
        pytest.skip("an installed transformers serves as the tree")
    with pytest.raises(UserError, match="Transformers modeling backend.*--hf-root"):
        analyze_in(s, "Olmo2ForCausalLM", Options())


def test_all_includes_the_backend_architectures(run, hf, tmp_path, real_tree):
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    out = tmp_path / "out"
    result = run("all", "--vllm-root", str(vllm), "--ascend-root", str(ascend), "--hf-root", hf,
                 "--only", "Olmo2ForCausalLM,Olmo3ForCausalLM", "-o", str(out), "-j", "1")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.glob("*.md") if p.name != "index.md") == [
        "Olmo2ForCausalLM.md", "Olmo3ForCausalLM.md"]
    assert "TPAwareRMSNorm" in (out / "Olmo2ForCausalLM.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def session34(real_tree):
    from fusion_analyze.analysis.session import Session

    return Session.open(str(real_tree("vllm==0.34.0")), str(real_tree("vllm-ascend==0.30.0rc2")))


def test_gemma_on_034_is_a_backend_model_with_the_gemma_norm(session34, hf):
    a = analyze_in(session34, "GemmaForCausalLM", Options(hf_root=hf))
    src = "transformers/models/gemma/modeling_gemma.py"
    assert a.report["locations"]["decoder_layer"]["file"] == src
    norm = _op(a, "input_layernorm")
    # RMSNormFuser's zero-centred form; transformers' own GemmaRMSNorm is not the vLLM class Ascend replaces
    assert (norm.layer_class, norm.file, norm.line) == ("TPAwareGemmaRMSNorm", src, 306)
    assert "ascend_class" not in norm.attrs
    gate_up = _op(a, "mlp.gate_up_proj")
    act = _op(a, "mlp.act_fn")
    assert (gate_up.layer_class, gate_up.line) == ("MergedColumnParallelLinear", 95)
    assert act.layer_class == "GeluAndMul"  # GemmaConfig.hidden_act defaults to gelu_pytorch_tanh
    assert _op(a, "self_attn.attn", "attention").line == 268
    validate_report(a.report)


def test_tp_plan_styles_that_differ_by_path_are_said(session, hf, tmp_path):
    """Llama4's text tp_plan gives `down_proj` colwise under one path and rowwise under another. A rewrite
    that knows only the attribute name takes the first and says the other, rather than choosing silently."""
    import json
    from fusion_analyze.sources.trees import open_tree
    from fusion_analyze.walk.construction.constructor import Constructor
    from fusion_analyze.config.model_config import load_facts
    from fusion_analyze.semantics.environment import Environment
    from fusion_analyze.walk.hf.fusers import LoadTime

    tree = open_tree(hf, "transformers", required=True)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama4_text"}), encoding="utf-8")
    facts = load_facts("Llama4ForCausalLM", "llama4", [session.vllm, tree], str(config))
    assert facts.cls.name == "Llama4TextConfig"
    lt = LoadTime(Constructor(session.index, Environment(session.index.backend, session.index, config=facts)))
    assert set(lt.plan_styles("down_proj")) == {"colwise", "rowwise"}
    assert lt.plan_styles("o_proj") == ["rowwise"]
