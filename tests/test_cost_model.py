"""The cost model of a step (estimate/cost.py) on ops written here: each op's bytes, FLOPs and time from its
shapes, per rank; a fusion's saving is the time of its ops minus the time of the fused op."""

from __future__ import annotations

import pytest

from fusion_analyze.estimate.benefit import parallel_style
from fusion_analyze.estimate.cost import Parallel, StepModel, fused_saving
from fusion_analyze.ir.ops import Op

DEVICE = {"hbm_gb_s": 1000, "tflops": 100, "link_gb_s": 100, "launch_us": {"eager": 10.0, "graph": 2.0}}
DIMS = {"hidden_size": 1024, "intermediate_size": 3072, "num_heads": 16, "num_kv_heads": 8, "head_dim": 64,
        "num_layers": 2, "vocab_size": 1000}
PREFILL = {"num_tokens": 1000, "batch": 1, "q_len": 1000, "kv_len": 1000, "mode": "eager"}
DECODE = {"num_tokens": 8, "batch": 8, "q_len": 1, "kv_len": 1000, "mode": "graph"}


def op(i: int, kind: str, ins: list[str], outs: list[str], cls: str | None = None, **attrs) -> Op:
    return Op(f"o{i}", kind, f"op{i}", cls, "m.py", i, "M.forward", f"p{i}", "layer", ins, outs, attrs=attrs)  # type: ignore[arg-type]


def mlp() -> list[Op]:
    return [
        op(1, "rmsnorm", ["hidden_states#1"], ["x#2"], "RMSNorm"),
        op(2, "matmul", ["x#2"], ["gate_up#3", "_#4"], "MergedColumnParallelLinear", merged="gate_up",
           values={"input_size": 1024}),
        op(3, "silu_mul", ["gate_up#3"], ["act#5"], "SiluAndMul"),
        op(4, "matmul", ["act#5"], ["out#6", "_#7"], "RowParallelLinear", values={"input_size": 3072, "output_size": 1024}),
        op(5, "allreduce", ["out#6"], ["out#8"], role="collective"),
    ]


def model(ops, scen=PREFILL, tp=1, dims=DIMS) -> StepModel:
    return StepModel(ops, dims, 2, DEVICE, "prefill", scen, Parallel(tp), parallel_style)


def test_each_op_costed_from_its_shapes():
    m = model(mlp())
    c = m.step.costs
    n, h, i = 1000, 1024, 3072
    assert c["o2"].flops == 2 * n * h * 2 * i  # the merged gate/up GEMM: [N, H] x [H, 2I]
    assert c["o2"].bytes == (h * 2 * i + n * (h + 2 * i)) * 2
    assert c["o3"].bytes == n * (2 * i + i) * 2  # SwiGLU reads [N, 2I], writes [N, I]
    assert c["o4"].flops == 2 * n * i * h
    # time = max(bytes / bandwidth, flops / peak) + launch
    assert c["o3"].time_us(DEVICE, "eager") == pytest.approx(c["o3"].bytes / 1e6 + 10.0)
    assert c["o2"].time_us(DEVICE, "eager") == pytest.approx(c["o2"].flops / 1e8 + 10.0)
    assert c["o5"].launches == 0 and c["o5"].comm == 0  # no all-reduce on one rank
    # an eager step whose device work (the GEMMs, 250 µs a layer) outlasts the host's dispatch (4 launches, 10 µs
    # each): the host runs ahead, a launch costs the device's time per kernel (no `queued` figure: the graph's)
    assert (m.mode, m.launch, m.step.to_json()["launch"]) == ("eager", "queued", "queued")
    assert c["o3"].time_us(DEVICE, "queued") == pytest.approx(c["o3"].bytes / 1e6 + 2.0)
    layer = sum(c[k].time_us(DEVICE, "queued") for k in c)
    assert m.step.layer_us == pytest.approx(layer) and m.step.total_us == pytest.approx(2 * layer)


