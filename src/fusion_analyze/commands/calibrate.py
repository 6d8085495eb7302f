"""`fusion-analyze calibrate`: measure the device profile of the accelerator this runs on, as a file of the shape
of patterns/catalog/devices.yaml (for `--device-profile FILE`).

On the device (torch_npu's NPU, else CUDA), with warm-up, device events and the median of repeats: HBM bandwidth
(a device-to-device copy, bytes read + written), the bf16 matrix rate, the cost of one tiny kernel launched
eagerly, launched eagerly with the host ahead of the device and replayed from a captured graph, what an access
whose address is loaded first adds to a kernel, and two fusions the reports propose, each a Triton kernel checked
against its eager PyTorch reference before both are timed. PyTorch and Triton are imported here only: neither is
a dependency of the analysis. docs/calibration.md says how to read the numbers.
"""

from __future__ import annotations

import datetime
import importlib
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError

NO_ACCELERATOR = "calibrate needs PyTorch with an accelerator: torch_npu on Ascend or CUDA"
EPS = 1e-6
SETS = 8  # input sets a timed loop goes round (the prefill's, 8 x 16 MiB and more, do not fit in an L2)
CALLS = 32  # calls of a scenario per timed loop (a graph captures the whole loop)
tl: Any = None  # triton.language once the kernels are built: the kernels' code reads it as a global


@dataclass(frozen=True)
class Sizes:
    copy_mib: int
    matmul: int  # n of the n x n x n bf16 product
    launch_ops: int  # tiny ops per timed loop
    repeats: int
    tokens: tuple[int, int]  # prefill, decode
    hidden: int  # Qwen3-0.6B: 1024
    intermediate: int  # Qwen3-0.6B: 3072


FULL = Sizes(1024, 8192, 1000, 30, (4096, 32), 1024, 3072)
QUICK = Sizes(256, 4096, 200, 7, (4096, 32), 1024, 3072)
TINY = Sizes(4, 128, 50, 3, (16, 2), 64, 96)  # --cpu: checks the code path, measures nothing of worth


@dataclass
class Accelerator:
    """The device calibrate times, with its timer and graph capture (none on the CPU)."""

    torch: Any
    kind: str  # npu, cuda or cpu
    name: str
    software: str  # torch 2.x, CUDA 12.x / torch_npu 2.x
    count: int = 1  # devices of this kind on the machine

    @property
    def dtype(self) -> Any:  # the CPU runs float32: Triton's interpreter does not compute bfloat16
        return self.torch.float32 if self.kind == "cpu" else self.torch.bfloat16

    def _mod(self) -> Any:
        return getattr(self.torch, self.kind)

    def sync(self) -> None:
        if self.kind != "cpu":
            self._mod().synchronize()

    def once_us(self, fn: Callable[[], Any]) -> float:
        if self.kind == "cpu":
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e6
        begin, end = self._mod().Event(enable_timing=True), self._mod().Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e3

    def median_us(self, fn: Callable[[], Any], repeats: int, warmup: int = 3) -> float:
        for _ in range(warmup):
            fn()
        self.sync()
        return statistics.median(self.once_us(fn) for _ in range(repeats))

    def capture(self, fn: Callable[[], Any]) -> Callable[[], Any] | None:
        """`fn` captured once in a graph (CUDAGraph / NPUGraph): its replay; None where there are no graphs."""
        if self.kind == "cpu":
            return None
        mod = self._mod()
        side = mod.Stream()
        side.wait_stream(mod.current_stream())
        with mod.stream(side):  # warm up off the capture, as the graph APIs ask
            fn()
            fn()
        mod.current_stream().wait_stream(side)
        graph = mod.CUDAGraph() if self.kind == "cuda" else mod.NPUGraph()
        with mod.graph(graph):
            fn()
        return graph.replay


@dataclass
class Calibration:
    """What calibrate measured: the numbers, how each was measured, and where."""

    device: str
    software: str
    date: str
    hbm_gb_s: float
    tflops: float
    launch_eager_us: float
    launch_graph_us: float | None
    how: dict[str, str]  # field -> how it was measured
    link: str = "not measured: one device"
    measured: list[dict] = field(default_factory=list)
    launch_queued_us: float | None = None  # eager with the host ahead; None: no device-side wait here
    dependent_access_us: float | None = None  # None: no graphs or no Triton here


