"""Mode-A Markdown from the analysis JSON, through a Jinja2 template."""

from __future__ import annotations

from pathlib import Path

import jinja2

from ..resources import data_dir

ROLES = [
    ("model", "主模型类"),
    ("backbone", "Backbone"),
    ("decoder_layer", "Decoder层"),
    ("attention", "Attention"),
    ("mlp", "MLP"),
    ("moe", "MoE"),
]
SECTIONS = [("prologue", "Prologue"), ("layer", "Decoder layer"), ("epilogue", "Epilogue")]
_HIDE = {"view", "cast", "identity"}


def op_line(op: dict) -> str:
    """One op per line: module, layer class, kernels, file:line, condition."""
    what = op["kind"]
    if op["attrs"].get("role") == "router":
        what = "router matmul"
    name = op["path"].rsplit(".", 1)[-1] if op["layer_class"] else op["name"]
    head = f"{what:<14} {name}"
    if op["layer_class"]:
        head += f" ({op['layer_class']}"
        if op["attrs"].get("ascend_class"):
            head += f" → {op['attrs']['ascend_class']}"
        head += ")"
    extra = []
    if op["attrs"].get("all_reduce"):
        extra.append(f"all-reduce {op['attrs']['all_reduce']}")
    if op["kernels"]:
        names = sorted({k["name"] for k in op["kernels"]})
        extra.append("kernels: " + ", ".join(names[:6]) + (" …" if len(names) > 6 else ""))
    if op["condition"]:
        extra.append(f"if {op['condition']}" if len(op["condition"]) < 90 else "if " + op["condition"][:87] + "…")
    tail = f"  [{'; '.join(extra)}]" if extra else ""
    return f"{head:<70} {op['file']}:{op['line']}{tail}"


def render_markdown(analysis, template: str | None = None) -> str:
    from ..pipeline import to_json

    data = to_json(analysis)
    return render_data(data, template)


def render_data(data: dict, template: str | None = None) -> str:
    if template:
        path = Path(template)
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(path.parent)), undefined=jinja2.StrictUndefined,
                                 keep_trailing_newline=True)
        tmpl = env.get_template(path.name)
    else:
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
                                 undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
        tmpl = env.get_template("report.md.j2")
    ops = []
    for op in data["ops"]:
        if not op["steady"] or op["kind"] in _HIDE:
            continue
        ops.append({**op, "line_text": op_line(op)})
    return tmpl.render(
        model=data["model"], sources=data["sources"], backend=data["backend"], locations=data["locations"],
        repeat=data["repeat"], ops=ops, roles=ROLES, sections=SECTIONS, unknowns=data["unknown_callees"],
        errors=data["errors"],
    )