def test_an_eager_step_the_host_paces_pays_the_hosts_dispatch():
    """At 8 tokens the layer's device work (the weights read, 19 µs, and 4 kernels at 2 µs or a measured
    `queued` figure) is below the host's dispatch of its 4 kernels (40 µs): each launch costs the host's 10 µs."""
    eager_decode = dict(DECODE, mode="eager")
    m = model(mlp(), scen=eager_decode)
    assert m.launch == "eager"
    c = m.step.costs
    assert m.step.layer_us == pytest.approx(sum(c[k].time_us(DEVICE, "eager") for k in c))
    # a profile whose queued launch is measured: its figure, not the graph's
    queued = dict(DEVICE, launch_us={"eager": 10.0, "graph": 2.0, "queued": 3.0})
    from fusion_analyze.estimate.cost import launch_us

    assert (launch_us(queued, "queued"), launch_us(DEVICE, "queued"), launch_us(queued, "eager")) == (3.0, 2.0, 10.0)


def test_a_rank_under_tp_gets_its_share():
    one, two = model(mlp()), model(mlp(), tp=2)
    for k in ("o2", "o3", "o4"):
        assert two.step.costs[k].flops == one.step.costs[k].flops / 2
    n, h = 1000, 1024
    assert two.step.costs["o5"].comm == 2 * (2 - 1) / 2 * n * h * 2  # a ring all-reduce of [N, H] over 2 ranks


def test_a_fusion_saves_its_ops_time_minus_the_fused_op():
    m = model(mlp())
    ops = {o.id: o for o in m.ops}
    s = fused_saving(m, [ops["o2"], ops["o3"]])
    assert s is not None
    n, i = 1000, 3072
    assert s.bytes == 2 * n * 2 * i * 2  # the [N, 2I] gate/up output: its write and its read
    assert s.launches == 1
    c = m.step.costs
    assert s.before_us == pytest.approx(c["o2"].time_us(DEVICE, "queued") + c["o3"].time_us(DEVICE, "queued"))
    # the GEMM is compute-bound here: what is left is the GEMM's time, SwiGLU's write, one launch (the host ahead)
    assert s.after_us == pytest.approx(c["o2"].flops / 1e8 + n * i * 2 / 1e6 + 2.0)
    assert 0 < s.us < s.before_us <= m.step.layer_us


def test_decode_runs_in_graph_mode_and_reads_the_weights():
    m = model(mlp(), scen=DECODE)
    c = m.step.costs["o2"]
    assert m.mode == "graph"
    assert c.time_us(DEVICE, "graph") == pytest.approx(c.bytes / 1e6 + 2.0)  # weight-bound at 8 tokens


def test_an_op_whose_shapes_are_unknown_is_counted_apart():
    ops = mlp() + [op(6, "kernel", ["mystery#9"], ["y#10"])]
    m = model(ops)
    assert m.step.unknown == ["o6"]
    assert fused_saving(m, [m.ops[4], m.ops[5]]) is None


def test_moe_sizes_per_rank():
    dims = {**DIMS, "num_experts": 64, "top_k": 4, "moe_intermediate_size": 256}

    def moe(comm_class: str) -> list[Op]:
        return [op(0, "moe_experts", ["hidden_states#1"], ["e#9"], comm_class, part="experts"),
                op(1, "moe_dispatch", ["hidden_states#1"], ["d#2"], step="dispatch"),
                op(2, "expert_gemm", ["d#2"], ["g#3"], step="gemm1"),
                op(3, "expert_act", ["g#3"], ["a#4"], step="act"),
                op(4, "expert_gemm", ["a#4"], ["o#5"], step="gemm2"),
                op(5, "moe_combine", ["o#5"], ["c#6"], step="combine")]

    n, h, k, i = 1000, 1024, 4, 256
    tp2 = model(moe("AllGatherCommImpl"), tp=2, dims=dims).step.costs
    assert tp2["o2"].flops == 2 * n * k * h * 2 * i / 2  # experts split by TP without EP
    assert tp2["o5"].comm == 2 * (2 - 1) / 2 * n * h * 2  # the experts' partial outputs all-reduced over TP

    def ep4(comm_class: str) -> dict:
        return StepModel(moe(comm_class), dims, 2, DEVICE, "prefill", PREFILL, Parallel(4, ep=4),
                         parallel_style).step.costs

    gather, a2a = ep4("AllGatherCommImpl"), ep4("MC2CommImpl")
    assert gather["o2"].flops == 2 * (n * k / 4) * h * 2 * i  # a quarter of the token-expert pairs, whole experts
    # all-gather (vllm-ascend's method on A2 below 16 ranks): every token already on every rank, one all-reduce
    assert gather["o1"].comm == 0 and gather["o5"].comm == 2 * 3 / 4 * n * h * 2
    # MC2 / all-to-all: the pairs of other ranks' experts sent at dispatch, and back at combine
    assert a2a["o1"].comm == a2a["o5"].comm == 3 / 4 * n * k * h * 2


