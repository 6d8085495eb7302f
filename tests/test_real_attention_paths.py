"""A fused-attention claim cites the kernel on the path that runs (issue 20, item 1): the attention backend's
kernels are placed on the decode and prefill paths of a text-generation decoder (walk.yaml
`runtime.attention_paths`), decided with the values the layer builds its implementation with (sinks), and a
dispatching custom op (unified_attention_with_output) or an encoder-only kernel is never the evidence."""

from __future__ import annotations

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.analysis.session import Session

from .conftest import validate_report
from .layers import after_first


def _source(session, ev) -> str:
    root = session.vllm.root if ev["file"].startswith("vllm/") else session.ascend.root
    return (root / ev["file"]).read_text().splitlines()[ev["line"] - 1]


def _opp(a, scenario):
    (o,) = [o for o in a.opportunities if o.scenario == scenario]
    return o


def test_a_decoder_cites_the_fused_infer_kernel_of_its_default_path(session, hf):
    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf))
    o = _opp(a, "flash_attention")
    assert o.status == "fused_by_ascend_kernel"
    ev = o.evidence[0]
    # the last else of forward_impl's chain (no sinks, no sliding window, no paged-attention shape list): the
    # device adaptor's npu_fused_infer_attention_score, on both paths; not the dispatcher, not the encoder's
    assert ev["file"] == "vllm_ascend/device/device_op.py" and ev["what"].endswith("decode and prefill paths)")
    assert "torch_npu.npu_fused_infer_attention_score(" in _source(session, ev)
    assert not any("unified_attention" in e["what"] or "npu_fusion_attention" in e["what"] for e in o.evidence)
    assert not any("sinks" in c for c in o.conditions)  # Qwen3's Attention is built without sinks: decided
    (attn,) = [op for op in after_first(a.walk.ops) if op.kind == "attention"]
    by_line = {(k.name, k.line): k for k in attn.kernels}
    encoder = by_line[("torch_npu.npu_fusion_attention", 1136)]  # _forward_encoder_attention: a pooling model's
    assert "_forward_encoder_attention" in "".join(
        (session.ascend.root / encoder.file).read_text().splitlines()[1080:1136])
    assert encoder.paths == ()  # runs on no path of a generate runner
    validate_report(a.report)
    # one attention op per kind of layer (the first layer walked apart), each with the encoder's kernel on no path
    encoder_json = [k for op in a.report["ops"] if op["kind"] == "attention" for k in op["kernels"]
                    if (k["name"], k["line"]) == ("torch_npu.npu_fusion_attention", 1136)]
    assert len(encoder_json) == len(a.walk.layer_kinds) == 2
    assert all(k["paths"] == {} for k in encoder_json)


def test_a_model_with_attention_sinks_cites_the_sink_kernel(session, hf):
    """GPT-OSS builds its Attention with sinks=self.sinks (a torch.nn.Parameter: never None), so the backend
    runs the v2 kernel with learnable_sink on both paths."""
    a = analyze_in(session, "GptOssForCausalLM", Options(hf_root=hf))
    ev = _opp(a, "flash_attention").evidence[0]
    assert ev["file"] == "vllm_ascend/attention/attention_v1.py"
    assert "npu_fused_infer_attention_score_v2(" in _source(session, ev)
    src = (session.ascend.root / ev["file"]).read_text().splitlines()
    assert "if self.sinks is not None:" in "\n".join(src[ev["line"] - 12:ev["line"]])


def test_mla_cites_the_decode_kernel_and_the_prefill_kernel(session, hf):
    """AscendMLAImpl walked op by op (issue 33): the decode attention is a row of _forward_decode citing
    npu_fused_infer_attention_score_v2 (not its workspace-size query), the prefill one a row of _forward_prefill
    citing npu_fused_infer_attention_score, each at the line that calls it."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf))
    rows = {o.scope: o for o in a.opportunities if o.scenario == "flash_attention"}
    decode, prefill = rows["AscendMLAImpl._forward_decode"], rows["AscendMLAImpl._forward_prefill"]
    for o, call in ((decode, "npu_fused_infer_attention_score_v2"), (prefill, "npu_fused_infer_attention_score(")):
        assert str(o.status) == "fused_by_ascend_kernel"
        ev = o.evidence[0]
        assert ev["file"] == "vllm_ascend/attention/mla_v1.py" and call in _source(session, ev)
        assert "get_max_workspace" not in _source(session, ev)


def test_vllm_ascend_023_device_adaptor_is_decided_by_the_device_type(hf, real_tree):
    """vllm-ascend 0.23 has no hardware profile table: DeviceOperator = get_device_adaptor() is decided by
    get_ascend_device_type(), the AscendDeviceType member the device's soc names (A2: BaseDeviceAdaptor)."""
    s = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    a = analyze_in(s, "Qwen3ForCausalLM", Options(hf_root=hf))
    ev = _opp(a, "flash_attention").evidence[0]
    assert ev["file"] == "vllm_ascend/device/device_op.py" and "decode" in ev["what"]
    assert "torch_npu.npu_fused_infer_attention_score(" in _source(s, ev)
    line = (s.ascend.root / ev["file"]).read_text().splitlines()
    cls = next(l for l in reversed(line[:ev["line"]]) if l.startswith("class "))
    assert cls.startswith("class BaseDeviceAdaptor")