def detect(cpu: bool = False) -> Accelerator:
    """torch_npu's NPU when present, else CUDA, else (with --cpu) the CPU; UserError without any."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        raise UserError(NO_ACCELERATOR)
    version = f"torch {torch.__version__}"
    try:
        npu = importlib.import_module("torch_npu")
    except Exception:  # not installed, or installed without a working CANN
        npu = None
    if npu is not None and torch.npu.is_available():
        return Accelerator(torch, "npu", torch.npu.get_device_name(), f"{version}, torch_npu {npu.__version__}",
                           torch.npu.device_count())
    if torch.cuda.is_available():
        runtime = f"CUDA {torch.version.cuda}" if torch.version.cuda else f"HIP {torch.version.hip}"
        return Accelerator(torch, "cuda", torch.cuda.get_device_name(), f"{version}, {runtime}",
                           torch.cuda.device_count())
    if cpu:
        return Accelerator(torch, "cpu", "CPU", version)
    raise UserError(NO_ACCELERATOR)


def measure(acc: Accelerator, sizes: Sizes, say: Callable[[str], None]) -> Calibration:
    acc.torch.manual_seed(0)
    reps, ran = sizes.repeats, f"median of {sizes.repeats} timed runs after warm-up"
    dtype = str(acc.dtype).removeprefix("torch.")
    hbm = _copy_gb_s(acc, sizes.copy_mib << 20, reps)
    say(_said("hbm", hbm=f"{hbm:.0f}", mib=sizes.copy_mib))
    tflops = _matmul_tflops(acc, sizes.matmul, reps)
    say(_said("matmul", tflops=f"{tflops:.1f}", n=sizes.matmul, dtype=dtype))
    eager, graph = _launch_us(acc, sizes.launch_ops, reps)
    say(_said("launch", eager=f"{eager:.2f}", graph=_said("launch_graph", us=f"{graph:.2f}") if graph else _said("no_graphs")))
    queued = _launch_queued_us(acc, sizes.launch_ops, reps)
    dependent = _dependent_us(acc, sizes, reps)
    if queued is not None or dependent is not None:
        say(_said("queued_dependent", queued="-" if queued is None else f"{queued:.2f}",
                  dependent="-" if dependent is None else f"{dependent:.3f}"))
    m = sizes.matmul
    how = {"hbm_gb_s": f"device-to-device copy of {sizes.copy_mib} MiB, (bytes read + written) / {ran}",
           "tflops": f"{m}x{m}x{m} {dtype} matmul on random data, 2n^3 / {ran}",
           "launch_us": f"a loop of {sizes.launch_ops} in-place multiplies of a 1-element tensor, per op, eager "
                        f"and replayed from one captured graph; {ran}"}
    if queued is not None:
        how["launch_us"] += ("; queued: the same loop launched eagerly behind a device-side wait longer than the "
                             "host takes to launch it, timed from the wait's end (the device's time per kernel, the "
                             "host ahead)")
    if dependent is not None:
        n, w = sizes.tokens[1], sizes.hidden
        how["dependent_access_us"] = (f"{n} rows of {w} {dtype} elements gathered at random indices of a "
                                      f"{ROWS_TABLE}-row table, minus a copy of {n} rows, one program a row, each a "
                                      f"loop of {CALLS} calls replayed from one captured graph, per call; {ran}")
    link = "not measured: one device" if acc.count == 1 else f"not measured: calibrate times one of {acc.count} devices"
    if acc.kind == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        say(_said("no_interpreter"))
        measured = []
    else:
        measured = scenarios(acc, sizes, say)
    return Calibration(acc.name, acc.software, datetime.date.today().isoformat(), hbm, tflops, eager, graph, how,
                       link, measured, queued, dependent)


def _copy_gb_s(acc: Accelerator, n: int, repeats: int) -> float:
    src = acc.torch.randint(0, 256, (n,), dtype=acc.torch.uint8, device=acc.kind)
    dst = acc.torch.empty_like(src)
    return 2 * n / acc.median_us(lambda: dst.copy_(src), repeats) / 1e3


def _matmul_tflops(acc: Accelerator, m: int, repeats: int) -> float:
    a, b = (acc.torch.randn(m, m, dtype=acc.dtype, device=acc.kind) for _ in range(2))
    return 2 * m**3 / acc.median_us(lambda: a @ b, repeats) / 1e6


def _launch_us(acc: Accelerator, ops: int, repeats: int) -> tuple[float, float | None]:
    """Per op: (eager, replayed from a graph) of a loop of tiny kernels; None where there are no graphs."""
    one = acc.torch.ones(1, device=acc.kind)

    def tiny_ops() -> None:
        for _ in range(ops):
            one.mul_(1.0)

    replay = acc.capture(tiny_ops)
    return (acc.median_us(tiny_ops, repeats) / ops,
            acc.median_us(replay, repeats) / ops if replay is not None else None)


def _launch_queued_us(acc: Accelerator, ops: int, repeats: int) -> float | None:
    """Per op: the loop of tiny kernels launched eagerly behind a device-side wait (torch.cuda._sleep) longer than
    the host takes to launch it, timed from the wait's end: the device's time per kernel with the host ahead, as
    in a step whose device work outlasts the host's dispatch. None where the device has no such wait."""
    sleep = getattr(acc._mod(), "_sleep", None) if acc.kind != "cpu" else None
    if sleep is None:
        return None
    one = acc.torch.ones(1, device=acc.kind)
    event = acc._mod().Event
    start = time.perf_counter()
    for _ in range(ops):
        one.mul_(1.0)
    host_ms = (time.perf_counter() - start) * 1e3
    sleep(1 << 20)  # the wait's kernel loaded before it is timed (a cold first wait is longer: too short a wait)
    acc.sync()
    cycles_per_ms = (1 << 20) / max(acc.once_us(lambda: sleep(1 << 20)) / 1e3, 1e-3)
    wait = int(cycles_per_ms * (2 * host_ms + 1))

    def queued() -> float:
        begin, end = event(enable_timing=True), event(enable_timing=True)
        sleep(wait)
        begin.record()
        for _ in range(ops):
            one.mul_(1.0)
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e3 / ops

    queued()
    return statistics.median(queued() for _ in range(repeats))


