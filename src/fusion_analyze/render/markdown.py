"""Mode-A Markdown from the analysis JSON, through a Jinja2 template."""

from __future__ import annotations

import re

from functools import lru_cache
from pathlib import Path

import jinja2

from ..resources import data_dir, load_yaml
from ..ir.conditions import split_outside
from ..ir.states import ORDER
from ..ir.texts import Texts, code_span

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
# (the labels a report shows for ROLES and SECTIONS are labels.yaml `roles` and `sections`, in its language)
_HIDE = {"view", "cast", "identity"}


def _precision_cast(op: dict) -> bool:
    """A cast to a floating dtype the code states (`x.to(torch.float32)`, `.float()`): a kernel that changes the
    activations' precision, shown in the sequence; a cast of index tensors (to int64), or to a dtype the code does
    not state (`x.to(orig_dtype)`), is left to the JSON."""
    return op["kind"] == "cast" and str(op["attrs"].get("dtype", "")).startswith(("torch.float", "torch.bfloat"))


def op_line(op: dict, L: dict | None = None) -> str:
    """One op per line: module, layer class, kernels, file:line, condition (its words in L's language)."""
    L = L or labels("en")
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
    if op["attrs"].get("holds"):  # the module it holds: the builder's q_b_proj in vllm-ascend's MLA impl's q_proj
        extra.append(f"{L['op_holds']} " + ", ".join(
            h["name"] + (f" {L['conditional_if']} {condition_text(h['condition'], L)}" if h["condition"] else "")
            for h in op["attrs"]["holds"]))
    if op["attrs"].get("params_dtype"):  # the code decides the weights' dtype (FP32 router)
        extra.append(f"{L['op_weights']} {op['attrs']['params_dtype']}")
    if op["kind"] == "cast" and op["attrs"].get("dtype"):
        head += f" → {op['attrs']['dtype']}"
    if op["attrs"].get("all_reduce"):
        extra.append(f"all-reduce {op['attrs']['all_reduce']}")
    if op["kernels"]:  # what always runs, then what runs only when a test in its code holds (the JSON has each test)
        gone = {k["name"] for k in op["kernels"] if k.get("unavailable")}  # the backend's install lacks it

        def shown(name: str) -> str:
            return f"{name} ✗ {L['op_unavailable']}" if name in gone else name

        always = [shown(n) for n in sorted({k["name"] for k in op["kernels"] if not k.get("condition")})]
        tested = [shown(n) for n in sorted({k["name"] for k in op["kernels"] if k.get("condition")}
                                           - {k["name"] for k in op["kernels"] if not k.get("condition")})]
        if always:
            extra.append(f"{L['op_kernels']}: " + ", ".join(always[:6]) + (" …" if len(always) > 6 else ""))
        if tested:
            extra.append(f"{L['op_conditional']}: " + ", ".join(tested[:4])
                         + (" " + L["op_more"].format(n=len(tested) - 4) if len(tested) > 4 else ""))
    if op["attrs"].get("replaced_by"):  # a function a vllm-ascend patch put in place: the patch's file:line
        extra.append(f"{L['op_replaced']} {op['attrs']['replaced_by'].rsplit(' (', 1)[-1].rstrip(')')}"
                     + (f" ({L['op_replaced_open']})" if op["attrs"].get("replacement_open") else ""))
    if op["condition"]:
        cond = op["condition"] if len(op["condition"]) < 90 else op["condition"][:87] + "…"
        extra.append(f"{L['conditional_if']} {condition_text(cond, L)}")
    tail = f"  [{'; '.join(extra)}]" if extra else ""
    return f"{head:<70} {op['file']}:{op['line']}{tail}"


def render_markdown(analysis, template: str | None = None, lang: str = "zh") -> str:
    return render_data(analysis.report, template, lang)


@lru_cache(maxsize=1)
def _labels() -> dict:
    return load_yaml((data_dir("templates") / "labels.yaml").read_text(encoding="utf-8"))


def labels(lang: str) -> dict:
    from ..errors import UserError

    data = {k: v for k, v in _labels().items() if k != "texts"}  # `texts`: the sentences of ir/texts.py
    if lang not in data:
        raise UserError(f"--lang {lang}: use one of {', '.join(sorted(data))}")
    return data[lang]


