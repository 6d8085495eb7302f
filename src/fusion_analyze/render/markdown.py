"""Mode-A Markdown from the analysis JSON, through a Jinja2 template."""

from __future__ import annotations

import re

from functools import lru_cache
from pathlib import Path

import jinja2

from ..resources import data_dir, load_yaml
from ..ir.conditions import split_outside
from ..ir.states import ORDER

ROLES = [
    ("model", "主模型类"),
    ("backbone", "Backbone"),
    ("decoder_layer", "Decoder层"),
    ("attention", "Attention"),
    ("mlp", "MLP"),
    ("moe", "MoE"),
    ("moe_router", "MoE router"),
    ("moe_experts", "MoE experts"),
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
    if op["attrs"].get("part"):  # a part of the composite layer above it (MoE router, experts)
        head = f"  ↳ {what:<10} {name}"
    elif op["attrs"].get("step"):  # a step of the part above it (the experts' dispatch, GEMMs, combine)
        head = f"    ↳ {what:<12} {name}"
    elif op["attrs"].get("native_of"):  # a PyTorch op of the forward_native the layer above runs
        head = f"  · {what:<11} {name}"
    if op["layer_class"]:
        head += f" ({op['layer_class']}"
        if op["attrs"].get("ascend_class"):
            head += f" → {op['attrs']['ascend_class']}"
        head += ")"
    extra = []
    if op["attrs"].get("params_dtype"):  # the backend's class decides the weights' dtype (FP32 router)
        extra.append(f"weights {op['attrs']['params_dtype']}")
    if op["attrs"].get("all_reduce"):
        extra.append(f"all-reduce {op['attrs']['all_reduce']}")
    if op["kernels"]:  # what always runs, then what runs only when a test in its code holds (the JSON has each test)
        always = sorted({k["name"] for k in op["kernels"] if not k.get("condition")})
        tested = sorted({k["name"] for k in op["kernels"] if k.get("condition")} - set(always))
        if always:
            extra.append("kernels: " + ", ".join(always[:6]) + (" …" if len(always) > 6 else ""))
        if tested:
            extra.append("conditional: " + ", ".join(tested[:4]) + (f" and {len(tested) - 4} more" if len(tested) > 4 else ""))
    if op["condition"]:
        extra.append(f"if {op['condition']}" if len(op["condition"]) < 90 else "if " + op["condition"][:87] + "…")
    tail = f"  [{'; '.join(extra)}]" if extra else ""
    return f"{head:<70} {op['file']}:{op['line']}{tail}"


def render_markdown(analysis, template: str | None = None, lang: str = "zh") -> str:
    return render_data(analysis.report, template, lang)


@lru_cache(maxsize=1)
def _labels() -> dict:
    return load_yaml((data_dir("templates") / "labels.yaml").read_text(encoding="utf-8"))


def labels(lang: str) -> dict:
    from ..errors import UserError

    data = _labels()
    if lang not in data:
        raise UserError(f"--lang {lang}: use one of {', '.join(sorted(data))}")
    return data[lang]




def _state(o: dict, L: dict) -> str:
    b = o["benefit"]
    if o["status"] == "open" and b.get("rejected"):
        return f"{L['rejected']}: {b['rejected']}"
    text = L["status"][o["status"]]
    ev = o["evidence"][0] if o["evidence"] else None
    if ev and o["status"] != "open":
        text += f" (`{ev['file']}` L{ev['line']}: {ev['what'][:80]})"
    elif o["status"] == "inactive" and o["conditions"]:
        text += f": {o['conditions'][0]}"
    elif ev:
        text += f" (`{ev['file']}` L{ev['line']})"
    if o.get("note"):
        text += f"; {o['note'][:140]}"
    cond = o.get("conditional")
    if cond:  # the undecided test it rests on, said in the row itself
        first = re.sub(r"^built when ", "", (cond["when"] or cond["state_if"])[0])  # the test, not how it is known
        more = len(cond["when"]) + len(cond["state_if"]) - 1
        # a test on the layer's index holds in some layers of one model (a hybrid stack): said as where, not if
        word = L["conditional_layers"] if re.search(r"\blayer_id(x)?\b", first) else L["conditional_if"]
        text += f" — {word} `{short_condition(first)}`" + (f" (+{more})" if more else "")
    return text.replace("|", "\\|")


def short_condition(text: str, width: int = 72) -> str:
    """A condition cut at a word boundary outside brackets and quotes (never inside a token), with `…`."""
    if len(text) <= width:
        return text
    words, kept = split_outside(text, " "), ""
    for word in words:
        if kept and len(kept) + 1 + len(word) > width:
            break
        kept = f"{kept} {word}" if kept else word
    if len(kept) <= width:
        return kept + " …"
    # one bracketed test longer than the cell: cut at a space inside it, and close what is open
    cut = text[:width].rsplit(" ", 1)[0]
    closers = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for ch in cut:
        if ch in closers:
            stack.append(closers[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
    return cut + " …" + "".join(reversed(stack))


def _cuda_text(o: dict, L: dict) -> str:
    c = o["cuda"]
    text = L["cuda_status"].get(c["status"], c["status"])
    if c.get("pass"):
        text += f": `{c['pass']}` (`{c['flag']}` = {c['default']})"
    elif c.get("kernels"):  # the layer's CUDA path runs one kernel where Ascend runs its native ops
        text += ": " + ", ".join(f"`{k}`" for k in c["kernels"][:2]) + (f" ({c['runs']})" if c.get("runs") else "")
    return text.replace("|", "\\|")


def _benefit_text(o: dict, L: dict) -> str:
    from ..estimate.benefit import human_bytes

    b = o["benefit"]
    parts = []
    for name in ("prefill", "decode"):
        n = b["numbers"].get(name)
        if not n:
            continue
        pl, m = n["per_layer"], n["model"]
        text = (f"{name} ({n['num_tokens']} tokens): {L['saved_bytes']} {human_bytes(m['bytes'])} "
                f"({L['per_layer']} {human_bytes(pl['bytes'])}), {m['launches']} {L['launches']}, "
                f"{L['time']} ≈ {m['time_us']} µs")
        if "share_of_step" in n:
            text += f" ({n['share_of_step'] * 100:.1f}% of a ~{n['step_us']} µs weight-bound decode step)"
        parts.append(text)
    if not parts:
        parts.append(b["formula"])
    if b.get("note"):
        parts.append(b["note"])
    return "; ".join(parts)


def render_data(data: dict, template: str | None = None, lang: str = "zh") -> str:
    if template:
        from ..errors import UserError

        path = Path(template)
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(path.parent)), undefined=jinja2.StrictUndefined,
                                 keep_trailing_newline=True)
        try:
            tmpl = env.get_template(path.name)
            return _render(tmpl, data, lang)
        except jinja2.TemplateSyntaxError as exc:
            raise UserError(f"{template}:{exc.lineno}: template error: {exc.message}")
        except (jinja2.UndefinedError, jinja2.TemplateError, TypeError) as exc:
            raise UserError(f"{template}: template error: {exc}; see templates/report.md.j2 for the data it gets")
    else:
        tmpl = _shipped_template()
    return _render(tmpl, data, lang)


@lru_cache(maxsize=1)
def _shipped_template():
    """Compiled once per process: `all` renders a report per architecture."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("report.md.j2")


def _render(tmpl, data: dict, lang: str) -> str:
    ops, other = [], []
    for op in data["ops"]:
        if op["kind"] in _HIDE:
            continue
        if op["steady"]:
            ops.append({**op, "line_text": op_line(op)})
        elif op["attrs"].get("other_branch"):
            other.append({**op, "line_text": op_line(op)})
    L = labels(lang)
    opps = sorted(data.get("opportunities", []),  # a conditional row after the decided ones of its state
                  key=lambda o: (ORDER[o["status"]], "conditional" in o, -o["benefit"]["priority"], o["id"]))
    table, open_ = [], []
    from ..estimate.benefit import STARS

    for o in opps:
        row = {**o, "stars": STARS[o["benefit"]["priority"]], "title": o["title"][lang],
               "state": _state(o, L), "target": (o.get("target") or {}).get(lang, ""), "cuda_text": _cuda_text(o, L)}
        if o["cuda_only"]:
            row["state"] = f"**{row['state']}** {L['cuda_only']}"
        table.append(row)
        if o["status"] == "open" and not o["benefit"].get("rejected"):
            files = [{"file": e["file"], "line": e["line"], "what": e["what"]} for e in o["evidence"]]
            open_.append({**row, "files": files, "stub": o["interface"]["stub"], "benefit_text": _benefit_text(o, L),
                          "message": o["message"]})
    return tmpl.render(
        L=L, table=table, open=open_, estimate=data.get("estimate", {}),
        conditional_count=sum(1 for o in opps if "conditional" in o and o["status"] != "inactive"),
        model=data["model"], sources=data["sources"], backend=data["backend"], locations=data["locations"],
        repeat=data["repeat"], ops=ops, roles=ROLES, sections=SECTIONS, unknowns=data["unknown_callees"],
        errors=data["errors"], configuration=data.get("configuration"), alternatives=data.get("alternatives", []),
        load_time_fusers=data.get("load_time_fusers"), other_branch=other,
    )