def test_a_graph_replayed_kernel_costs_at_least_the_profiles_measured_kernels():
    """calibrate's launch loop (a 1-element multiply, in L2) is below what a kernel that reads HBM takes replayed
    from a graph; the profile's measured kernels of that mode give the floor (docs/calibration/h100.yaml: 1.54 µs,
    the SwiGLU kernel at 32 tokens, against the loop's 1.163 µs); eager keeps the loop's figure."""
    from pathlib import Path

    import yaml

    from fusion_analyze.estimate.cost import launch_us

    profile = yaml.safe_load((Path(__file__).resolve().parents[1] / "docs" / "calibration" / "h100.yaml").read_text())
    h100 = profile["devices"]["h100"]
    graph_kernels = [m["fused_us"] for m in h100["measured"] if m["mode"] == "graph"]
    assert launch_us(h100, "graph") == min(graph_kernels) > h100["launch_us"]["graph"]
    assert launch_us(h100, "eager") == h100["launch_us"]["eager"]
    assert launch_us(DEVICE, "graph") == 2.0  # no measured kernels: the launch figure


def test_a_measured_kernel_that_does_not_pay_is_found_by_pattern_mode_and_shape():
    """A device profile's `measured` entry named after the pattern, at the scenario's mode, token count and
    dimensions, where the fused kernel was not faster: the estimate says so (estimate/benefit.py)."""
    from types import SimpleNamespace

    from fusion_analyze.estimate.benefit import _measured_slower

    entry = {"name": "matmul_swiglu", "mode": "eager", "shape": {"num_tokens": 4096, "hidden_size": 4096,
                                                                 "intermediate_size": 12288},
             "reference_us": 1500.0, "fused_us": 1600.0, "source": "bench"}
    prefill = SimpleNamespace(mode="eager", launch="queued", n=4096, d={"hidden_size": 4096, "intermediate_size": 12288})
    other = SimpleNamespace(mode="eager", launch="queued", n=4096, d={"hidden_size": 4096, "intermediate_size": 14336})
    decode = SimpleNamespace(mode="graph", launch="graph", n=32, d={"hidden_size": 4096, "intermediate_size": 12288})
    device = {"measured": [entry]}
    got = _measured_slower("matmul_swiglu", {"prefill": prefill, "decode": decode}, device)
    assert set(got) == {"prefill"} and got["prefill"]["fused_us"] == 1600.0
    assert _measured_slower("matmul_swiglu", {"prefill": other}, device) == {}  # another shape
    assert _measured_slower("add_rmsnorm", {"prefill": prefill}, device) == {}  # another pattern
    faster = {"measured": [dict(entry, fused_us=1400.0)]}
    assert _measured_slower("matmul_swiglu", {"prefill": prefill}, faster) == {}  # it pays: nothing said
    # measured as the step pays its launches (eager with the host ahead: queued) where the profile has that
    queued = {"measured": [entry, dict(entry, mode="queued", fused_us=1400.0)]}
    assert _measured_slower("matmul_swiglu", {"prefill": prefill}, queued) == {}


def test_a_dependent_access_adds_the_profiles_latency_before_and_after_a_fusion():
    """RoPE reads each token's cos / sin row at its position, the KV-cache write scatters each token at its slot:
    each an access whose address is loaded first, whose latency (the profile's `dependent_access_us`, calibrate)
    comes on top of the op's bytes, before the fusion and after it (the fused kernel still loads the index)."""
    ops = [op(0, "matmul", ["hidden_states#1"], ["qkv#2", "_#3"], merged="qkv"),
           op(9, "split", ["qkv#2"], ["q#20", "k#21", "v#22"]),
           op(1, "rope", ["positions#1", "q#20", "k#21"], ["q#4", "k#5"]),
           op(2, "attention", ["q#4", "k#5", "v#22"], ["o#7"])]
    scen = dict(DECODE)
    plain = StepModel(ops, DIMS, 2, DEVICE, "decode", scen, Parallel(), parallel_style)
    timed = StepModel(ops, DIMS, 2, dict(DEVICE, dependent_access_us=0.5), "decode", scen, Parallel(), parallel_style)
    assert (plain.step.costs["o1"].dependent, plain.step.costs["o2"].part("kv_write").dependent) == (1, 1)
    parts = {"o2": "kv_write"}
    a, b = fused_saving(plain, ops[2:], parts), fused_saving(timed, ops[2:], parts)
    assert a is not None and b is not None
    assert b.before_us == pytest.approx(a.before_us + 2 * 0.5) and b.after_us == pytest.approx(a.after_us + 2 * 0.5)
    assert b.us == pytest.approx(a.us)  # the latencies stay: the saving is the launch and the bytes


