"""The cost model held against published kernel timings (issue 35, calibration).

Each case writes the reference ops and the fused op the publication timed, at the shapes it names (or, where it
names none, shapes stated here as an assumption), costs them with a device profile of the catalog
(patterns/catalog/devices.yaml) or one measured by `fusion-analyze calibrate` (docs/calibration/*.yaml), and
checks the model's times and speed-up within a stated factor of the published ones. A failure here means a
profile's number (launch cost, bandwidth) or a cost rule moved away from what was measured: fix the number with
its source, not the factor.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fusion_analyze.catalog import catalog
from fusion_analyze.estimate.benefit import parallel_style
from fusion_analyze.estimate.cost import Parallel, StepModel, fused_saving
from fusion_analyze.ir.ops import Op

ROOT = Path(__file__).resolve().parents[1]


def _op(i: int, kind: str, ins: list[str], outs: list[str]) -> Op:
    return Op(f"o{i}", kind, f"op{i}", None, "m.py", i, "M.forward", f"p{i}", "layer", ins, outs)


def _profile(name: str) -> dict:
    d = catalog().devices
    return dict(d["devices"][name])


def _times(ops: list[Op], dims: dict, device: dict, tokens: int, mode: str, after: tuple[Op, ...] = ()) -> tuple[float, float]:
    """(reference µs, fused µs) of the ops on one rank; `after`: ops outside the fusion that read its values."""
    scen = {"num_tokens": tokens, "batch": tokens, "q_len": 1, "kv_len": 1, "mode": mode}
    m = StepModel([*ops, *after], {"num_layers": 1, **dims}, 2, device, "calibration", scen, Parallel(),
                  parallel_style)
    s = fused_saving(m, ops)
    assert s is not None, "every op of a calibration case is costed"
    return s.before_us, s.after_us


def _within(model: float, published: float, factor: float) -> bool:
    return published / factor <= model <= published * factor


def test_gating_top_k_softmax_pr_1355():
    """vllm-ascend PR #1355 (https://github.com/vllm-project/vllm-ascend/pull/1355): softmax + topk + to replaced
    by npu_moe_gating_top_k_softmax, "optimized from 37us to 14us on bf16/fp16 of qwen3-235b" (Atlas A2).
    Qwen3-235B-A22B: 128 experts, top-8. The PR names no batch: 64 decode tokens assumed here; eager mode."""
    dims = {"hidden_size": 4096, "num_experts": 128, "top_k": 8}
    ops = [_op(1, "softmax", ["logits#1"], ["p#2"]), _op(2, "topk", ["p#2"], ["w#3"]),
           _op(3, "cast", ["w#3"], ["w#4"])]
    device = _profile("ascend_a2")
    before, after = _gating_times(ops, dims, device)
    assert _within(before, 37.0, 2.0) and _within(after, 14.0, 2.0), (before, after)
    assert _within(before / after, 37.0 / 14.0, 1.5), before / after


def _gating_times(ops, dims, device):
    """The gating case with the router logits' width given (no GEMM before it here to make them)."""
    scen = {"num_tokens": 64, "batch": 64, "q_len": 1, "kv_len": 1, "mode": "eager"}
    first = Op("o0", "matmul", "gate", "ReplicatedLinear", "m.py", 0, "M.forward", "p0", "layer",
               ["hidden_states#0"], ["logits#1"], attrs={"role": "router"})
    m = StepModel([first, *ops], {"num_layers": 1, **dims}, 2, device, "c", scen, Parallel(), parallel_style)
    s = fused_saving(m, ops)
    assert s is not None
    return s.before_us, s.after_us


def test_rmsnorm_dynamic_quant_pr_6274():
    """vllm-ascend PR #6274 (https://github.com/vllm-project/vllm-ascend/pull/6274): the RMSNorm + dynamic-quant
    fusion pass, "execution time has been reduced from 22.8us to 16.9us". The PR names no shape: 256 tokens at
    hidden 7168 (a DeepSeek-V3 W8A8 decode batch) assumed here; eager mode on Atlas A2."""
    ops = [_op(1, "rmsnorm", ["hidden_states#1"], ["x#2"]), _op(2, "dynamic_quant", ["x#2"], ["q#3"])]
    before, after = _times(ops, {"hidden_size": 7168}, _profile("ascend_a2"), 256, "eager")
    assert _within(before, 22.8, 2.0) and _within(after, 16.9, 2.0), (before, after)
    assert _within(before / after, 22.8 / 16.9, 1.6), before / after


