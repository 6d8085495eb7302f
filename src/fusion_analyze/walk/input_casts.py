"""The casts a backend's replacement class applies to a leaf layer's input in its own forward, before the layer's
computation (vllm-ascend's AscendGateLinear.forward: `if x.dtype != torch.float32: x = x.to(torch.float32)`,
then ReplicatedLinear.forward): the walk does not expand a leaf's forward, so they are walked here, each an op
of the layer at its line in the backend's file, before the layer's op, whose input becomes the cast's output."""

from __future__ import annotations

import libcst as cst

from ..catalog.taxonomy import tensor_method_kind
from ..semantics.values import Known
from .construction.constructor import Instance
from .frame import WalkerState, _Frame

# the dtype activations have between layers under vLLM's `--dtype auto`: the checkpoint's, a float32 one run in
# the platform's first supported dtype (vllm/config/model.py `_resolve_auto_dtype`: "Downcast for float32
# models"), so never float32
_NOT_THE_MODELS = "torch.float32"


class InputCasts(WalkerState):
    """Mixin of Walker: the input casts of a replacement class's own forward."""

    def _own_input_casts(self, sub: Instance, impl, args, kwargs, path: str, facts, cond, steady) -> dict[str, str]:
        """Walk the casts `impl`'s own forward (not one of the model class's MRO) applies to its parameters before
        anything else; {the layer's input value: the cast's output} for what the layer's op then reads. A guard
        `x.dtype != D` (`== D`) on a cast to D is decided where the walk knows the input's dtype: a cast's output,
        the output of a linear whose weights are D, else an activation in the model's dtype (never float32)."""
        if sub.cls is None:
            return {}
        found = self.ctor.method(impl, self.backends.forward_name(impl))
        if found is None:
            return {}
        owner, fn, module = found[0], found[1], found.module
        if owner.qualname in {c.qualname for c in self.ctor.mro(sub.cls)}:
            return {}  # the model's class's own forward: nothing the backend adds
        prelude = _cast_prelude(fn)
        if not prelude:
            return {}
        frame = _Frame(Instance(impl, sub.call, sub.scope, sub.condition), owner, fn, module, path, facts.for_callee())
        self._bind(frame, args, kwargs)
        before = {k: list(v) for k, v in frame.env.items()}
        for stmt in prelude:
            held = self._dtype_guard(frame, stmt.test) if type(stmt) is cst.If else None
            if held is False:
                continue
            self._block(frame, stmt.body.body if held is True and type(stmt) is cst.If else [stmt], cond, steady)
        return {vals[0]: frame.env[name][0] for name, vals in before.items()
                if len(vals) == 1 and len(frame.env.get(name) or ()) == 1 and frame.env[name] != vals}

    def _dtype_guard(self, frame: _Frame, test) -> bool | None:
        """`x.dtype != torch.float32` (or `==`) on a parameter whose dtype the walk knows: whether it holds."""
        if not (type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.left) is cst.Attribute
                and test.left.attr.value == "dtype" and type(test.left.value) is cst.Name):
            return None
        cmp = test.comparisons[0]
        equal = {cst.Equal: True, cst.Is: True, cst.NotEqual: False, cst.IsNot: False}.get(type(cmp.operator))
        values = frame.env.get(test.left.value.value) or []
        got = self.ctor.evaluator.infer(cmp.comparator, frame.names)
        dtype = str(got.value) if isinstance(got, Known) else ""
        if equal is None or len(values) != 1 or not dtype.startswith("torch."):
            return None
        has = self._dtype_of(values[0])
        if has is None:  # an activation in the model's dtype: not float32, otherwise not known
            return (not equal) if dtype == _NOT_THE_MODELS else None
        return (has == dtype) == equal

    def _dtype_of(self, value: str) -> str | None:
        """The dtype of a walked value where an op decides it (a cast's, a linear with weights of a dtype the code
        gives); None for one the model's dtype holds (or not known)."""
        for op in reversed(self.ops):
            if value in op.outputs:
                if op.kind == "cast":
                    return op.attrs.get("dtype")
                if op.kind == "matmul" and op.attrs.get("params_dtype"):
                    return op.attrs.get("params_dtype")
                return None
        return None


def _cast_prelude(fn: cst.FunctionDef) -> list:
    """The leading statements of `fn` that only cast its parameters (`x = x.to(...)`, each maybe under an `if`
    with no else): [] where it starts with anything else."""
    params = {p.name.value for p in fn.params.params} - {"self"}
    body = fn.body.body if type(fn.body) is cst.IndentedBlock else []
    out = []
    for i, stmt in enumerate(body):
        if i == 0 and _docstring(stmt):
            continue
        inner = stmt.body.body if type(stmt) is cst.If and stmt.orelse is None and type(stmt.body) is cst.IndentedBlock else [stmt]
        if not inner or not all(_casts_a_param(s, params) for s in inner):
            break
        out.append(stmt)
    return out


def _docstring(stmt) -> bool:
    return (type(stmt) is cst.SimpleStatementLine and len(stmt.body) == 1 and type(stmt.body[0]) is cst.Expr
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _casts_a_param(stmt, params: set[str]) -> bool:
    """`x = x.to(torch.float32)` (`.float()`, ...) of a parameter x."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1 or type(stmt.body[0]) is not cst.Assign:
        return False
    assign = stmt.body[0]
    value, targets = assign.value, assign.targets
    if len(targets) != 1 or type(targets[0].target) is not cst.Name or targets[0].target.value not in params:
        return False
    func = value.func if type(value) is cst.Call else None
    return (type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == targets[0].target.value
            and tensor_method_kind(func.attr.value) == "cast")