def test_a_fusion_across_the_layer_boundary_keeps_the_carried_value_on_chip():
    """The layer is walked once: the next layer's input norm reads the prologue's value, which from the second
    layer on is what this layer's MoE wrote (the matcher's back edges, ir/ops.py loop_carried). The MoE layer's
    output is its join's, its experts' their combine's (the walk chains the parts). Fused [norm, combine, join],
    the combine's and the join's [T, H] outputs are neither written nor read back; the epilogue's final norm reads
    the last layer's (another instance)."""
    from fusion_analyze.estimate.cost import fused_terms

    dims = {**DIMS, "num_experts": 8, "top_k": 2, "moe_intermediate_size": 256}
    ops = [Op("e", "embedding", "embed", None, "m.py", 1, "M.forward", "e", "prologue", ["input_ids#1"], ["x#2"]),
           op(1, "add_rmsnorm", ["x#2"], ["h#3", "r#4"]),
           op(2, "moe", ["h#3"], ["f#5"], expanded=["experts", "join"]),
           op(3, "moe_experts", ["h#3"], ["x#6"], part="experts"),
           op(4, "moe_dispatch", ["h#3"], ["d#7"], step="dispatch"),
           op(5, "expert_gemm", ["d#7"], ["g#8"], step="gemm1"),
           op(6, "expert_act", ["g#8"], ["a#9"], step="act"),
           op(7, "expert_gemm", ["a#9"], ["o#10"], step="gemm2"),
           op(8, "moe_combine", ["o#10"], ["c#11"], step="combine"),
           op(9, "matmul", ["h#3"], ["s#12", "_#13"], role="shared_expert", values={"output_size": 1024}),
           op(10, "moe_join", ["x#6"], ["j#14"], part="join"),
           op(11, "view", ["f#5"], ["v#15"]),
           Op("n", "add_rmsnorm", "norm", None, "m.py", 99, "M.forward", "n", "epilogue", ["v#15", "r#4"], ["y#16"])]
    m = StepModel(ops, dims, 2, DEVICE, "prefill", PREFILL, Parallel(), parallel_style)
    assert m.root["x#6"] == "c#11" and m.root["f#5"] == m.root["v#15"] == "j#14"
    assert [r.id for r in m.next_readers("j#14")] == ["o1"]
    by = {o.id: o for o in m.ops}
    terms = {t["op"]: t for t in fused_terms(m, [by["o1"], by["o2"]], {"o2": ["combine", "join"]}) or []}
    assert set(terms) == {"o1", "o8", "o10"}
    th = 1000 * 1024 * 2  # one [T, H] tensor
    assert terms["o8"]["bytes"] - terms["o8"]["fused_bytes"] == th  # the combine's write
    assert terms["o10"]["bytes"] - terms["o10"]["fused_bytes"] == 2 * th  # the join's read of it and its write
    assert terms["o1"]["bytes"] - terms["o1"]["fused_bytes"] == th  # the next layer's norm's read of the join's


def test_weights_the_code_builds_in_fp32_and_a_cast_to_fp32_move_four_bytes_an_element():
    """A router built in fp32 (AscendGateLinear's `params_dtype=torch.float32`, an `nn.Linear(..., dtype=...)`)
    reads its weights, its input (cast to fp32 first) and writes its output in fp32; the cast reads the model's
    dtype and writes fp32."""
    n, h, e = 1000, 1024, 64
    ops = [op(1, "cast", ["hidden_states#1"], ["x#2"], dtype="torch.float32"),
           op(2, "matmul", ["x#2"], ["logits#3"], "Linear", values={"input_size": h, "output_size": e},
              params_dtype="torch.float32"),
           op(3, "matmul", ["hidden_states#1"], ["y#4"], "Linear", values={"input_size": h, "output_size": e})]
    c = model(ops).step.costs
    assert c["o1"].bytes == n * h * (2 + 4)
    assert c["o2"].bytes == (h * e + n * (h + e)) * 4
    assert c["o3"].bytes == (h * e + n * (h + e)) * 2  # no dtype given: the model's