ROWS_TABLE = 4096  # rows of the table a dependent access gathers from (a cos / sin cache of 4096 positions)


def _dependent_us(acc: Accelerator, sizes: Sizes, repeats: int) -> float | None:
    """What loading a row's address first adds to a kernel: `decode` rows gathered at random indices of a table
    against a copy of as many rows (build_rows), each a loop of CALLS calls replayed from one graph, per call;
    never below 0. None where there are no graphs or no Triton (on the CPU, in Triton's interpreter, the kernel is
    checked, not timed)."""
    if acc.kind == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        return None
    try:
        rows = build_rows()
    except ImportError:
        return None
    t, n, w = acc.torch, sizes.tokens[1], sizes.hidden
    table = t.randn(ROWS_TABLE, w, dtype=acc.dtype, device=acc.kind)
    index = t.randperm(ROWS_TABLE, device=acc.kind)[:n].contiguous()
    out = t.empty(n, w, dtype=acc.dtype, device=acc.kind)
    check(rows(table, index, out, True), table[index], "row gather")
    check(rows(table, index, out, False), table[:n], "row copy")
    times = []
    for gather in (True, False):
        replay = acc.capture(lambda gather=gather: [rows(table, index, out, gather) for _ in range(CALLS)])
        if replay is None:
            return None
        times.append(acc.median_us(replay, repeats) / CALLS)
    return max(times[0] - times[1], 0.0)