def condition_text(text: str, L: dict) -> str:
    """A condition as the walk prints it (code), with the few words it carries in L's language: `built when`
    before the tests a layer is built under, `(one of N call paths)`."""
    text = text.replace("built when ", L["built_when"] + " ")
    return re.sub(r"\(one of (\d+) call paths\)", lambda m: L["one_of_paths"].format(n=m.group(1)), text)


def _condition_md(text, L: dict, T) -> str:
    """One of an opportunity's conditions: a sentence (a flag's default, a guard) in the report's language, a
    test as code."""
    said = T(text)
    return said if said is not text else code_span(condition_text(text, L))


def _cut(text: str, width: int) -> str:
    """`text` cut to `width` characters with `…`, a code span it cuts closed."""
    if len(text) <= width:
        return text
    cut = text[:width].rstrip()
    return cut + ("`" if cut.count("`") % 2 else "") + "…"


def _state(o: dict, L: dict, T=None) -> str:
    T = T or Texts(None, "en")
    b = o["benefit"]
    if o["status"] == "open" and b.get("rejected"):
        return f"{L['rejected']}: {T(b['rejected'])}"
    text = L["status"][o["status"]]
    ev = o["evidence"][0] if o["evidence"] else None
    if ev and o["status"] != "open":
        text += f" (`{ev['file']}` L{ev['line']}: {_cut(T(ev['what']), 80)})"
    elif o["status"] == "inactive" and o["conditions"]:
        text += f": {_condition_md(o['conditions'][0], L, T)}"
    elif ev:
        text += f" (`{ev['file']}` L{ev['line']})"
    if o.get("note"):
        text += f"; {_cut(T(o['note']), 140)}"
    cond = o.get("conditional")
    if cond:  # the undecided test it rests on, said in the row itself
        test = (cond["when"] or cond["state_if"])[0]
        first = re.sub(r"^built when ", "", test)  # the test, not how it is known
        more = len(cond["when"]) + len(cond["state_if"]) - 1
        # a test on the layer's index holds in some layers of one model (a hybrid stack): said as where, not if
        word = L["conditional_layers"] if re.search(r"\blayer_id(x)?\b", first) else L["conditional_if"]
        said = T(test)  # a sentence (a pass's guard, a constant it is traced with), else code
        shown = _cut(said, 72) if said is not test else f"`{condition_text(short_condition(first), L)}`"
        text += f" — {word} {shown}" + (f" (+{more})" if more else "")
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


def _cuda_text(o: dict, L: dict, T=None) -> str:
    T = T or Texts(None, "en")
    c = o["cuda"]
    text = L["cuda_status"].get(c["status"], c["status"])
    if c.get("pass"):
        default = T(c["default"])
        text += f": `{c['pass']}` (`{c['flag']}` = {default if default is not c['default'] else code_span(str(default))})"
    elif c.get("kernels"):  # the layer's CUDA path runs one kernel where Ascend runs its native ops
        text += ": " + ", ".join(f"`{k}`" for k in c["kernels"][:2]) + (f" ({c['runs']})" if c.get("runs") else "")
    return text.replace("|", "\\|")


def saving_share(o: dict) -> float:
    """The rank of an open row: the larger share of its step that fusing it saves (decode or prefill); -1 when it
    is not costed or does not pay."""
    b = o["benefit"]
    if o["status"] != "open" or b.get("rejected") or not b["numbers"]:
        return -1.0
    # a scenario where the device profile measured the kernel slower than what it replaces does not rank the row
    return max((n["share_of_step"] for n in b["numbers"].values() if not n.get("measured")), default=-1.0)


def _us(x: float) -> str:
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} µs"


def _saving_cell(o: dict, name: str) -> str:
    n = o["benefit"]["numbers"].get(name)
    if not n or o["benefit"].get("rejected"):
        return "-"
    return f"{_us(n['model']['time_us'])} ({n['share_of_step'] * 100:.1f}%)"


def _benefit_text(o: dict, L: dict, T) -> str:
    from ..estimate.benefit import human_bytes

    b = o["benefit"]
    parts = []
    for name in ("decode", "prefill"):
        n = b["numbers"].get(name)
        if not n:
            continue
        pl, m = n["per_layer"], n["model"]
        parts.append(L["benefit_line"].format(
            step=L["step_names"][name], tokens=n["num_tokens"], mode=_mode(n, L),
            saved=_us(m["time_us"]), per_layer=_us(pl["time_us"]), before=_us(pl["before_us"]),
            after=_us(pl["after_us"]), share=f"{n['share_of_step'] * 100:.1f}", step_us=_us(n["step_us"]),
            bytes=human_bytes(pl["bytes"]), launches=pl["launches"]))
    if not parts:
        nbytes, _, launches = b["formula"].partition("; ")
        parts.append(L["benefit_formula"].format(bytes=nbytes, launches=launches) if launches.isdigit()
                     else b["formula"])
    if b.get("note"):
        parts.append(T(b["note"]))
    return "; ".join(parts)


