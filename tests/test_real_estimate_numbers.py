"""The numbers of the estimate, checked against arithmetic on the published shapes (issue 35, in part)."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import Options, analyze_in


def test_gemm_swiglu_saves_the_write_and_the_read_of_the_gate_up_output_once(session, hf):
    """Qwen3-8B (its published config.json, the Qwen3-8B preset): the gate/up GEMM writes [N, 2 * I] in bf16 and
    SwiGLU reads it back; a GEMM with a SwiGLU epilogue saves that write and that read: 2 x 2 B x N x 2I per
    layer, 384 MiB at N = 4096 (prefill) and I = 12288, not twice that."""
    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf, config="Qwen3-8B"))
    (row,) = [o for o in a.opportunities if o.id == "matmul_swiglu@Qwen2MLP.forward"]  # Qwen3 reuses Qwen2MLP
    prefill = a.benefits[row.id].numbers["prefill"]
    n, inter = prefill["num_tokens"], 12288
    assert n == 4096
    assert prefill["per_layer"]["bytes"] == 2 * 2 * n * 2 * inter == 384 * 2**20


def test_a_chain_of_a_native_layer_is_costed_as_that_layer_in_one_kernel(session, hf):
    """Llama-3.1-8B on Ascend runs `Llama3RotaryEmbedding.forward_native` (no Ascend replacement): a chain of its
    ops is served by a kernel for the whole forward (the native_rope family replaces that method), so the saving
    counts every kernel the forward surely launches, as the walk counts them (`native_ops`, 17: index_select, and
    for q and k four multiplies, a sub, an add, ApplyRotaryEmb's cat of the neox halves (`is_neox_style` bound at
    the call) and forward_static's cat of the rotated and passed parts), and the fused kernel's one launch."""
    a = analyze_in(session, "LlamaForCausalLM", Options(hf_root=hf, config="Llama-3.1-8B"))
    (row,) = [o for o in a.opportunities if o.id.startswith("vector_elementwise_chain@")]
    native = {op.attrs.get("native_ops") for m in row.matches for op in m.op_list}
    assert native == {17}, native
    decode = a.benefits[row.id].numbers["decode"]
    assert decode["per_layer"]["launches"] == 17 - 1  # 17 launches become one
    # more than the matched chain alone: the chain is 2 of those kernels
    assert all(len(m.op_list) < 17 for m in row.matches)


def test_dimensions_read_as_the_configuration_class_reads_them(session, hf):
    """LongCat-Flash's config.json names its widths by the class's own fields (`ffn_hidden_size`,
    `expert_ffn_hidden_size`); LongcatFlashConfig's attribute_map makes them `intermediate_size` and
    `moe_intermediate_size`. The estimate reads them so (12288 and 2048), not the 4 x hidden fallback (24576),
    and the weights come to about 1 TiB (560 B parameters in bf16), not 12 TiB."""
    from pathlib import Path

    config = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "longcat-flash.json"
    a = analyze_in(session, "LongcatFlashForCausalLM", Options(hf_root=hf, config=str(config)))
    assert a.shapes.dims["intermediate_size"] == 12288 and a.shapes.dims["moe_intermediate_size"] == 2048
    assert 900 < a.memory["weights_gib"] < 1100, a.memory