def _gpu_profile() -> tuple[dict, str]:
    """A GPU profile measured by `fusion-analyze calibrate` (docs/calibration/), else H100 spec figures."""
    for f in sorted((ROOT / "docs" / "calibration").glob("*.yaml")):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        dev = data["devices"][data["default"]]
        if dev.get("tflops") and dev.get("hbm_gb_s"):
            return dev, f.name
    # NVIDIA H100 SXM spec: 3.35 TB/s HBM3, 989 TFLOPS dense BF16; launch costs assumed
    return {"name": "H100 (spec)", "hbm_gb_s": 3350, "tflops": 989, "launch_us": {"eager": 5.0, "graph": 2.0}}, "spec"


# the sum is the next layer's residual: the fused kernel still writes it
NEXT_LAYER = (_op(9, "add", ["s#3", "y#4"], ["next#9"]),)


def test_fused_add_rmsnorm_seed_article():
    """The seed article (../shared/seeds/article-rmsnorm-gemm-swiglu-fusion.md, line 57): at Qwen3-0.6B's shapes
    (hidden 1024) FlashInfer's fused add + RMSNorm is about 1.3x faster than add + F.rms_norm in prefill and 2.4x
    in small-batch decode, on a GPU. Tokens assumed: 4096 (prefill), 8 (decode); eager mode."""
    device, _source = _gpu_profile()
    ops = [_op(1, "add", ["hidden_states#1", "residual#2"], ["s#3"]), _op(2, "rmsnorm", ["s#3"], ["y#4"])]
    before, after = _times(ops, {"hidden_size": 1024}, device, 4096, "eager", NEXT_LAYER)
    assert _within(before / after, 1.3, 1.5), before / after
    before, after = _times(ops, {"hidden_size": 1024}, device, 8, "eager", NEXT_LAYER)
    assert _within(before / after, 2.4, 1.5), before / after


def _measured_case(name: str, shape: dict) -> tuple[list[Op], dict, tuple[Op, ...]] | None:
    """The ops `fusion-analyze calibrate` timed for one of its scenarios (docs/calibration.md), its dimensions
    and the ops after it that read its values; None for a scenario the model has no ops for here."""
    h = shape.get("hidden_size")
    if name == "add_rmsnorm":  # x + residual, then RMSNorm as eager PyTorch: float, pow, mean, add eps, rsqrt, ...
        chain = ["cast", "pow", "mean", "add", "rsqrt", "mul", "mul", "cast"]
        ops = [_op(1, "add", ["hidden_states#1", "residual#2"], ["s#3"])]
        for i, kind in enumerate(chain, 2):
            ops.append(_op(i, kind, [f"v#{i + 1}" if i > 2 else "s#3"], [f"v#{i + 2}"]))
        return ops, {"hidden_size": h}, (_op(99, "add", ["s#3"], ["next#99"]),)
    if name == "add_rmsnorm_vs_f_rms_norm":
        ops = [_op(1, "add", ["hidden_states#1", "residual#2"], ["s#3"]), _op(2, "rmsnorm", ["s#3"], ["y#4"])]
        return ops, {"hidden_size": h}, NEXT_LAYER
    if name == "silu_mul":  # F.silu(x[..., :d]) * x[..., d:]
        inter = shape["intermediate_size"]
        ops = [_op(1, "split", ["hidden_states#1"], ["g#2", "u#3"]), _op(2, "silu", ["g#2"], ["s#4"]),
               _op(3, "mul", ["s#4", "u#3"], ["y#5"])]
        return ops, {"hidden_size": 2 * inter}, ()
    return None


def test_measured_scenarios_of_a_calibrated_profile():
    """What `fusion-analyze calibrate` timed on its device (reference vs fused), against the model with the
    profile it measured: each time within a factor of 2.5. The fused side in eager mode is a Triton kernel
    launched from Python, about 15 µs a call on the H100 (docs/calibration.md) whatever its size, a cost the
    profile's eager launch (measured on a PyTorch op, as a vllm-ascend custom op launches) does not hold: an
    eager fused time is compared only where the kernel's own work is larger than that (prefill sizes)."""
    device, source = _gpu_profile()
    measured = device.get("measured") or []
    if not measured:
        pytest.skip(f"no measured scenarios in {source}")
    checked = 0
    for case in measured:
        found = _measured_case(case["name"], case["shape"])
        if found is None:
            continue
        ops, dims, readers = found
        before, after = _times(ops, dims, device, case["shape"]["num_tokens"], case["mode"], readers)
        assert _within(before, case["reference_us"], 2.5), (case, before)
        if case["mode"] == "graph" or case["shape"]["num_tokens"] >= 1024:
            assert _within(after, case["fused_us"], 2.5), (case, after)
        checked += 1
    assert checked >= 6
