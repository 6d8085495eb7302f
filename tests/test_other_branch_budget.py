"""status/derive.py matches the `else` side of at most MAX_OTHER_BRANCHES undecided tests per model; a test whose
side holds back only ops no pattern has a node for (views, unknown calls) takes none of that budget. OLMo-Hybrid's
`else` side of `if self.layer_type == "linear_attention"` (its attention layers' all-reduce + norm) came after
eight tests of vllm-ascend's causal_conv1d helpers that hold back views and casts only."""

from __future__ import annotations

from fusion_analyze.ir.ops import Op
from fusion_analyze.match.patterns import load_patterns
from fusion_analyze.status.derive import MAX_OTHER_BRANCHES, derive


def _op(i, kind, name, inputs, outputs, branches, steady=True):
    o = Op(f"m:{name}#{i}", kind, name, None, "m.py", i, "M.forward", "m", "layer", inputs=inputs, outputs=outputs,
           steady=steady)
    o.branches = branches
    return o


def test_tests_holding_back_no_matchable_op_take_no_budget():
    n = MAX_OTHER_BRANCHES + 1
    ops = [_op(i, "view", "view", [f"x{i - 1}"], [f"x{i}"], [(i, 1)], steady=False) for i in range(1, n + 1)]
    ops.append(_op(100, "add", "add", [f"x{n}", "r"], ["h"], []))
    ops.append(_op(101, "rmsnorm", "norm", ["h"], ["y"], [(n + 1, 1)], steady=False))  # the last test's `else` side
    out = derive(ops, load_patterns(), "ascend", [], [], None)
    assert [o.id for o in out] == ["add_rmsnorm@M.forward"]
