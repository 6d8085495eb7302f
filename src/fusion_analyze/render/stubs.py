"""Fused-operator interface stubs from a match, and the importable --stubs module with reference code.

Parameter names come from the matched ops' tensors where the pattern asks for them (`{norm.in0|x}`: the
value the `norm` node reads first, else `x`); shapes are in model dimensions, with the numbers of --config
when given.
"""

from __future__ import annotations

import keyword
import re
import textwrap

from ..estimate.shapes import SMALL, Shapes, evaluate, shape_dims

_SLOT = re.compile(r"\{(\w+)\.(in|out)(\d+)\|(\w+)\}")
_NPU_NOTES = ["inputs contiguous in the last dimension (pass .contiguous() views otherwise)",
              "last dimension padded to a multiple of 16 elements (32 B) for aligned vector loads"]


def _value_name(v: str) -> str:
    return v.split("#", 1)[0]


def interface_of(pattern, match=None) -> dict:
    """The interface a match is given: its form's (the MoE experts' grouped GEMM), else the pattern's; a pattern
    seen through a kernel family's interface (commands/scaffold.py) keeps that one."""
    of = getattr(pattern, "interface_of", None)
    got = of(match) if callable(of) else None
    return got if isinstance(got, dict) else pattern.interface


def ordered_params(interface: dict) -> list[dict]:
    """Parameters with defaults last, so that every signature is valid Python."""
    ps = interface["params"]
    return [p for p in ps if "default" not in p] + [p for p in ps if "default" in p]


def bind_names(interface: dict, match) -> dict[str, str]:
    """Placeholder -> the real tensor name of the match (or the pattern's fallback)."""
    out: dict[str, str] = {}
    texts = [p["name"] for p in interface["params"]] + [interface.get("reference", "")]
    taken = {p["name"] for p in interface["params"] if not _SLOT.fullmatch(p["name"])}
    for text in texts:
        for m in _SLOT.finditer(text):
            key = m.group(0)
            if key in out:
                continue
            node, io, idx, fallback = m.group(1), m.group(2), int(m.group(3)), m.group(4)
            name = fallback
            op = match.ops.get(node) if match is not None else None
            if op is not None:
                vals = op.inputs if io == "in" else op.outputs
                if idx < len(vals):
                    cand = _value_name(vals[idx])
                    if cand.isidentifier() and not keyword.iskeyword(cand) and cand not in taken and cand != "_":
                        name = cand
            out[key] = name
            taken.add(name)
    return out


def _sub(text: str, names: dict[str, str]) -> str:
    return _SLOT.sub(lambda m: names.get(m.group(0), m.group(4)), text)


def _shape_text(shape: str, shapes: Shapes | None) -> str:
    if shapes is None or shapes.symbolic:
        return shape
    parts = []
    for d in shape_dims(shape):
        v = evaluate(d, shapes.dims)
        parts.append(f"{d}={int(v)}" if v is not None and not d.strip().isdigit() else d)
    return "[" + ", ".join(parts) + "]"


def _dtype(spec: dict, default: str) -> str:
    return spec.get("dtype", default)


def weight_dtype(spec: dict, match) -> str | None:
    """A parameter that is the weights of a matched op (`weight_of: <node>`): their dtype where the code builds
    them in one (the op's `params_dtype`: an fp32 router), as `float32`; else None (the model's)."""
    node = spec.get("weight_of")
    op = match.ops.get(node) if node and match is not None else None
    dtype = op.attrs.get("params_dtype") if op is not None else None
    return str(dtype).removeprefix("torch.") if dtype else None


def stub_source(pattern, match=None, shapes: Shapes | None = None, where: list[str] | None = None,
                body: str = "...", name: str | None = None) -> str:
    """`def fused_x(...) -> ...:` with a docstring of shapes, dtypes and NPU notes. Valid Python."""
    itf = interface_of(pattern, match)
    names = bind_names(itf, match)
    fname = name or itf["name"]
    sig, args_doc, own_notes = [], [], []
    for p in ordered_params(itf):
        pname = _sub(p["name"], names)
        ann = p["type"]
        piece = f"{pname}: {ann}"
        if "default" in p:
            piece += f" = {p['default']}"
        sig.append(piece)
        desc = f"{pname}: {ann}"
        built = weight_dtype(p, match)
        if p.get("shape"):
            desc += f" {_shape_text(p['shape'], shapes)}, {built or _dtype(p, 'model dtype (bf16/fp16)')}"
        if built:  # the code builds these weights in their own dtype: the GEMM's input is cast to it
            own_notes.append(f"{pname} is {built}, as the code builds it: the GEMM reads its input cast to {built}")
        if p.get("note"):
            desc += f"; {p['note']}"
        args_doc.append(desc)
    rets = itf["returns"]
    ret_ann = "torch.Tensor" if len(rets) == 1 else "tuple[" + ", ".join("torch.Tensor" for _ in rets) + "]"
    ret_doc = [f"{r['name']}: {_shape_text(r['shape'], shapes)}, {_dtype(r, 'model dtype')}" + (f"; {r['note']}" if r.get("note") else "")
               for r in rets]
    title = pattern.title["en"]
    doc = [f"{title}, as one NPU kernel ({pattern.id})."]
    if where:
        doc += ["", "Replaces: " + ", ".join(where)]
    doc += ["", "Args:"] + [f"    {a}" for a in args_doc]
    doc += ["", "Returns:"] + [f"    {r}" for r in ret_doc]
    notes = list(itf.get("notes", [])) + own_notes + _NPU_NOTES
    doc += ["", "NPU notes:"] + [f"    - {n}" for n in notes]
    doc_text = "\n".join(("    " + line) if line else "" for line in doc).replace('"""', "'''").replace("\\", "\\\\")
    head = f"def {fname}({', '.join(sig)}) -> {ret_ann}:"
    return f'{head}\n    """\n{doc_text}\n    """\n    {body}\n'


