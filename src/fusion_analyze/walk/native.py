"""A layer whose Ascend path is its forward_native walked into the PyTorch ops it runs (issue 33): the ops,
nested under the layer's op, the kernels they launch, the registered Ascend class that computes the same math,
and what the layer runs on CUDA instead (its forward_cuda's kernels)."""

from __future__ import annotations

import libcst as cst

from ..index.modules import Definition
from ..index.nodes import find_all
from ..semantics.function_bodies import class_method
from ..semantics.values import Bindings
from ..ir.texts import say
from .construction.constructor import Instance
from .frame import WalkerState, nest_native

class NativeFallbacks(WalkerState):
    """Mixin of Walker: the native forward of a layer with no Ascend kernel."""

    def _native_ops(self, sub: Instance, impl: Definition, name: str, args, kwargs, path: str, cond, out):
        """A layer whose Ascend path is forward_native (no replacement, or one that returns forward_native) runs
        that method's PyTorch ops, one kernel each: they are walked, nested under the layer's op (`native_of`),
        so the vector scenarios are matched on what really runs (Llama-3.1's RoPE: index_select, chunk, the
        multiplies and adds, cat). Their output replaces the layer op's for what follows."""
        layer_op = self.ops[-1]
        start = len(self.ops)
        got = self._expand(Instance(impl, sub.call, sub.scope, sub.condition), "forward_native", args, kwargs, path=f"{path}.native",
                           facts=Bindings(dict(), self._attr_facts(sub)), cond=cond)
        if not nest_native(self.ops, start, layer_op, f"{name} ({impl.name})"):
            return out
        same = self._same_math(impl)
        cuda = self._cuda_kernels(sub.cls) if sub.cls is not None else None
        for op in self.ops[start:]:
            if cuda:  # what the layer runs on CUDA instead: its forward_cuda's kernels
                op.attrs["cuda_kernels"], op.attrs["cuda_runs"] = cuda
            if same:
                op.attrs["same_math"] = same
        return got or out

    def _cuda_kernels(self, cls: Definition):
        """([kernel names], 'Class.forward_cuda') of the vLLM class's CUDA path (CustomOp.forward_cuda), read
        from the trees; None where it has none or it runs no device kernel of a known library."""
        got = self.ctor.method(cls, "forward_cuda")
        if got is None or "CustomOp" not in self.ctor.base_names(cls):
            return None
        from ..semantics.function_bodies import imports_in

        owner, fn = got
        local = imports_in(fn, got.module)  # `from vllm import _custom_ops as ops` inside forward_cuda
        names: list[str] = []
        for call in find_all(fn, cst.Call):
            if not isinstance(call.func, (cst.Name, cst.Attribute)):
                continue
            dotted = self.index.dotted(got.module, call.func) or ""
            head, _, rest = got.module.code(call.func).strip().partition(".")
            if head in local:
                dotted = ".".join(x for x in (*local[head], rest) if x)
            if dotted.startswith(("vllm._custom_ops.", "torch.ops._C", "vllm.vllm_flash_attn", "flashinfer.")) \
                    or ".ops.triton" in dotted:
                names.append(dotted)
        return (sorted(set(names)), f"{owner.name}.forward_cuda") if names else None

    def _same_math(self, cls: Definition) -> str | None:
        """A class with no Ascend replacement that computes as a base class which has one (Llama3RotaryEmbedding
        overrides only how its cos/sin cache is built, not RotaryEmbedding's forward): that replacement's
        kernels would serve it; said so, with what the class overrides. None otherwise."""
        forwards = ("forward", "forward_native", "forward_oot", "forward_static", "forward_cuda")
        mro = self.ctor.mro(cls)
        for i, base in enumerate(mro[1:], start=1):
            if base.name == "CustomOp":
                return None
            replacement = self.backends.implementation(base)
            if replacement is base:
                continue
            own = [class_method(c, f) for c in mro[:i] for f in forwards]
            if any(fn is not None for fn in own):
                return None
            methods = [f.name.value for c in mro[:i] for f in _class_body(c)
                       if type(f) is cst.FunctionDef and f.name.value != "__init__"]
            return say("same_math" if methods else "same_math_no_method", cls=cls.name, base=base.name,
                       methods=methods, replacement=replacement.name,
                       where=f"{replacement.module.rel}:{replacement.line}")
        return None


def _class_body(cls: Definition) -> list:
    """The statements of a class's body (none for a one-line class)."""
    node = cls.node
    if not isinstance(node, cst.ClassDef) or type(node.body) is not cst.IndentedBlock:
        return []
    return list(node.body.body)