def test_a_match_in_each_kind_of_layer_is_counted_once_a_layer_in_the_layers_of_its_kind():
    """Where the decoder layers are of several kinds (each walked on its own), a scenario matched in each kind
    pays per layer what one match saves (not the sum over kinds), in the layers of each kind; one matched in one
    kind only pays in that kind's layers."""
    from types import SimpleNamespace

    from fusion_analyze.estimate.benefit import _saving

    def kind_ops(k: int, base: int) -> list[Op]:
        return [op(base + 1, "matmul", [f"x#{base}"], [f"gu#{base + 1}", f"_#{base + 2}"], "MergedColumnParallelLinear",
                   merged="gate_up", values={"input_size": 1024}, layer_kind=k),
                op(base + 2, "silu_mul", [f"gu#{base + 1}"], [f"a#{base + 3}"], "SiluAndMul", layer_kind=k)]

    ops = [op(0, "rmsnorm", ["hidden_states#1"], ["x#0"], "RMSNorm", layer_kind=0),
           op(10, "rmsnorm", ["hidden_states#1"], ["x#10"], "RMSNorm", layer_kind=1)] + kind_ops(0, 0) + kind_ops(1, 10)
    m = StepModel(ops, {**DIMS, "num_layers": 48}, 2, DEVICE, "prefill", PREFILL, Parallel(1), parallel_style, [9, 39])
    by_id = {o.id: o for o in m.ops}

    def match(*ids):
        return SimpleNamespace(op_list=[by_id[i] for i in ids], ops={"gemm": by_id[ids[0]], "act": by_id[ids[1]]})

    pattern = SimpleNamespace(estimate={"saved": ["x"], "launches": 1})
    one = fused_saving(m, [by_id["o1"], by_id["o2"]])
    assert one is not None
    both = _saving(SimpleNamespace(pattern=pattern, matches=[match("o1", "o2"), match("o11", "o12")]), m)
    assert both is not None and both["instances"] == 1 and both["uniform"]  # one match a layer, the same in each kind
    assert both["per_layer"]["bytes"] == int(one.bytes) and both["per_layer"]["launches"] == 1
    assert both["per_layer"]["before_us"] == pytest.approx(one.before_us, abs=0.01)
    assert both["model"]["bytes"] == int(one.bytes * 48) and both["model"]["launches"] == 48
    first = _saving(SimpleNamespace(pattern=pattern, matches=[match("o1", "o2")]), m)
    assert first is not None
    assert first["model"]["time_us"] == pytest.approx(one.us * 9, abs=0.1) and first["model"]["launches"] == 9
    assert first["per_layer"]["bytes"] == int(one.bytes)


def test_a_shared_experts_match_sees_the_shared_intermediate_size():
    """A match on a MoE layer's shared expert (ops with `attrs.role` shared_expert) is sized by its own
    intermediate size, as the cost model sizes its GEMMs (Qwen3-Next: shared_expert_intermediate_size; DeepSeek:
    moe_intermediate_size x n_shared_experts), not the dense MLP's intermediate_size; other matches keep it."""
    from types import SimpleNamespace

    from fusion_analyze.estimate.shapes import Shapes

    shared, dense = SimpleNamespace(attrs={"role": "shared_expert"}), SimpleNamespace(attrs={})
    s = Shapes({"hidden_size": 2560, "intermediate_size": 5632, "shared_expert_intermediate_size": 640})
    assert s.for_ops([shared, dense]).dims["intermediate_size"] == 640
    assert s.for_ops([dense]) is s
    ds = Shapes({"intermediate_size": 18432, "moe_intermediate_size": 2048, "n_shared_experts": 1})
    assert ds.for_ops([shared]).dims["intermediate_size"] == 2048
    assert Shapes({"intermediate_size": 96}).for_ops([shared]).dims["intermediate_size"] == 96  # nothing else known
