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
