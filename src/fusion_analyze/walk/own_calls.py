"""The calls a composite layer's method makes itself, counted where that method is walked on its own
(Backends.kernels_of_instance(own_calls=kinds)): the MoE runner's router GEMM, its shared + routed add."""

from __future__ import annotations

import libcst as cst

from ..ir.ops import Kernel
from ..semantics.function_bodies import tables
from ..catalog.taxonomy import function_kind
from ..ir.conditions import as_text


def own_call(backends, impl, module, call: cst.Call, cond, facts, out: list, seen: dict, caller) -> bool:
    """In the method where a composite layer runs a module it is given (AscendMoERunner._apply_router_linear:
    `F.linear(router_input, gate.weight_fp32)`, else `gate = self.gate` ... `gate(router_input)`) or joins
    what it ran (`torch._foreach_add([shared_output], [fused_output])`), calls that elsewhere are plain
    PyTorch or a submodule's forward are what it runs: a torch function of one of the walk's kinds
    (leaf_ops.yaml `functions`: matmul, add) is a kernel at its call, and a submodule called (`self.gate(x)`,
    or a local that holds `self.gate`) runs its forward. Only at the method's own level, so no other walk's
    kernels change."""
    func = call.func
    dotted = backends.index.dotted(module, func) if isinstance(func, (cst.Name, cst.Attribute)) else None
    if dotted and dotted.startswith("torch.") and function_kind(dotted) in backends._own:
        out.append(Kernel(dotted, module.rel, module.line_of(call), as_text(cond), cond=cond))
        return True
    held = None  # the `self.x` the call runs: `self.gate(x)`, or `gate(x)` after `gate = self.gate`
    if (type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self"
            and impl is not None and backends.ctor.method(impl, func.attr.value) is None):
        held = func
    elif type(func) is cst.Name and caller is not None:
        values = [v for name, v, _c, _p in tables(caller, module).local_assignments if name == func.value]
        if (len(values) == 1 and type(values[0]) is cst.Attribute and type(values[0].value) is cst.Name
                and values[0].value.value == "self"):
            held = values[0]
    if held is None:
        return False
    forward = call.with_changes(func=cst.Attribute(value=held, attr=cst.Name("forward")))
    kinds, backends._own = backends._own, ()  # (the submodule's own code is walked as anywhere else)
    try:
        backends._call(impl, module, forward, cond, facts, out, 0, seen, caller)
    finally:
        backends._own = kinds
    return True