def _when(row: dict, L: dict) -> str:
    cond = row.get("conditional")
    if not cond:
        return ""
    first = re.sub(r"^built when ", "", (cond["when"] or cond["state_if"])[0])
    return f" — {L['conditional_if']} `{short_condition(first, 48)}`"


def _mode(step: dict, L: dict) -> str:
    """How a step runs, as its launches are costed (`queued`: eager with the host ahead of the device)."""
    mode = step.get("launch") or step["mode"]
    return L["modes"].get(mode, mode)


def _step_text(est: dict, L: dict) -> str:
    """The line under the ranked list: what one step is, on which device, per rank."""
    dev = est.get("device") or {}
    if not dev:
        return ""
    launch = dev.get("launch_us")
    launch_text = (L["launch_modes"].format(eager=launch.get("eager"), graph=launch.get("graph"))
                   if isinstance(launch, dict) else f"{launch} µs")
    if isinstance(launch, dict) and launch.get("queued"):
        launch_text += L["launch_queued"].format(us=launch["queued"])
    if "assumption" in str((dev.get("sources") or {}).get("launch_us", "")):  # said where it is not measured
        launch_text += f" ({L['assumed']})"
    tp = est.get("tp")
    par = L["parallel"].format(tp=tp or 1, ep=est.get("ep") or 1, note="" if tp else f" ({L['tp_default']})")
    text = f"{par} · {dev.get('name')} ({dev.get('hbm_gb_s')} GB/s, {dev.get('tflops')} TFLOPS, {launch_text})"
    steps = est.get("steps") or {}
    scen = est.get("scenarios") or {}
    for name in ("decode", "prefill"):
        st, sc = steps.get(name), scen.get(name, {})
        if not st:
            continue
        text += " · " + L["step_line"].format(step=L["step_names"][name], tokens=sc.get("num_tokens"),
                                              kv=sc.get("kv_len"), mode=_mode(st, L),
                                              us=_us(st["step_us"]))
        if st["not_costed"]:
            text += " " + L["step_partial"].format(n=st["not_costed"])
        if st.get("fails"):  # ops whose kernels the backend's install lacks: not costed as if they ran
            text += " " + L["step_fails"].format(n=st["fails"])
    return text


def _deployment_text(d: dict | None, L: dict) -> str:
    """The header's deployment line: the engine arguments as given (or vLLM's defaults), the quantisation,
    the mode of each path, and the MoE comm method the runtime picks on each."""
    if not d:
        return ""
    parts = [f"`{' '.join(d['stated'])}`" if d.get("stated") else L["deployment_defaults"]]
    parts.append(L["deployment_parallel"].format(tp=d["tensor_parallel_size"], dp=d["data_parallel_size"],
                                                 ep=d["expert_parallel_size"]))
    if d.get("quantization"):
        types = ", ".join(f"{t} × {n}" for t, n in (d.get("quant_types") or {}).items())
        parts.append(L["deployment_quant"].format(method=d["quantization"], types=f" ({types})" if types else ""))
        if not d.get("quant_layers_mapped"):
            parts[-1] += f" ({L['deployment_quant_unmapped']})"
    else:
        parts.append(L["deployment_unquantised"])
    modes = d.get("mode") or {}
    if modes:
        parts.append(", ".join(f"{L['step_names'].get(k, k)}: {L['modes'].get(v, v)}" for k, v in modes.items()))
    for c in d.get("moe_comm") or ():
        parts.append(L["deployment_comm"].format(cls=c["class"], paths=", ".join(L["step_names"].get(p, p) for p in c["paths"])))
    if d.get("mc2_capacity"):
        parts.append(L["deployment_capacity"].format(n=d["mc2_capacity"], seqs=d["max_num_seqs"]))
    for c in d.get("attention") or ():  # how the attention backend was chosen: run, open, or the catalog's
        how = (L["deployment_attention_passed"].format(at=c["passed_by"]) if c.get("passed_by") and c["decided"]
               else L["deployment_attention_undecided"] if c.get("open") or (c.get("passed_by") and not c["decided"])
               else L["deployment_attention_selected"] if c["decided"] else L["deployment_attention_open"] if c["selector"]
               else L["deployment_attention_table"])
        others = ", ".join(o["impl"] or o["backend"].rsplit(".", 1)[-1] for o in c.get("alternatives") or ())
        parts.append(L["deployment_attention"].format(impl=c["impl"], how=how) + (
            " " + L["deployment_attention_or"].format(others=others) if others else ""))
    return " · ".join(parts)


