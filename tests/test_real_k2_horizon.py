"""K2-Horizon (vllm/model_executor/models/k2_horizon.py, 0.30 pair) with its published configuration
(fixtures/configs/k2-horizon.json): what the hand check found the report left open or got wrong, each decided
from the trees."""

from __future__ import annotations

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in

from .conftest import FIXTURES, validate_report


@pytest.fixture(scope="module")
def k2(session, hf):
    return analyze_in(session, "K2HorizonForCausalLM",
                      Options(config=str(FIXTURES / "configs" / "k2-horizon.json"), hf_root=hf))


def _undecided(a, text: str) -> list:
    return [e for e in a.report["undecided"] if text in e["test"]]


def test_grouped_norm_runs_its_own_forward(k2):
    """K2HorizonRMSNorm.forward (k2_horizon.py:288) hands on to `super().forward` only `if self.n_groups == 1`;
    the layers build it with `n_groups=config.layernorm_num_groups` (:970-974), 2 here, so its own code runs
    (`ops.rms_norm` at :303): no forward_native of RMSNorm nested under it (no `maybe_inplace` sub-line), and
    no "forward_oot runs forward_native" reason."""
    norms = [op for op in k2.report["ops"] if op["layer_class"] == "K2HorizonRMSNorm"]
    assert norms and all("native" not in op["attrs"] for op in norms), [op["attrs"] for op in norms]
    assert not [op for op in k2.report["ops"] if "K2HorizonRMSNorm" in op["attrs"].get("native_of", "")]
    assert {k["name"] for op in norms for k in op["kernels"]} == {"torch.ops._C.rms_norm"}
    assert not _undecided(k2, "n_groups")


def test_router_score_function_from_the_configuration(k2):
    """`calc_router_weights(..., score_func=self.router_score_func, ...)` (k2_horizon.py:804-810): the MoVA
    attention was built with `router_score_func=config.router_score_func` (:935), "sigmoid": the sigmoid at :135
    is in the sequence, the softmax at :130 is not, and nothing waits on `score_func`."""
    ops = k2.report["ops"]
    router = [op for op in ops if op["scope"] == "k2_horizon.calc_router_weights"]
    kinds = {op["kind"] for op in router if op["on_path"]}
    assert "sigmoid" in kinds and "softmax" not in kinds, kinds
    assert not [op for op in router if op["kind"] == "softmax"]
    assert not _undecided(k2, "score_func")
    # `renormalize` left at None by the caller is `top_k > 1` (:146-147) with top_k = 4: the renormalisation runs
    assert not _undecided(k2, "renormalize")
    assert [op for op in router if op["line"] == 148 and op["on_path"] and not op["condition"]]


def test_moe_quantisation_dtype_from_default_arguments(k2):
    """fused_mova_impl is called without `use_fp8_w8a8` / `use_int8_w8a8` (k2_horizon.py:815-823), so they keep
    their defaults False (:160-161) and `quant_dtype = _get_config_quant_dtype(...)` is None
    (fused_moe.py:1648-1653): `moe_kernel_quantize_input`'s tests on it (fused_moe/utils.py:371-383) are false,
    `current_platform.fp8_dtype()` being torch.float8_e4m3fn (Platform.fp8_dtype, platforms/interface.py:1121):
    no fp8 or nvfp4 quantisation op on any path."""
    ops = k2.report["ops"]
    files = {op["file"] for op in ops}
    assert "vllm/model_executor/layers/quantization/utils/nvfp4_emulation_utils.py" not in files
    assert "vllm/model_executor/layers/quantization/utils/w8a8_utils.py" not in files
    names = {k["name"] for op in ops for k in op["kernels"]}
    assert not {n for n in names if "fp8_quant" in n}, names
    assert not _undecided(k2, "quant_dtype") and not _undecided(k2, "use_fp8_w8a8")
    assert not [o for o in k2.report["opportunities"] if "nvfp4" in o["id"]]
    validate_report(k2.report)


def test_kernels_of_vllms_compiled_build_fail_on_ascend(k2):
    """vllm-ascend's Dockerfile:91 installs vLLM with VLLM_TARGET_DEVICE="empty", for which vLLM's setup.py
    leaves no extension (`if _no_device(): ext_modules = []`, setup.py:1476-1477): `torch.ops._C` (K2HorizonRMSNorm's
    `ops.rms_norm`, k2_horizon.py:303 -> _custom_ops.py:245) and `torch.ops._moe_C` (moe_align_block_size,
    moe_sum) do not exist there, and vllm-ascend registers only `_C_ascend` (csrc/torch_binding.cpp:2813). Each
    such kernel says so, the ops calling it are flagged and not costed, the report lists them, and a row resting
    on one says the path fails."""
    r = k2.report
    gone = {g["kernel"]: g for g in r["unavailable_kernels"]}
    assert set(gone) == {"torch.ops._C.rms_norm", "torch.ops._moe_C.moe_align_block_size", "torch.ops._moe_C.moe_sum"}
    why = gone["torch.ops._C.rms_norm"]["why"]
    assert "Dockerfile:91" in why and "VLLM_TARGET_DEVICE=empty" in why and "setup.py:1477" in why, why
    assert "this path fails" in why
    assert all(g["fails"] for g in gone.values())
    # vllm-ascend's own kernels and vLLM's Python-registered custom ops are not flagged
    assert not [k for op in r["ops"] for k in op["kernels"] if k.get("unavailable")
                and k["name"].startswith(("torch.ops._C_ascend.", "torch.ops.vllm.", "torch_npu."))]
    norms = [op for op in r["ops"] if op["layer_class"] == "K2HorizonRMSNorm"]
    assert norms and all(op["attrs"].get("unavailable") == ["torch.ops._C.rms_norm"] for op in norms)
    for name in ("decode", "prefill"):
        step = r["estimate"]["steps"][name]
        flagged = [op["id"] for op in r["ops"] if op["attrs"].get("unavailable") and op["on_path"]]
        assert step["fails"] == len(flagged) > 0, (step, flagged)
        assert not set(flagged) & set(step["ops"]), "an op whose kernel does not exist is costed"
    rows = [o for o in r["opportunities"] if set(o["ops"]) & {op["id"] for op in norms}]
    assert rows and all(any("rests on" in c and "this path fails" in c for c in o["conditions"]) for o in rows)
    moe_norm = next(o for o in r["opportunities"] if o["id"].startswith("moe_norm@"))
    assert not moe_norm["benefit"]["numbers"] and "Ascend does not have" in moe_norm["benefit"]["note"]
    validate_report(r)