@pytest.mark.parametrize("soc, adaptor", [("A2", "BaseDeviceAdaptor"), ("A5", "A5DeviceAdaptor"),
                                         ("_310P", "Ascend310PDeviceAdaptor")])
def test_vllm_ascend_023_each_device_takes_its_adaptor(real_tree, soc, adaptor):
    import libcst as cst

    from fusion_analyze.semantics.environment import Environment
    from fusion_analyze.semantics.evaluator import Evaluator
    from fusion_analyze.semantics.scope import Scope

    s = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    ev = Evaluator(Environment("ascend", s.index, soc=soc))
    value = ev.infer(cst.parse_expression("get_device_adaptor()"), Scope(module=s.index.get("vllm_ascend.device.device_op")))
    assert value.value.definition.name == adaptor


def _mla_q_proj(a) -> list:
    return [op for op in a.walk.ops if op.path.endswith("mla_attn.impl.q_proj")]


def test_the_mla_impls_q_proj_holds_the_layers_q_proj_or_q_b_proj(session, hf):
    """vllm-ascend's MLA impl keeps `self.q_proj = kwargs["q_proj"] if self.q_lora_rank is None else
    kwargs["q_b_proj"]` (vllm_ascend/attention/mla_v1.py:889); the layer hands it `q_b_proj=(self.q_b_proj if
    self.q_lora_rank is not None else None)` and `q_proj=(self.q_proj if self.q_lora_rank is None else None)`
    (patch_deepseek_v2.py:262-263), the impl's q_lora_rank being the layer's. Without a configuration the GEMM
    at :1070 and :2096 runs whichever it holds, with no build condition, and says which it holds under which
    test; after the q_a_layernorm built when q_lora_rank is given (:2192) it is the norm + quantize row again
    (inactive: an unquantised model). With DeepSeek-V3's configuration it holds q_b_proj."""
    blind = analyze_in(session, "DeepseekV3ForCausalLM", Options())
    ops = _mla_q_proj(blind)
    assert {op.line for op in ops} == {1070, 2096}
    for op in ops:
        assert "q_lora_rank" not in (op.condition or ""), op.condition
        assert op.attrs["holds"] == [{"name": "q_proj", "condition": "self.q_lora_rank is None"},
                                     {"name": "q_b_proj", "condition": "not (self.q_lora_rank is None)"}]
    assert not [a for a in blind.walk.alternatives if a["path"].endswith("mla_attn.impl.q_proj")]
    rows = {o.id: o for o in blind.opportunities}
    row = rows["norm_quant@AscendMLAImpl._mla_preprocess"]
    assert row.status == "inactive" and any(i.endswith("impl.q_proj:q_proj") for i in row.ops), row.ops
    validate_report(blind.report)
    given = analyze_in(session, "DeepseekV3ForCausalLM", Options(config="DeepSeek-V3", hf_root=hf))
    assert {tuple(map(tuple, (h.items() for h in op.attrs["holds"]))) for op in _mla_q_proj(given)} == {
        ((("name", "q_b_proj"), ("condition", None)),)}
    assert {o.id: o.status for o in given.opportunities}["norm_quant@AscendMLAImpl._mla_preprocess"] == "inactive"


def test_kv_a_proj_with_mqa_is_never_after_the_q_a_layernorm(session):
    """The MLA impl's `kv_a_proj_with_mqa` (built when q_lora_rank is None, patch_deepseek_v2.py:260) runs in the
    other branch of `if self.fused_qkv_a_proj is not None` (mla_v1.py:2186-2196) from the q_a_layernorm (built
    when it is not None): the impl's test of its own q_lora_rank and the layer's are one test, so no row joins
    an op built under one to an op built under its negation."""
    from fusion_analyze.ir.conditions import contradicts

    a = analyze_in(session, "DeepseekV3ForCausalLM", Options())
    by_path = {op.path: op for op in a.walk.ops}
    norm = by_path["model.layers.self_attn.mla_attn.impl.q_a_layernorm"]
    kv = by_path["model.layers.self_attn.mla_attn.impl.kv_a_proj_with_mqa"]
    assert contradicts(norm.cond, kv.cond)
    assert not [o.id for o in a.opportunities if norm.id in o.ops and kv.id in o.ops]