def reference_source(pattern, match=None, name: str | None = None) -> str:
    itf = interface_of(pattern, match)
    names = bind_names(itf, match)
    fname = f"reference_{name or itf['name']}"
    sig = []
    for p in ordered_params(itf):
        piece = _sub(p["name"], names)
        if "default" in p:
            piece += f"={p['default']}"
        sig.append(piece)
    body = textwrap.indent(_sub(itf.get("reference") or "raise NotImplementedError\n", names).rstrip() + "\n", "    ")
    return f"def {fname}({', '.join(sig)}):\n    \"\"\"The unfused ops composed as the model runs them: the oracle for {name or itf['name']}.\"\"\"\n{body}"


def _spec(pattern, match) -> dict:
    itf = interface_of(pattern, match)
    names = bind_names(itf, match)
    params = []
    for p in ordered_params(itf):
        built = weight_dtype(p, match)
        params.append({k: (_sub(v, names) if k == "name" else v) for k, v in p.items() if k != "weight_of"}
                      | ({"dtype": built} if built else {}))
    return {"params": params, "returns": itf["returns"]}


_MODULE_HEAD = '''"""Fused-operator stubs written by fusion-analyze{title}.

Each `fused_*` is the interface a kernel author implements on the NPU; each `reference_fused_*` composes
the unfused PyTorch ops as the model runs them, the oracle to test a kernel against:

    torch.testing.assert_close(fused_x(**inputs), reference_fused_x(**inputs))

`example_inputs(name)` builds small random inputs with the documented shapes.
"""

from __future__ import annotations

import torch

SMALL = {small!r}
'''

_MODULE_TAIL = '''

def _shape(shape, dims):
    inner = shape.strip()[1:-1]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch in "(["
        depth -= ch in ")]"
        cur += ch
    parts.append(cur)
    return [int(eval(p, {{"__builtins__": {{}}}}, dict(dims))) for p in parts if p.strip()]


def example_inputs(name, dims=None, seed=0):
    """Random inputs for `name` with the shapes its docstring gives (SMALL dimensions by default)."""
    dims = dict(SMALL, **(dims or {{}}))
    gen = torch.Generator().manual_seed(seed)
    out = {{}}
    for p in SPECS[name]["params"]:
        if p["type"].startswith("torch.Tensor"):
            shape = _shape(p["shape"], dims)
            dtype = p.get("dtype", "float32")
            if "group_list" in p["name"]:  # rows per group, in order: they add up to the first input's rows
                rows = next(iter(out.values())).shape[0]
                t = torch.bincount(torch.randint(0, shape[0], (rows,), generator=gen), minlength=shape[0])
                out[p["name"]] = t.to(getattr(torch, dtype))
            elif dtype in ("int64", "int32"):
                n = 1
                for s in shape:
                    n *= s
                if "slot" in p["name"]:
                    t = torch.randperm(dims["num_blocks"] * dims["block_size"], generator=gen)[:n].reshape(shape)
                else:
                    t = torch.randint(0, dims["max_position"], shape, generator=gen)
                out[p["name"]] = t.to(getattr(torch, dtype))
            elif "mask" in p["name"]:
                out[p["name"]] = torch.zeros(shape)
            elif "scale" in p["name"]:
                out[p["name"]] = torch.full(shape, 0.05)
            else:
                out[p["name"]] = torch.randn(shape, generator=gen, dtype=getattr(torch, dtype))
        elif "example" in p:
            out[p["name"]] = eval(p["example"], {{"__builtins__": {{}}}}, dict(dims))
    return out


def expected_shapes(name, dims=None):
    dims = dict(SMALL, **(dims or {{}}))
    return [_shape(r["shape"], dims) for r in SPECS[name]["returns"]]
'''


def stubs_module(items: list[tuple], title: str = "") -> str:
    """items: (pattern, match) pairs; one stub + reference per distinct function name."""
    parts = [_MODULE_HEAD.format(title=f" for {title}" if title else "", small=SMALL)]
    specs: dict[str, dict] = {}
    used: dict[str, int] = {}
    for pattern, match in items:
        base = interface_of(pattern, match)["name"]
        used[base] = used.get(base, 0) + 1
        name = base if used[base] == 1 else f"{base}_{used[base]}"
        parts.append("\n\n" + stub_source(pattern, match, name=name,
                                          body=f'raise NotImplementedError("the NPU kernel for {name} is not written yet")'))
        parts.append("\n\n" + reference_source(pattern, match, name=name))
        specs[name] = _spec(pattern, match)
        specs[f"reference_{name}"] = specs[name]
    parts.append(f"\n\nSPECS = {specs!r}\n")
    parts.append(_MODULE_TAIL.format())
    return "".join(parts)