def build_rows() -> Callable[..., Any]:
    """rows(src, index, out, gather): out[r] = src[index[r]] (gather) or src[r] (copy), one program a row.
    ImportError where Triton is not installed."""
    global tl
    triton = importlib.import_module("triton")
    tl = importlib.import_module("triton.language")

    @triton.jit
    def rows_kernel(src_ptr, idx_ptr, out_ptr, width, GATHER: tl.constexpr,  # pyright: ignore[reportInvalidTypeForm]
                    BLOCK: tl.constexpr):  # pyright: ignore[reportInvalidTypeForm]
        r = tl.program_id(0).to(tl.int64)
        row = r
        if GATHER:
            row = tl.load(idx_ptr + r).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < width
        tl.store(out_ptr + r * width + cols, tl.load(src_ptr + row * width + cols, mask=mask), mask=mask)

    def rows(src: Any, index: Any, out: Any, gather: bool) -> Any:
        n, width = out.shape
        rows_kernel[(n,)](src, index, out, width, GATHER=gather, BLOCK=triton.next_power_of_2(width), num_warps=4)
        return out

    return rows


# -- the fusions, timed: eager PyTorch vs one Triton kernel ----------------------------------------------------
def add_rmsnorm_reference(x: Any, residual: Any, weight: Any, eps: float = EPS) -> tuple[Any, Any]:
    """(normed, sum): `x + residual`, then RMSNorm as eager PyTorch ops (vLLM's forward_native)."""
    total = x + residual
    h = total.float()
    h = h * h.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()
    return (h * weight.float()).to(x.dtype), total


def silu_mul_reference(x: Any, silu: Callable[[Any], Any]) -> Any:
    """`F.silu(x[..., :d]) * x[..., d:]` (silu: torch.nn.functional.silu, looked up once by the caller)."""
    d = x.shape[-1] // 2
    return silu(x[..., :d]) * x[..., d:]