def _memory_text(d: dict | None, L: dict) -> str:
    """The header's line where the weights one rank keeps do not fit the device's memory."""
    from ..estimate.memory import advice

    d = d or {}
    m = d.get("memory")
    if not m or m.get("fits"):
        return ""
    return L["memory_no_fit_line"].format(weights=m["weights_gib"], memory=m["memory_gib"], device=m["device"],
                                          tp=d["tensor_parallel_size"], ep=d["expert_parallel_size"], fits=advice(m),
                                          how=m["bytes_per_weight"])


def _blocker_lines(data: dict, L: dict) -> list[str]:
    """The header's lines for the raises the walked deployment surely reaches (walk/blockers.py)."""
    out = []
    for b in data.get("blockers") or ():
        kind = L["blocker_kind"].format(kind=b["layer_kind"] + 1) if "layer_kind" in b else ""
        out.append(L["blocker_line"].format(backend=data["backend"], where=code_span(b["in"]), raises=code_span(b["raises"]),
                                            file=b["file"], line=b["line"], when=L["blocker_when"][b["when"]], kind=kind))
    return out


def _unavailable_text(data: dict, L: dict, T) -> str:
    """The header's line where the walked path calls kernels the backend's install does not have."""
    gone = [g for g in data.get("unavailable_kernels") or () if g.get("fails")]  # (else under a test left open)
    if not gone:
        return ""
    names = {o["id"]: o for o in data["ops"]}
    items = []
    for g in gone:
        ops = [names[i] for i in g["ops"] if i in names]
        where = ", ".join(dict.fromkeys(f"{o['path'].rsplit('.', 1)[-1] if o['layer_class'] else o['name']} "
                                        f"({o['file'].rsplit('/', 1)[-1]}:{o['line']})" for o in ops[:3]))
        items.append(f"`{g['kernel']}` ({where}{', …' if len(ops) > 3 else ''})")
    return L["unavailable_line"].format(kernels="; ".join(items), why=T(gone[0]["why"]))


def _top(rows: list[dict], limit: int = 5) -> list[dict]:
    """The open rows that pay, largest saving first (the report's first section)."""
    ranked = [r for r in rows if saving_share(r) > 0]
    return ranked[:limit]


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


def _blocks(rows: list[dict], L: dict) -> list[dict]:
    """The op lines of a sequence; a condition shared by consecutive ops (a block) said once, above them."""
    out: list[dict] = []
    i = 0
    while i < len(rows):
        op, j = rows[i], i + 1
        cond = op["condition"]
        while cond and j < len(rows) and rows[j]["condition"] == cond and rows[j]["section"] == op["section"]:
            j += 1
        if cond and j - i >= 2:
            text = cond if len(cond) <= 200 else short_condition(cond, 200)
            out.append({"section": op["section"], "line_text": f"# {L['conditional_if']} {condition_text(text, L)}:"})
            out.extend({**r, "line_text": op_line({**r, "condition": None}, L)} for r in rows[i:j])
        else:
            out.extend({**r, "line_text": op_line(r, L)} for r in rows[i:j])
        i = j
    return out


