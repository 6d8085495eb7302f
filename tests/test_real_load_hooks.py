"""An attribute the loader's hook assigns again after __init__ (walk.yaml `runtime.load_hooks`:
process_weights_after_loading) is not read from __init__ (0.30 pair)."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import Options, analyze_in


def test_sfa_preprocess_type_is_set_at_load(session, hf):
    """vllm-ascend's SFA impl sets `self.preprocess_type = PreprocessType.NATIVE` in __init__
    (attention/sfa_v1.py:896) and again in process_weights_after_loading (:989, from the layer's quant method):
    `fused_type = self.preprocess_type` (:1934) is not NATIVE for sure, so the fused preprocess (PROLOG_V3's
    npu_mla_prolog_v3, MLAPO's mla_preprocess) is still walked under its test, beside the native chain."""
    a = analyze_in(session, "GlmMoeDsaForCausalLM", Options(hf_root=hf))
    names = {k["name"] for op in a.report["ops"] for k in op["kernels"]}
    assert {"torch_npu.npu_mla_prolog_v3", "torch.ops._C_ascend.mla_preprocess"} <= names, sorted(names)
    assert [op for op in a.report["ops"] if "fused_type" in (op["condition"] or "")]