def build_kernels() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(add_rmsnorm(x, residual, weight, out, total), silu_mul(x, out)): Triton kernels writing into out (and the
    sum into total). ImportError where Triton is not installed."""
    global tl
    triton = importlib.import_module("triton")
    tl = importlib.import_module("triton.language")

    @triton.jit
    def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, sum_ptr, n_cols, eps,
                           BLOCK: tl.constexpr):  # pyright: ignore[reportInvalidTypeForm]
        offs = tl.program_id(0).to(tl.int64) * n_cols + tl.arange(0, BLOCK)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        total = (x + r).to(sum_ptr.dtype.element_ty)
        tl.store(sum_ptr + offs, total, mask=mask)
        h = total.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(h * h, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, (h * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def silu_mul_kernel(x_ptr, out_ptr, d, BLOCK: tl.constexpr):  # pyright: ignore[reportInvalidTypeForm]
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < d
        a = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * d + cols, (a * tl.sigmoid(a) * b).to(out_ptr.dtype.element_ty), mask=mask)

    def add_rmsnorm(x: Any, residual: Any, weight: Any, out: Any, total: Any) -> tuple[Any, Any]:
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        add_rmsnorm_kernel[(rows,)](x, residual, weight, out, total, cols, EPS, BLOCK=block,
                                    num_warps=min(max(block // 256, 1), 8))
        return out, total

    def silu_mul(x: Any, out: Any) -> Any:
        rows, d = out.shape
        silu_mul_kernel[(rows, triton.cdiv(d, 1024))](x, out, d, BLOCK=1024, num_warps=4)
        return out

    return add_rmsnorm, silu_mul


def scenarios(acc: Accelerator, sizes: Sizes, say: Callable[[str], None]) -> list[dict]:
    """The measured entries: add_rmsnorm and silu_mul, prefill and decode eager, decode in a graph too; and the
    fused add + RMSNorm against `x + residual; F.rms_norm` (the seed article's baseline) where torch has it."""
    t, dev, dt = acc.torch, acc.kind, acc.dtype
    try:
        fused_norm, fused_silu = build_kernels()
    except ImportError:
        say(_said("no_triton"))
        return []
    kernel = "Triton kernel of fusion-analyze calibrate"
    rms_norm, silu, nan = getattr(t.nn.functional, "rms_norm", None), t.nn.functional.silu, float("nan")
    h, inter = sizes.hidden, sizes.intermediate
    weight = 1 + 0.1 * t.randn(h, dtype=dt, device=dev)
    entries = []
    prefill, decode = sizes.tokens
    for tokens, mode in [(prefill, "eager"), (decode, "eager")] + ([(decode, "graph")] if dev != "cpu" else []):
        sets = [(t.randn(tokens, h, dtype=dt, device=dev), t.randn(tokens, h, dtype=dt, device=dev))
                for _ in range(SETS)]
        out, total = t.empty(tokens, h, dtype=dt, device=dev), t.empty(tokens, h, dtype=dt, device=dev)
        check(fused_norm(*sets[0], weight, out.fill_(nan), total.fill_(nan)),
              add_rmsnorm_reference(*sets[0], weight), "add_rmsnorm")
        shape = {"num_tokens": tokens, "hidden_size": h}
        pair = (lambda x, r: add_rmsnorm_reference(x, r, weight), lambda x, r: fused_norm(x, r, weight, out, total))
        entries.append(timed(acc, "add_rmsnorm", shape, mode, sets, pair, sizes.repeats,
                             f"{kernel} (add + RMSNorm, writes the sum and the normed output) vs eager PyTorch "
                             f"(x + residual, then float, pow, mean, add eps, rsqrt, multiply, weight, cast)", say))
        if rms_norm is not None and mode == "eager":
            pair = (lambda x, r: rms_norm(x + r, (h,), weight, EPS), pair[1])
            entries.append(timed(acc, "add_rmsnorm_vs_f_rms_norm", shape, mode, sets, pair, sizes.repeats,
                                 f"{kernel} (add + RMSNorm) vs x + residual, then torch.nn.functional.rms_norm", say))
        sets = [(t.randn(tokens, 2 * inter, dtype=dt, device=dev),) for _ in range(SETS)]
        out = t.empty(tokens, inter, dtype=dt, device=dev)
        check(fused_silu(sets[0][0], out.fill_(nan)), silu_mul_reference(sets[0][0], silu), "silu_mul")
        entries.append(timed(acc, "silu_mul", {"num_tokens": tokens, "intermediate_size": inter}, mode, sets,
                             (lambda x: silu_mul_reference(x, silu), lambda x: fused_silu(x, out)), sizes.repeats,
                             f"{kernel} (SiLU and multiply) vs eager PyTorch (F.silu(x[..., :d]) * x[..., d:])", say))
    return entries


def check(fused: Any, reference: Any, name: str) -> None:
    try:
        importlib.import_module("torch.testing").assert_close(fused, reference)
    except AssertionError as exc:
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        raise UserError(f"calibrate: the fused {name} kernel does not match its reference ({first}); "
                        "nothing written", 1)


def timed(acc: Accelerator, name: str, shape: dict[str, int], mode: str, sets: list, pair: tuple, repeats: int,
          source: str, say: Callable[[str], None]) -> dict:
    """One `measured` entry: reference and fused, each the median time of a loop of CALLS calls going round
    `sets` (launched one by one, or replayed from one captured graph), per call."""
    times = []
    for call in pair:
        def loop(call: Callable[..., Any] = call) -> None:
            for i in range(CALLS):
                call(*sets[i % len(sets)])

        run = acc.capture(loop) if mode == "graph" else loop
        assert run is not None
        times.append(round(acc.median_us(run, repeats) / CALLS, 2))
    say(_said("scenario", name=name, shape=shape, mode=mode, before=f"{times[0]:.2f}", after=f"{times[1]:.2f}", x=f"{times[0] / times[1]:.2f}"))
    return {"name": name, "shape": dict(shape), "mode": mode, "reference_us": times[0], "fused_us": times[1],
            "source": f"{source}; {acc.software}; median of {repeats} loops of {CALLS} calls"
                      f"{' replayed from one captured graph' if mode == 'graph' else ''}, per call"}


# -- the file ----------------------------------------------------------------------------------------------------
def device_id(name: str) -> str:
    """A YAML key for a device name: `NVIDIA H100 80GB HBM3` -> nvidia_h100_80gb_hbm3."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "device"


def _sig(x: float) -> float:
    return float(f"{x:.4g}")  # four significant digits: 3012 GB/s, 745.3 TFLOP/s, 4.567 µs


def profile(cal: Calibration, ident: str, scenarios_table: dict) -> dict:
    """The file's data, in devices.yaml's shape and key order."""
    where = f"measured by fusion-analyze calibrate on {cal.device}, {cal.date}, {cal.software}"
    graph = cal.launch_graph_us
    launch_how = cal.how["launch_us"] + ("" if graph is not None else "; graph: no graphs here, the eager figure")
    device: dict[str, Any] = {
        "name": cal.device,
        "hbm_gb_s": _sig(cal.hbm_gb_s),
        "tflops": _sig(cal.tflops),
        "link_gb_s": None,
        "launch_us": _Flow(eager=_sig(cal.launch_eager_us),
                           graph=_sig(cal.launch_eager_us if graph is None else graph)),
        "sources": {"hbm_gb_s": f"{where}: {cal.how['hbm_gb_s']}",
                    "tflops": f"{where}: {cal.how['tflops']}",
                    "link_gb_s": cal.link,
                    "launch_us": f"{where}: {launch_how}"},
    }
    if cal.launch_queued_us is not None:
        device["launch_us"]["queued"] = _sig(cal.launch_queued_us)
    if cal.dependent_access_us is not None:  # after launch_us, as devices.yaml would list it
        sources = device.pop("sources")
        device["dependent_access_us"] = round(cal.dependent_access_us, 3)
        device["sources"] = dict(sources, dependent_access_us=f"{where}: {cal.how['dependent_access_us']}")
    if cal.measured:
        device["sources"]["measured"] = f"{where}: each entry's source says what ran"
        device["measured"] = [{**e, "shape": _Flow(e["shape"])} for e in cal.measured]
    return {"default": ident, "devices": {ident: device},
            "scenarios": {k: _Flow(v) for k, v in scenarios_table.items()}}


class _Flow(dict):
    """A mapping written on one line (`launch_us: {eager: 4.1, graph: 1.2}`), as devices.yaml writes them."""


def to_yaml(data: dict) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(_Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))
    head = ("# A device profile measured by `fusion-analyze calibrate` (docs/calibration.md), in the shape of\n"
            "# patterns/catalog/devices.yaml: use it with `fusion-analyze MODEL --device-profile FILE`.\n")
    return head + yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=1 << 16)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


_LANG = ["en"]  # the language of calibrate's progress lines (its --lang), for _said


def _said(key: str, **args) -> str:
    """One progress line of calibrate in its language (templates/labels.yaml `calibrate`)."""
    # templates/labels.yaml read here, not through render.markdown: calibrate runs on an accelerator machine where
    # only PyTorch, Triton and PyYAML may be installed (the analysis' libcst is not needed to measure)
    from ..resources import data_dir, load_yaml

    data = load_yaml((data_dir("templates") / "labels.yaml").read_text(encoding="utf-8"))
    return data[_LANG[0]]["calibrate"][key].format(**args)


def calibrate(out: str | None, name: str | None, quick: bool, cpu: bool = False,
              say: Callable[[str], None] = _stderr, lang: str = "en") -> str:
    """Detect, measure, write the profile to `out` (stdout for None or -); the YAML text. Progress lines go to
    `say`, in `lang`."""
    from ..catalog import catalog

    _LANG[0] = lang
    acc = detect(cpu)
    sizes = TINY if acc.kind == "cpu" else QUICK if quick else FULL
    label = "sizes_tiny" if sizes is TINY else "sizes_quick" if quick else "sizes_full"
    say(_said("start", name=acc.name, kind=acc.kind, software=acc.software, sizes=_said(label)))
    cal = measure(acc, sizes, say)
    text = to_yaml(profile(cal, name or device_id(acc.name), catalog().devices["scenarios"]))
    if out and out != "-":
        path = Path(out)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--out {out}: cannot write it ({exc.strerror or exc})")
        say(_said("wrote", path=path))
    return text