def _render(tmpl, data: dict, lang: str) -> str:
    L = labels(lang)
    T = Texts(data.get("texts"), lang)  # the report's sentences (ir/texts.py), said in `lang`
    ops, other = [], []
    for op in data["ops"]:
        if op["kind"] in _HIDE and not _precision_cast(op):
            continue
        if op["steady"] and op.get("on_path", True):
            ops.append(op)
        elif op["attrs"].get("other_branch") or op["steady"]:  # the other side of a test: an alternative
            other.append(op)
    kinds = []
    if len(data.get("layer_kinds") or []) > 1:  # each kind of decoder layer its own sequence
        for kd in data["layer_kinds"]:
            rows = [op for op in ops if op["section"] == "layer" and op["attrs"].get("layer_kind") == kd["kind"]]
            said = ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in kd["ranges"][:6]) + (", …" if len(kd["ranges"]) > 6 else "")
            # a value is code (a class, a configuration value), or a sentence (the first layer's carried values)
            differs = ", ".join(f"`{k}`: {T(v)}" if T(v) != v or v in T.known else f"`{k}`: `{v}`"
                                for k, v in kd["differs"].items())
            kinds.append({"title": L["layer_kind"].format(k=kd["kind"] + 1, ranges=said, count=kd["count"], of=kd["of"])
                          + (f" — {differs}" if differs else ""), "rows": _blocks(rows, L)})
        ops = [op for op in ops if op["section"] != "layer"]
    ops, other = _blocks(ops, L), _blocks(other, L)
    # open rows that pay first, by the share of a step they save; then the rest by state (a conditional row
    # after the decided ones of its state)
    opps = sorted(data.get("opportunities", []),
                  key=lambda o: (-saving_share(o), ORDER[o["status"]], "conditional" in o, -o["benefit"]["priority"],
                                 o["id"]))
    table, open_ = [], []
    from ..estimate.benefit import STARS

    costed = bool(data.get("estimate", {}).get("steps"))
    for o in opps:
        is_open = o["status"] == "open" and not o["benefit"].get("rejected")
        stars = STARS[o["benefit"]["priority"]] if is_open and (o["benefit"]["numbers"] or not costed) else ""
        row = {**o, "stars": stars, "title": o["title"][lang],
               "state": _state(o, L, T), "target": (o.get("target") or {}).get(lang, ""), "cuda_text": _cuda_text(o, L, T),
               "decode": _saving_cell(o, "decode"), "prefill": _saving_cell(o, "prefill"),
               "where": f"`{o['file']}` L{o['line']}", "kernel": o["interface"]["name"]}
        if o["cuda_only"]:
            row["state"] = f"**{row['state']}** {L['cuda_only']}"
        kinds_of = o.get("layer_kinds") or []
        if kinds_of and len(kinds_of) < len(data.get("layer_kinds") or []):  # not in every kind of layer
            row["state"] += " — " + L["holds_in_kinds"].format(kinds=", ".join(str(k + 1) for k in kinds_of))
        table.append(row)
        if is_open:
            files = [{"file": e["file"], "line": e["line"], "what": T(e["what"])} for e in o["evidence"]]
            message = o["message"].get(lang, "") if isinstance(o["message"], dict) else o["message"]
            open_.append({**row, "files": files, "stub": o["interface"]["stub"], "benefit_text": _benefit_text(o, L, T),
                          "message": message, "conditions": [_condition_md(c, L, T) for c in o["conditions"]]})
    est = data.get("estimate", {})
    if est.get("shapes_source"):  # a preset's name and source: said in the report's language
        est = {**est, "shapes_source": T(est["shapes_source"])}
    if not data["sources"].get("vllm_ascend") and est.get("device"):  # CUDA only: no Ascend device is named
        est = {**est, "device": {**est["device"], "name": L["cuda_only_device"].format(id=est["device"].get("id"))}}
    top = [{**r, "when": _when(r, L)} for r in _top(table)]
    return tmpl.render(
        L=L, table=table, open=open_, estimate=est, top=top, step_text=_step_text(est, L),
        deployment_text=_deployment_text(data.get("deployment"), L), memory_text=_memory_text(data.get("deployment"), L),
        blocker_lines=_blocker_lines(data, L),
        unavailable_text=_unavailable_text(data, L, T),
        conditional_count=sum(1 for o in opps if "conditional" in o and o["status"] != "inactive"),
        model=data["model"], sources=data["sources"], backend=data["backend"], locations=data["locations"],
        repeat=data["repeat"], ops=ops, kinds=kinds, roles=[(r, L["roles"].get(r, r)) for r, _ in ROLES],
        sections=[(s, L["sections"].get(s, s)) for s, _ in SECTIONS], unknowns=data["unknown_callees"],
        not_followed=data.get("not_followed", []),
        errors=data["errors"], configuration=data.get("configuration"), alternatives=data.get("alternatives", []),
        load_time_fusers=data.get("load_time_fusers"), other_branch=other,
        T=T, cond=lambda text: code_span(condition_text(text, L)) if text else text, code=code_span,
    )
