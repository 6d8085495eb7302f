"""One cost model of a model step: every op of the walked sequence gets bytes, FLOPs, transfer bytes and launches
from its shapes, per rank; a step is the sum of its ops; a fusion saves the time of its ops minus the time of the
one op that replaces them.

Shapes flow along the walk's dataflow: each value gets a row count (tokens, or token-expert pairs inside a MoE
layer's experts) and a width (elements per row, on one rank), from the model's dimensions (estimate/shapes.py) and
what the walk recorded of each layer (its class, `attrs.values`, `merged`, `role`, `part`, `step`). An op whose
shapes cannot be told is not costed and is counted as such: a step is then a lower bound, and the report says so.

time(op) = max(bytes / HBM bandwidth, FLOPs / peak) + dependent accesses × their latency + transfer bytes / link
bandwidth + launches × launch cost, the launch cost of the step's mode (eager or graph capture,
patterns/catalog/devices.yaml `scenarios.*.mode`); an eager step whose device work outlasts the host's dispatch of
its kernels runs with the host ahead (`queued`): a launch then costs the device's time per kernel, not the host's.
A dependent access is one whose address is loaded first (a row gathered or scattered at an index: a token's
position, its cache slot, its expert): the index's round trip comes before the row's, at any size.
A fused op reads and writes what its ops do, less the intermediate tensors it keeps on chip; a fused
communication op overlaps its transfer with its compute (max instead of sum).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.ops import Op, loop_carried
from .shapes import DTYPE_BYTES

# ops that only relabel a tensor: no kernel, no bytes (a `contiguous` of a strided view may copy; not counted)
VIEWS = {"view", "split", "transpose", "identity", "reshape", "permute", "expand", "squeeze", "unsqueeze"}
# element-wise kernels: read their tensor inputs, write one output as wide as the widest input
ELEMENTWISE = {"add", "mul", "sub", "div", "neg", "exp", "sigmoid", "silu", "gelu", "relu", "tanh", "clamp",
               "cast", "softplus", "pow", "sqrt", "rsqrt", "square", "abs", "where", "masked_fill", "softcap",
               "scale", "mean", "sum", "cat", "activation", "elementwise", "softmax"}
NORMS = {"rmsnorm", "layernorm", "add_rmsnorm", "add_layernorm", "gemma_rmsnorm", "l2norm", "groupnorm", "norm",
         "rmsnorm_gated"}
GATED = {"silu_mul", "gelu_mul", "gate_act_mul", "swiglu", "geglu", "act_mul"}
QUANT = {"quant", "dynamic_quant"}  # bf16 in, int8 out and a scale per row
COLLECTIVES = {"allreduce": 2.0, "allgather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0}


@dataclass
class OpCost:
    rows: float = 0.0
    bytes: float = 0.0
    flops: float = 0.0
    comm: float = 0.0  # bytes each rank sends over the link
    launches: int = 1
    dependent: int = 0  # accesses whose address the kernel loads first (an index): their latency is in series
    known: bool = True
    why: str = ""  # an op not costed: why
    fails: bool = False  # not costed because it calls a kernel the backend's install does not have
    parts: dict = field(default_factory=dict)  # name -> OpCost: the kernels of a layer a fusion may take one of

    def part(self, name: str | None) -> "OpCost":
        return self.parts.get(name, self) if name else self

    def time_us(self, device: dict, mode: str) -> float:
        if not self.known:
            return 0.0
        return _time(self.bytes, self.flops, self.comm, self.launches, device, mode, overlap=False,
                     dependent=self.dependent)


def _time(nbytes: float, flops: float, comm: float, launches: int, device: dict, mode: str, overlap: bool,
          dependent: int = 0) -> float:
    mem = nbytes / (device["hbm_gb_s"] * 1e3)  # GB/s -> bytes per µs
    compute = flops / (device["tflops"] * 1e6)  # TFLOP/s -> FLOP per µs
    link = comm / (device["link_gb_s"] * 1e3) if comm and device.get("link_gb_s") else 0.0
    busy = max(mem, compute, link) if overlap else max(mem, compute) + link
    return busy + dependent * dependent_us(device) + launches * launch_us(device, mode)


def dependent_us(device: dict) -> float:
    """What one dependent access (its address loaded first) adds to a kernel: the profile's
    `dependent_access_us` (calibrate: a gather of rows at an index against a copy of the same rows, at a few rows,
    replayed from a graph); 0 for a profile without it."""
    v = device.get("dependent_access_us")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else 0.0


def launch_us(device: dict, mode: str) -> float:
    """The fixed cost of one kernel in `mode`: `eager`, the host's dispatch (calibrate's loop of tiny ops, which
    the host paces); `graph`, replayed from a graph; `queued`, launched eagerly with the host ahead of the device
    (the step's device work outlasts the host's dispatch): the device's time per kernel, the profile's
    `launch_us.queued` where calibrate measured it, else the graph's figure. Without a host launch to hide behind
    (graph, queued), a kernel costs at least what the profile's measured kernels took replayed from a graph
    (`measured` entries of mode graph, a kernel that reads and writes HBM at a few tokens), more than calibrate's
    launch loop (a 1-element multiply that stays in L2)."""
    launch = device["launch_us"]
    if not isinstance(launch, dict):
        base = float(launch)
    elif mode == "queued":
        base = float(launch.get("queued") or launch["graph"])
    else:
        base = float(launch[mode])
    if mode in ("graph", "queued"):
        floors = [float(m["fused_us"]) for m in device.get("measured") or []
                  if isinstance(m, dict) and m.get("mode") == "graph" and m.get("fused_us")]
        if floors:
            return max(base, min(floors))
    return base


@dataclass
class Parallel:
    tp: int = 1
    ep: int = 1  # expert-parallel size: each rank holds num_experts / ep experts (1: experts split by TP)


@dataclass
class Step:
    """The costs of one step (prefill or decode) on one rank."""

    scenario: str
    mode: str
    costs: dict[str, OpCost] = field(default_factory=dict)  # op id -> its cost
    launch: str = ""  # the launch cost its ops pay (launch_us): the mode's, or `queued` (eager, the host ahead)
    counted: set[str] = field(default_factory=set)  # ops on the path the step adds (each undecided test's first side)
    layer_us: float = 0.0
    total_us: float = 0.0
    unknown: list[str] = field(default_factory=list)  # counted ops whose cost could not be told
    # counted ops that call a kernel the backend's install does not have (attrs.unavailable): the path fails there,
    # so they are not costed as if they ran
    fails: list[str] = field(default_factory=list)
    num_layers: int = 1
    fused_us: float = 0.0  # what the backend's graph passes already save of the walked ops (estimate.benefit)
    moe_layers: int = 1  # the layers that run the walked MoE ops (num_layers less the first dense ones)
    # where the decoder layers are of several kinds (WalkResult.layer_kinds): each kind's layer count and the
    # time of one of its layers; the step sums kind × count
    kind_counts: list[int] = field(default_factory=list)
    kind_us: list[float] = field(default_factory=list)

    def layers_of(self, ops) -> int:
        """How many layers run these (layer-section) ops: their kind's count where the layers are of several
        kinds, else the MoE layers for a MoE op, else every layer."""
        kinds = {o.attrs.get("layer_kind") for o in ops} - {None}
        if self.kind_counts and len(kinds) > 1:
            across = crossing_kind(ops)
            if across is not None and across < len(self.kind_counts):
                return self.kind_counts[across]  # once per layer of the kind that hands its output on
            return 0  # ops of several kinds: no one layer holds them all (each kind is walked on its own)
        if self.kind_counts and kinds:
            return sum(self.kind_counts[k] for k in kinds if k < len(self.kind_counts))
        if self.kind_counts:
            return self.num_layers
        return self.moe_layers if any(is_moe_op(o) for o in ops) else self.num_layers

    def to_json(self, device: dict | None = None) -> dict:
        d: dict = {"mode": self.mode, "launch": self.launch or self.mode, "layer_us": round(self.layer_us, 2),
                   "step_us": round(self.total_us, 1),
                   "num_layers": self.num_layers, "moe_layers": self.moe_layers, "not_costed": len(self.unknown),
                   "fused_by_passes_us": round(self.fused_us, 1)}
        if self.kind_counts:
            d["layer_kinds"] = [{"kind": k, "count": n, "layer_us": round(us, 2)}
                                for k, (n, us) in enumerate(zip(self.kind_counts, self.kind_us))]
        if self.fails:
            d["fails"] = len(self.fails)
        if device is not None:  # each op the step adds, with what its time is made of; those not costed, with why
            d["ops"] = {i: {"bytes": int(c.bytes), "flops": int(c.flops), "link_bytes": int(c.comm),
                            "launches": c.launches, "time_us": round(c.time_us(device, self.launch or self.mode), 3)}
                        for i, c in self.costs.items() if i in self.counted and c.known}
            d["not_costed_ops"] = {i: self.costs[i].why for i in self.unknown + self.fails}
        return d


class StepModel:
    """Costs of every op of one walk, for one scenario and one parallel layout."""

    def __init__(self, ops: list[Op], dims: dict, dtype_bytes: int, device: dict, scenario: str, scen: dict,
                 par: Parallel, parallel_style, kind_counts: list[int] | None = None):
        # a part the runtime runs on other paths only (the MoE comm class picked by token count) is not this step's
        ops = [o for o in ops if scenario in (o.attrs.get("runs_on") or (scenario,))]
        self.ops, self.d, self.b, self.device = ops, dims, dtype_bytes, device
        self.scen, self.par, self.parallel_style = scen, par, parallel_style
        self.mode = scen.get("mode", "eager")
        self.launch = self.mode  # what a launch costs: the mode's, or `queued` (_launch_mode)
        self.n = float(scen["num_tokens"])
        self.rows: dict[str, float] = {}
        self.width: dict[str, float] = {}
        self.root: dict[str, str] = {}  # a view's output -> the value it views
        self.producer: dict[str, Op] = {}
        self.children: dict[str, list[Op]] = {}  # a container op -> the ops after it that carry its cost
        self._readers: dict[str, list[Op]] | None = None
        self._next: dict[str, list[Op]] | None = None
        self._comm_impl: str | None = None  # the class of the MoE experts part last walked (its communication)
        self._shared = any(o.attrs.get("role") == "shared_expert" and counted(o) for o in ops)
        self.step = Step(scenario, self.mode, num_layers=int(dims.get("num_layers") or 1))
        if kind_counts and len(kind_counts) > 1:
            self.step.kind_counts = list(kind_counts)
            self.step.num_layers = sum(kind_counts)
        self._run()

    # -- dimensions -------------------------------------------------------------------------------------------
    def readers_of(self, value: str) -> list[Op]:
        """The ops that take the value, or a view of it, as an input (an index built once per step model)."""
        if self._readers is None:
            self._readers = {}
            for r in self.ops:
                for v in dict.fromkeys([*r.inputs, *(self.root.get(x, x) for x in r.inputs)]):
                    self._readers.setdefault(v, []).append(r)
        return self._readers.get(value, [])

    def next_readers(self, value: str) -> list[Op]:
        """The ops of the next layer that read `value`, a layer output carried round the layer loop (the layer
        is walked once: its ops that read a prologue value read, from the second layer on, what the layer before
        left for the epilogue; ir/ops.py `loop_carried`, the matcher's back edges). Alternatives of each other
        and of the epilogue's readers: one of them reads the value after a given layer."""
        if self._next is None:
            self._next = {}
            for w, outs in loop_carried([o for o in self.ops if o.steady]).items():
                layer = [r for r in self.readers_of(w) if r.section == "layer" and not r.entry]
                for u in outs:
                    for key in dict.fromkeys((u, self.root.get(u, u))):
                        self._next.setdefault(key, []).extend(layer)
        return self._next.get(value, [])

    def _dim(self, name: str) -> float | None:
        v = self.d.get(name)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

    def _per_rank(self, total: float | None) -> float | None:
        return None if total is None else total / self.par.tp

    def _kv_heads(self) -> float | None:
        nkv = self._dim("num_kv_heads")
        return None if nkv is None else max(1.0, nkv / self.par.tp)  # replicated when tp > num_kv_heads

    # -- dataflow ---------------------------------------------------------------------------------------------
    def _in(self, op: Op, i: int = 0) -> str | None:
        tensors = [v for v in op.inputs if self.width.get(v)]
        return tensors[i] if i < len(tensors) else None

    def _set(self, value: str, rows: float, width: float | None) -> None:
        self.rows[value] = rows
        if width:
            self.width[value] = width

    def _run(self) -> None:
        h = self._dim("hidden_size")
        for op in self.ops:
            for v in op.inputs:  # a value no op made: the layer's or model's input, a token-wide hidden state
                if v not in self.rows and v not in self.producer:
                    base = v.split("#")[0]
                    if base in ("hidden_states", "x", "inputs_embeds", "residual") and h:
                        self._set(v, self.n, h)
                    elif base in ("input_ids", "positions"):
                        self._set(v, self.n, 1)
            if op.kind == "moe_experts":
                self._comm_impl = op.layer_class
            cost = self._cost(op)
            gone = op.attrs.get("unavailable")
            if gone and cost.why != "container":  # (its shapes still flow on)
                cost = OpCost(known=False, launches=0, fails=True,
                              why="calls " + ", ".join(gone) + ", which the backend's install does not have")
            for v in op.outputs:
                self.producer[v] = op
            self.step.costs[op.id] = cost
        self._alias_containers()
        self._sum()

    def _alias_containers(self) -> None:
        """A container's output is the value its last part (or step) writes: the walk chains them, each reading
        the one before (walk/composites.py), so a MoE layer's output is its join's, its experts' their combine's,
        the same tensor as a view's output is the value it views. Innermost first; a layer's native forward
        (outputs of several of its ops) is left as it is."""
        for op in reversed(self.ops):
            kids = self.children.get(op.id)
            if not kids or len(op.outputs) != 1 or op.attrs.get("native_ops"):
                continue
            key = "part" if op.attrs.get("expanded") else "step"
            chain = [k for k in kids if k.attrs.get(key) and k.outputs]
            if not chain:
                continue
            (v,), last = op.outputs, chain[-1].outputs[0]
            target = self.root.get(last, last)
            self.root[v] = target
            for w, r in self.root.items():  # the views of the container's output view its last part's
                if r == v:
                    self.root[w] = target

    def _launch_mode(self) -> str:
        """`queued` for an eager step whose device work (its kernels' times at the device's cost per kernel)
        outlasts the host's dispatch of them (the profile's eager launch each): the host runs ahead, and a launch
        costs the device's time, hidden behind the work before it (a prefill's GEMMs). Else the step's mode."""
        if self.mode != "eager":
            return self.mode
        host, dev = {}, {}
        for op in self.ops:
            c = self.step.costs[op.id]
            if not counted(op) or not c.known:
                continue
            sec = op.section if op.section in ("prologue", "epilogue") else "layer"
            host[sec] = host.get(sec, 0.0) + c.launches * launch_us(self.device, "eager")
            dev[sec] = dev.get(sec, 0.0) + c.time_us(self.device, "queued")

        def step(d: dict) -> float:
            return d.get("prologue", 0.0) + d.get("layer", 0.0) * self.step.num_layers + d.get("epilogue", 0.0)

        return "queued" if step(dev) >= step(host) > 0 else self.mode

    def _sum(self) -> None:
        self.launch = self.step.launch = self._launch_mode()
        per = {"prologue": 0.0, "layer": 0.0, "epilogue": 0.0}
        for op in self.ops:
            if not counted(op):
                continue
            self.step.counted.add(op.id)
            c = self.step.costs[op.id]
            if not c.known:
                if c.fails:
                    self.step.fails.append(op.id)
                elif c.why != "container":
                    self.step.unknown.append(op.id)
                continue
            per[op.section if op.section in per else "layer"] += c.time_us(self.device, self.launch)
        self.step.layer_us = per["layer"]
        layers = self.step.num_layers
        if self.step.kind_counts:  # each kind of layer its own time, times its count
            kinds = [0.0] * len(self.step.kind_counts)
            for op in self.ops:
                if op.section != "layer" or op.id not in self.step.counted or not self.step.costs[op.id].known:
                    continue
                us = self.step.costs[op.id].time_us(self.device, self.launch)
                k = op.attrs.get("layer_kind")
                for j in range(len(kinds)) if k is None or k >= len(kinds) else (k,):
                    kinds[j] += us
            self.step.kind_us = kinds
            in_layers = sum(n * us for n, us in zip(self.step.kind_counts, kinds))
            self.step.layer_us = in_layers / layers
            self.step.moe_layers = sum(n for k, n in enumerate(self.step.kind_counts) if any(
                is_moe_op(o) and o.attrs.get("layer_kind") == k and o.id in self.step.counted for o in self.ops))
            self.step.total_us = per["prologue"] + in_layers + per["epilogue"]
            return
        # a MoE model whose first `first_k_dense_replace` layers run a dense MLP (DeepSeek, GLM-4.x): the walked
        # layer is the MoE one; the dense layers run the MLP in place of its MoE ops
        k = int(self._dim("first_k_dense_replace") or 0)
        moe = [o for o in self.ops if o.section == "layer" and o.id in self.step.counted and is_moe_op(o)]
        if k and moe and k < layers:
            moe_us = sum(self.step.costs[o.id].time_us(self.device, self.launch) for o in moe)
            self.step.moe_layers = layers - k
            dense = self.step.layer_us - moe_us + self._dense_mlp_us()
            self.step.total_us = per["prologue"] + per["layer"] * (layers - k) + dense * k + per["epilogue"]
        else:
            self.step.moe_layers = layers
            self.step.total_us = per["prologue"] + per["layer"] * layers + per["epilogue"]

    def _dense_mlp_us(self) -> float:
        """A dense layer's MLP: the merged gate/up GEMM, SwiGLU, the down GEMM (and its all-reduce under TP)."""
        h, inter = self._dim("hidden_size"), self._dim("intermediate_size")
        if not h or not inter:
            return 0.0
        n, b, i = self.n, self.b, inter / self.par.tp
        ops = [OpCost(n, (h * 2 * i + n * (h + 2 * i)) * b, 2 * n * h * 2 * i), OpCost(n, n * 3 * i * b, n * 8 * i),
               OpCost(n, (i * h + n * (i + h)) * b, 2 * n * i * h)]
        if self.par.tp > 1:
            ops.append(OpCost(n, 0, 0, 2 * (self.par.tp - 1) / self.par.tp * n * h * b))
        return sum(c.time_us(self.device, self.launch) for c in ops)

    # -- one op -----------------------------------------------------------------------------------------------
    def _cost(self, op: Op) -> OpCost:
        kind, a = op.kind, op.attrs
        native_layer = a.get("native_ops") and not a.get("native_of")  # its native ops follow (they carry the count too)
        if a.get("expanded") or native_layer or (kind == "moe_experts" and self._has_steps(op)):
            self._pass_through(op, alias=False)  # its parts / steps / native ops follow it and carry the cost
            self.children[op.id] = self._following(op)
            return OpCost(known=False, launches=0, why="container")
        if kind in VIEWS:
            self._pass_through(op)
            return OpCost(bytes=0, launches=0)
        if kind == "matmul":
            return self._matmul(op)
        if kind in NORMS:
            return self._same_width(op, (4 if kind.startswith("add_") else 2) * self.b, 4)
        if kind in GATED:
            x = self._in(op)
            if x is None:
                return self._unknown(op, "input width unknown")
            w = self.width[x]
            rows = self.rows.get(x, self.n)
            for v in op.outputs:
                self._set(v, rows, w / 2)
            return OpCost(rows, rows * (w + w / 2) * self.b, rows * w * 4)
        if kind == "cast" and op.attrs.get("dtype"):  # writes its output in the dtype it casts to
            return self._same_width(op, self.b + _dtype_bytes(op.attrs.get("dtype"), self.b), 1)
        if kind in ELEMENTWISE:
            return self._elementwise(op)
        if kind in QUANT:  # reads the activations, writes one byte each and a scale per row
            return self._same_width(op, self.b + 1, 2, per_row=4)
        if kind == "topk":
            x = self._in(op)
            k = self._dim("top_k")
            if x is None or k is None:
                return self._unknown(op, "top-k sizes unknown")
            rows = self.rows.get(x, self.n)
            for v in op.outputs:
                self._set(v, rows, k)
            return OpCost(rows, rows * (self.width[x] * 4 + k * 8), rows * self.width[x] * 2)
        if kind == "rope":
            ins = [v for v in op.inputs if self.width.get(v) and v.split("#")[0] not in ("positions",)]
            if not ins:
                return self._unknown(op, "q/k widths unknown")
            for src, out in zip(ins, op.outputs):
                self._set(out, self.rows.get(src, self.n), self.width[src])
            w = sum(self.width[v] for v in ins)
            hd = self._dim("head_dim") or 128
            # each token's cos / sin row read at its position
            return OpCost(self.n, self.n * (2 * w + hd) * self.b, self.n * w * 3, dependent=1)
        if kind == "gather":  # index_select of rows: one row per index (a token's position), read and written
            return self._gather(op)
        if kind == "attention":
            return self._attention(op)
        if kind == "mla_attention":
            return self._mla(op)
        if kind in COLLECTIVES:
            return self._collective(op, COLLECTIVES[kind])
        if kind == "embedding":
            h = self._dim("hidden_size")
            if h is None:
                return self._unknown(op, "hidden_size unknown")
            for v in op.outputs:
                self._set(v, self.n, h)
            return OpCost(self.n, self.n * h * self.b * 2, 0, dependent=1)  # each token's row at its id
        if kind in ("logits", "lm_head"):
            h, vocab = self._dim("hidden_size"), self._dim("vocab_size")
            if not h or not vocab:
                return self._unknown(op, "vocab_size unknown")
            rows = float(self.scen.get("batch", self.n))  # logits of the last token of each sequence
            v = vocab / self.par.tp
            return OpCost(rows, (h * v + rows * (h + v)) * self.b, 2 * rows * h * v)
        if kind in MOE_KINDS:
            return self._moe(op)
        return self._unknown(op, f"no cost rule for `{kind}`")

    def _following(self, op: Op) -> list[Op]:
        """The ops after a container that are its: its parts (and a shared expert's ops) and their steps, or
        its native ops."""
        i = self.ops.index(op)
        native = bool(op.attrs.get("native_ops"))
        out = []
        for o in self.ops[i + 1:]:
            a = o.attrs
            if native and a.get("native_of") or not native and (a.get("step") or (a.get("part") and op.kind == "moe")
                                                                or (a.get("role") == "shared_expert" and op.kind == "moe")):
                out.append(o)
            elif o.kind not in VIEWS:
                break
        return out

    def _has_steps(self, op: Op) -> bool:
        i = self.ops.index(op)
        return any(o.attrs.get("step") for o in self.ops[i + 1:i + 8])

    def _unknown(self, op: Op, why: str) -> OpCost:
        return OpCost(known=False, why=why)

    def _pass_through(self, op: Op, alias: bool = True) -> None:
        """The op's outputs take its input's shape; `alias`: they are its input (a view), not a container's
        result (`_alias_containers`)."""
        src = self._in(op)
        if src is None:
            return
        for v in op.outputs:
            if alias:
                self.root[v] = self.root.get(src, src)
            self._set(v, self.rows.get(src, self.n), self.width[src] / (len(op.outputs) if op.kind == "split" and
                                                                     not self._qkv(src) else 1))
        if op.kind == "split" and self._qkv(src) and len(op.outputs) == 3:
            hd, nh, nkv = self._dim("head_dim"), self._dim("num_heads"), self._kv_heads()
            if hd and nh and nkv:
                for v, w in zip(op.outputs, (nh / self.par.tp * hd, nkv * hd, nkv * hd)):
                    self.width[v] = w

    def _qkv(self, value: str) -> bool:
        p = self.producer.get(value)
        return p is not None and p.attrs.get("merged") == "qkv"

    def _same_width(self, op: Op, bytes_per: float, flops_per: int, per_row: float = 0) -> OpCost:
        """An op whose outputs are as wide as its input: `bytes_per` bytes moved per element, `per_row` more per row."""
        x = self._in(op)
        if x is None:
            return self._unknown(op, "input width unknown")
        w, rows = self.width[x], self.rows.get(x, self.n)
        for v in op.outputs:
            self._set(v, rows, w)
        return OpCost(rows, rows * (w * bytes_per + per_row), rows * w * flops_per)

    def _gather(self, op: Op) -> OpCost:
        src = op.inputs[0] if op.inputs else None
        w = self.width.get(src) if src else None
        if not w and src and src.split("#")[0] == "cos_sin_cache":  # the rotary layer's [max_position, rotary_dim]
            w = self._dim("head_dim")  # rotary_dim <= head_dim: at most
        if not w:
            return self._unknown(op, "gathered row width unknown")
        rows = self.n  # the index: one row per token
        for v in op.outputs:
            self._set(v, rows, w)
        return OpCost(rows, (2 * rows * w) * self.b + rows * 8, 0, dependent=1)

    def _elementwise(self, op: Op) -> OpCost:
        ins = [v for v in op.inputs if self.width.get(v)]
        if not ins:
            return self._unknown(op, "input widths unknown")
        w = max(self.width[v] for v in ins)
        rows = max(self.rows.get(v, self.n) for v in ins)
        for v in op.outputs:
            self._set(v, rows, w)
        reads = sum(self.width[v] * self.rows.get(v, rows) for v in ins)
        return OpCost(rows, (reads + rows * w) * self.b, rows * w)

    def _matmul(self, op: Op) -> OpCost:
        vals = op.attrs.get("values") or {}
        x = self._in(op)
        rows = self.rows.get(x, self.n) if x else self.n
        style = self.parallel_style(op)
        h, nh, hd, nkv = self._dim("hidden_size"), self._dim("num_heads"), self._dim("head_dim"), self._kv_heads()
        k = self.width.get(x) if x else None
        n_out: float | None = None
        merged, role = op.attrs.get("merged"), op.attrs.get("role")
        if isinstance(vals.get("output_size"), (int, float)):
            n_out = float(vals["output_size"])
            if style == "column":
                n_out /= self.par.tp
        elif merged == "qkv" and nh and hd and nkv:
            n_out = nh / self.par.tp * hd + 2 * nkv * hd
        elif merged == "gate_up":
            inter = self._shared_inter() if role == "shared_expert" else self._dim("intermediate_size")
            n_out = None if inter is None else 2 * inter / (self.par.tp if style == "column" else 1)
        elif role == "router":
            n_out = self._dim("num_experts")
        elif style == "row" and h:
            n_out = h
        if k is None and isinstance(vals.get("input_size"), (int, float)):
            k = float(vals["input_size"]) / (self.par.tp if style == "row" else 1)
        if k is None and h and style != "row":
            k = h
        if not k or not n_out:
            return self._unknown(op, "weight shape unknown")
        first = next((v for v in op.outputs if not v.startswith("_#")), None)
        for v in op.outputs:
            if v == first:
                self._set(v, rows, n_out)
        # weights the code builds in another dtype than the model's (an fp32 router): its input is cast to it
        # and its output is in it too
        b = _dtype_bytes(op.attrs.get("params_dtype"), self.b)
        return OpCost(rows, (k * n_out + rows * (k + n_out)) * b, 2 * rows * k * n_out)

    def _shared_inter(self) -> float | None:
        s = self._dim("shared_expert_intermediate_size")
        if s:
            return s
        moe, n = self._dim("moe_intermediate_size"), self._dim("n_shared_experts")
        return moe * n if moe and n else None

    def _attention(self, op: Op) -> OpCost:
        nh, hd, nkv = self._dim("num_heads"), self._dim("head_dim"), self._kv_heads()
        if not (nh and hd and nkv):
            return self._unknown(op, "head sizes unknown")
        heads = nh / self.par.tp
        batch, q_len, kv_len = (float(self.scen[k]) for k in ("batch", "q_len", "kv_len"))
        for v in op.outputs:
            self._set(v, self.n, heads * hd)
        qo = self.n * 2 * heads * hd * self.b
        kv_write = self.n * 2 * nkv * hd * self.b * 2  # the step's keys and values: read, written into the cache
        causal = 0.5 if q_len > 1 else 1.0
        kv_read = batch * kv_len * 2 * nkv * hd * self.b if q_len == 1 else self.n * 2 * nkv * hd * self.b
        flops = 4 * batch * q_len * kv_len * causal * heads * hd
        # the keys and values written at each token's slot; the cache read through the block table
        parts = {"kv_write": OpCost(self.n, kv_write, 0, dependent=1),
                 "core": OpCost(self.n, qo + kv_read, flops, dependent=1)}
        return OpCost(self.n, qo + kv_write + kv_read, flops, launches=2, dependent=2, parts=parts)

    def _mla(self, op: Op) -> OpCost:
        """The attention core of multi-head latent attention (its projections are ops of their own)."""
        nh, rank, rope = self._dim("num_heads"), self._dim("kv_lora_rank"), self._dim("qk_rope_head_dim")
        if not (nh and rank and rope):
            return self._unknown(op, "MLA sizes (kv_lora_rank, qk_rope_head_dim) unknown")
        heads = nh / self.par.tp
        batch, q_len, kv_len = (float(self.scen[k]) for k in ("batch", "q_len", "kv_len"))
        for v in op.outputs:
            self._set(v, self.n, self._dim("hidden_size"))
        latent = rank + rope
        causal = 0.5 if q_len > 1 else 1.0
        flops = 2 * batch * q_len * kv_len * causal * heads * (latent + rank)
        kv = (batch * kv_len if q_len == 1 else self.n) * latent * self.b
        return OpCost(self.n, kv + self.n * heads * (latent + rank) * self.b + self.n * latent * self.b * 2, flops,
                      launches=2, dependent=2)

    def _collective(self, op: Op, factor: float) -> OpCost:
        x = self._in(op)
        w = self.width.get(x) if x else self._dim("hidden_size")
        rows = self.rows.get(x, self.n) if x else self.n
        tp = self.par.tp
        for v in op.outputs:
            self._set(v, rows, w)
        if tp == 1:
            return OpCost(rows, 0, 0, 0, launches=0)  # `if tp_size > 1`: not run on one rank
        if not w:
            return self._unknown(op, "width unknown")
        return OpCost(rows, 0, 0, factor * (tp - 1) / tp * rows * w * self.b)

    # -- MoE --------------------------------------------------------------------------------------------------
    def _moe(self, op: Op) -> OpCost:
        h, e, k = self._dim("hidden_size"), self._dim("num_experts"), self._dim("top_k")
        inter = self._dim("moe_intermediate_size")
        if not (h and e and k and inter):
            return self._unknown(op, "MoE sizes (num_experts, num_experts_per_tok, moe_intermediate_size) unknown")
        ep, tp = self.par.ep, self.par.tp
        i_rank = inter / (tp if ep == 1 else 1)  # without EP the experts' intermediate dimension is split by TP
        pairs = self.n * k / ep  # token-expert pairs one rank computes
        local = e / ep
        # experts one rank reads the weights of: each of its experts is hit by one of the step's pairs or not
        hit = local * (1 - (1 - 1 / e) ** (self.n * k))
        kind, step = op.kind, op.attrs.get("step")
        # what the experts' communication moves, by the method the walk found (the experts part's class): an
        # all-to-all (MC2, AllToAll) sends each rank's token-expert pairs to the ranks holding those experts, at
        # dispatch and back at combine; the all-gather method (vllm-ascend's choice on A2 below 16 ranks) has
        # every token on every rank of the group already and all-reduces the experts' outputs at combine
        group = max(tp, ep)
        alltoall = ep > 1 and any(w in (self._comm_impl or "") for w in ("MC2", "AllToAll", "Alltoall", "A2A"))
        dispatch_comm = (ep - 1) / ep * self.n * k * h * self.b if alltoall else 0.0
        combine_comm = dispatch_comm if alltoall else (2 * (group - 1) / group * self.n * h * self.b if group > 1 else 0.0)
        outs = op.outputs
        if kind == "moe_gating":
            for v in outs:
                self._set(v, self.n, k)
            return OpCost(self.n, self.n * (e * 4 + k * 8), self.n * e * 4)
        if kind == "moe_dispatch" or step == "dispatch":
            for v in outs:
                self._set(v, pairs, h)
            return OpCost(pairs, (self.n * h + pairs * h) * self.b, 0, dispatch_comm, dependent=1)  # rows by expert
        if step == "gemm1" or (kind == "expert_gemm" and step != "gemm2" and "1" in (step or "1")):
            for v in outs:
                self._set(v, pairs, 2 * i_rank)
            return OpCost(pairs, (hit * h * 2 * i_rank + pairs * (h + 2 * i_rank)) * self.b,
                          2 * pairs * h * 2 * i_rank)
        if kind == "expert_act" or step == "act":
            for v in outs:
                self._set(v, pairs, i_rank)
            return OpCost(pairs, pairs * 3 * i_rank * self.b, pairs * 2 * i_rank * 4)
        if step == "gemm2" or kind == "expert_gemm":
            for v in outs:
                self._set(v, pairs, h)
            return OpCost(pairs, (hit * i_rank * h + pairs * (i_rank + h)) * self.b, 2 * pairs * i_rank * h)
        if kind == "moe_combine" or step == "combine":
            for v in outs:
                self._set(v, self.n, h)
            return OpCost(self.n, (pairs * h + self.n * h) * self.b, pairs * h, combine_comm, dependent=1)
        if kind == "moe_join":
            for v in outs:
                self._set(v, self.n, h)
            if not self._shared:  # the shared experts' output joined to the routed one: no shared expert, no join
                return OpCost(self.n, 0, 0, launches=0)
            return OpCost(self.n, 3 * self.n * h * self.b, self.n * h)
        # a MoE layer (or its experts) walked as one op: dispatch, the two grouped GEMMs, the activation, combine
        for v in outs:
            self._set(v, self.n, h)
        weights = hit * 3 * h * i_rank
        acts = pairs * (2 * h + 3 * i_rank + 2 * i_rank) + 2 * self.n * h
        return OpCost(self.n, (weights + acts) * self.b, 2 * pairs * 3 * h * i_rank, dispatch_comm + combine_comm,
                      launches=5, dependent=2)


def _dtype_bytes(dtype: str | None, default: float) -> float:
    """Bytes per element of `torch.<dtype>`; `default` (the model's) where it is not given or not known."""
    return DTYPE_BYTES.get((dtype or "").removeprefix("torch."), default)


MOE_KINDS = {"moe", "moe_experts", "moe_gating", "moe_dispatch", "expert_gemm", "expert_act", "moe_combine",
             "moe_join"}


def is_moe_op(op: Op) -> bool:
    """An op of a MoE layer (its router, experts and their steps, shared expert, join)."""
    a = op.attrs
    return op.kind in MOE_KINDS or a.get("role") in ("router", "shared_expert") or bool(a.get("part") or a.get("step"))


def counted(op: Op) -> bool:
    """An op the step adds: on the walked path (steady), on the first side of each test the walk could not
    decide (the other side's ops are an alternative to them, not more work)."""
    return op.steady and not op.attrs.get("other_branch") and all(side == 0 for _test, side in op.branches)


# -- fusions ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Saving:
    before_us: float  # the time of the ops
    after_us: float  # the time of the one op that replaces them
    bytes: float  # HBM bytes it stops moving
    launches: int  # kernel launches it removes

    @property
    def us(self) -> float:
        return self.before_us - self.after_us


def fused_saving(model: StepModel, ops: list[Op], parts: dict | None = None, overlap: bool = False) -> Saving | None:
    """What replacing the ops by one kernel saves; None when an op's cost is not known. `parts`: op id -> the
    kernel of that op the fused one replaces (an attention layer's KV-cache write), the rest of it stays; `overlap`:
    a communication fusion, whose transfer overlaps its compute."""
    found = _fusion_parts(model, ops, parts)
    if found is None:
        return None
    pairs, removed = found
    device, mode = model.device, model.launch
    before = sum(c.time_us(device, mode) for _o, c in pairs)
    # each op keeps its own time, less the traffic it no longer does (no overlap between the ops' work is
    # assumed), in one launch; a communication's transfer overlaps the compute it is fused with
    work = sum(_time(max(c.bytes - removed[o.id], 0.0), c.flops, 0.0, 0, device, mode, overlap=False,
                     dependent=c.dependent) for o, c in pairs)
    comm = sum(c.comm for _o, c in pairs)
    link = comm / (device["link_gb_s"] * 1e3) if comm and device.get("link_gb_s") else 0.0
    # a communication fusion overlaps its transfer with the compute it is fused with; any other fusion still
    # waits for the transfer
    after = min((max(work, link) if overlap else work + link) + launch_us(device, mode), before)
    saved = sum(min(removed[o.id], c.bytes) for o, c in pairs)
    return Saving(before, after, saved, max(sum(c.launches for _o, c in pairs) - 1, 0))


def crossing_kind(ops) -> int | None:
    """The kind of layer whose output a match of two kinds' ops reads across the layer boundary (the first
    layer's down_proj all-reduce feeding the second layer's input norm: the producer's value is what the loop
    carries, Op.carried): the match runs once per layer of that kind. None for any other mix of kinds."""
    kinds = {o.attrs.get("layer_kind") for o in ops}
    producers = {o.attrs.get("layer_kind") for o in ops if o.carried}
    if None in kinds or len(kinds) != 2 or len(producers) != 1:
        return None
    (kind,) = producers
    return kind


def native_span(model: StepModel, ops: list[Op]) -> list[Op]:
    """The ops a fused kernel takes the place of: a match all of whose ops are the forward_native of one layer
    (walk/frame.py `nest_native`) is served by a kernel for that forward (it replaces the layer's method, the
    native_rope family), so the estimate counts every op the forward surely runs, as the walk counts them
    (`native_ops`: steady, on no undecided branch, casts aside); any other match is its own ops."""
    layers = {o.attrs.get("native_of") for o in ops}
    if len(layers) != 1 or None in layers:
        return ops
    (layer,) = layers
    kinds = {o.attrs.get("layer_kind") for o in ops}  # the forward of that layer in the match's kind of layer
    span = [o for o in model.ops if o.attrs.get("native_of") == layer and o.steady and not o.attrs.get("other_branch")
            and not o.condition and o.kind != "cast" and o.attrs.get("layer_kind") in kinds]
    return span if {o.id for o in ops} <= {o.id for o in span} else ops


def fused_terms(model: StepModel, ops: list[Op], parts: dict | None = None) -> list[dict] | None:
    """What fused_saving's before and after are made of, op by op (one match): the kernels it replaces with their
    bytes, FLOPs, transfer bytes, launches and dependent accesses, and the bytes each still moves once fused. Any
    device profile recomputes the estimate from them (a generated benchmark's --device-profile): before = sum of
    the ops' times, after = sum of their times at the fused bytes with no launch (their dependent accesses kept:
    the fused kernel still loads each index before its row), plus one launch."""
    found = _fusion_parts(model, ops, parts)
    if found is None:
        return None
    pairs, removed = found
    parts = parts or {}
    return [{"op": o.id, "kind": o.kind, "part": parts.get(o.id) if isinstance(parts.get(o.id), str) else None,
             "bytes": int(c.bytes), "flops": int(c.flops), "link_bytes": int(c.comm), "launches": c.launches,
             "dependent": c.dependent, "fused_bytes": int(max(c.bytes - removed[o.id], 0.0))} for o, c in pairs]


def _fusion_parts(model: StepModel, ops: list[Op], parts: dict | None):
    """The (op, cost) pairs of a fusion and the bytes each stops moving; None when an op's cost is not known."""
    parts = parts or {}
    ops = expand(model, ops, parts)
    costs = [c.part(p) if isinstance(p := parts.get(o.id), str) and (c := model.step.costs.get(o.id)) is not None
             else model.step.costs.get(o.id) for o in ops]
    if any(c is None or (not c.known and c.why != "container") for c in costs):
        return None
    pairs = [(o, c) for o, c in zip(ops, costs) if c is not None and c.known]
    runs = {o.id for o, c in pairs if c.launches}
    removed = {o.id: 0.0 for o, _c in pairs}
    for o, _c in pairs:  # intermediates the fused op keeps on chip: not written, not read back by its other ops
        if o.id not in runs:
            continue
        for v in o.outputs:
            readers = [r for r in model.readers_of(v) if r.id != o.id]
            carried = [r for r in model.next_readers(v) if r.id in runs and r.id != o.id]
            if carried:  # the next layer's reader is fused with it: the epilogue reads the last layer's instead
                readers = [r for r in readers if r.section != "epilogue"] + carried
            # a reader of which the fusion takes one kernel (an attention layer's KV-cache write) reads only the
            # inputs after its first there (k and v, not q: the attention kernel, outside, still reads q)
            inside = [r for r in readers if r.id in runs
                      and not (isinstance(parts.get(r.id), str) and _reads(model, r, v, first=True))]
            if not inside:
                continue
            size = model.rows.get(v, model.n) * model.width.get(v, 0) * model.b
            for r in inside:
                removed[r.id] += size
            if all(r in inside or not counted(r) or r.kind in VIEWS for r in readers):
                removed[o.id] += size  # its write, when nothing outside reads it
    io = _native_io_bytes(model, [o for o, _c in pairs])
    total = sum(c.bytes for _o, c in pairs)
    if io is not None and 0 < io < total:
        # a layer's forward as one kernel reads its inputs once and writes what is read outside it once; each op
        # keeps its share of that traffic
        removed = {o.id: c.bytes * (1 - io / total) for o, c in pairs}
    return pairs, removed


def _native_io_bytes(model: StepModel, span: list[Op]) -> float | None:
    """The HBM traffic of a layer's forward_native run as one kernel (cost.native_span): each input from outside
    the layer read once (a gather's rows as many as it takes), each value read outside the layer written once.
    None when the ops are not one layer's native forward."""
    layers = {o.attrs.get("native_of") for o in span}
    if len(layers) != 1 or None in layers:
        return None
    (layer,) = layers
    inside = [o for o in model.ops if o.attrs.get("native_of") == layer]
    ids = {o.id for o in inside}
    made = {v for o in inside for v in o.outputs}

    def size(v: str) -> float:
        return model.rows.get(v, model.n) * model.width.get(v, 0.0) * model.b

    total, read = 0.0, set()
    for o in span:
        if o.kind == "gather":  # the rows it takes, not the table
            total += sum(size(v) for v in o.outputs)
            continue
        for v in o.inputs:
            r = model.root.get(v, v)
            if v in made or r in made or r in read:
                continue
            read.add(r)
            total += size(r) or size(v)
    for o in inside:
        for v in o.outputs:
            if o.kind not in VIEWS and any(r.id not in ids for r in model.readers_of(v)):
                total += size(v)
    return total


def expand(model: StepModel, ops: list[Op], parts: dict) -> list[Op]:
    """A container op (a MoE layer, its experts, a layer running its native ops) stands for the ops that carry its
    cost, each op once however the containers nest; `parts[op id]`, a list, keeps those whose step, part or kind
    it names (the experts' gemm1 and act)."""
    out: list[Op] = []
    seen: set[str] = set()

    def add(o: Op, names: list | None, inner: bool) -> None:
        if o.id in seen:
            return
        seen.add(o.id)
        kids = model.children.get(o.id)
        if kids is None:  # a container's op is kept when it is one `names` asks for
            if not inner or names is None or {o.attrs.get("step"), o.attrs.get("part"), o.kind} & set(names):
                out.append(o)
            return
        for k in kids:
            add(k, names, True)

    for o in ops:
        names = parts.get(o.id)
        add(o, names if isinstance(names, list) else None, False)
    return out


def _reads(model: StepModel, reader: Op, value: str, first: bool = False) -> bool:
    """The reader takes the value (or a view of it) as an input; `first`: as its first input."""
    ins = reader.inputs[:1] if first else reader.inputs
    return value in ins or value in {model.root.get(v, v) for v in ins}
