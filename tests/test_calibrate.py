"""`fusion-analyze calibrate`: one line and exit 2 without an accelerator, a written profile that the catalog's
reader takes (from fake timings: CI has no accelerator), and the fused kernels against their references on the
CPU through Triton's interpreter where Triton is installed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fusion_analyze.catalog import schema
from fusion_analyze.catalog.shape import read
from fusion_analyze.cli import app
from fusion_analyze.commands import calibrate as cal
from fusion_analyze.estimate.benefit import device_profile


def _invoke(*args: str):
    return CliRunner().invoke(app, ["calibrate", "--lang", "en", *args])


H100 = "NVIDIA H100 80GB HBM3"


def _fake(device: str = H100) -> cal.Calibration:
    how = {"hbm_gb_s": "copy", "tflops": "matmul", "launch_us": "tiny ops"}
    measured = [{"name": "add_rmsnorm", "shape": {"num_tokens": 32, "hidden_size": 1024}, "mode": mode,
                 "reference_us": 40.5, "fused_us": 9.25, "source": "Triton kernel vs eager PyTorch"}
                for mode in ("eager", "graph")]
    return cal.Calibration(device, "torch 2.11.0+cu130, CUDA 13.0", "2026-01-02", 3012.4, 745.26, 4.567, 1.234,
                           how, measured=measured)


def _no_accelerator(monkeypatch, torch) -> None:
    """No torch_npu and no CUDA, whatever this machine has."""
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # `import torch_npu` raises ImportError
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_without_an_accelerator_one_line_and_exit_2(monkeypatch, torch):
    _no_accelerator(monkeypatch, torch)
    r = _invoke("--quick")
    assert r.exit_code == 2
    assert r.stderr == f"error: {cal.NO_ACCELERATOR}\n" and r.stdout == ""
    assert "Traceback" not in r.output


def test_without_pytorch_one_line_and_exit_2(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    r = _invoke()
    assert (r.exit_code, r.stderr) == (2, f"error: {cal.NO_ACCELERATOR}\n")


def test_written_profile_reads_with_the_catalog_schema(tmp_path, monkeypatch):
    """Fake timings through the command: the file is of devices.yaml's shape and the estimate takes it."""
    monkeypatch.setattr(cal, "detect", lambda cpu=False: cal.Accelerator(None, "cuda", H100, "torch"))
    monkeypatch.setattr(cal, "measure", lambda acc, sizes, say: _fake(acc.name))
    out = tmp_path / "cal" / "h100.yaml"
    r = _invoke("--out", str(out), "--name", "h100")
    assert r.exit_code == 0, r.output
    assert r.stdout == "" and f"wrote {out}" in r.stderr
    devices, raw = read(schema.Devices, out, "h100.yaml")
    assert devices.default == "h100" and list(devices.devices) == ["h100"]
    d = devices.devices["h100"]
    assert (d.name, d.hbm_gb_s, d.tflops, d.link_gb_s) == ("NVIDIA H100 80GB HBM3", 3012, 745.3, None)
    assert (d.launch_us.eager, d.launch_us.graph) == (4.567, 1.234)
    assert [(m.name, m.mode, m.reference_us, m.fused_us) for m in d.measured] == [
        ("add_rmsnorm", "eager", 40.5, 9.25), ("add_rmsnorm", "graph", 40.5, 9.25)]
    assert set(d.sources) == {"hbm_gb_s", "tflops", "link_gb_s", "launch_us", "measured"}
    assert d.sources["hbm_gb_s"].startswith(
        "measured by fusion-analyze calibrate on NVIDIA H100 80GB HBM3, 2026-01-02, torch 2.11.0+cu130")
    assert d.sources["link_gb_s"] == "not measured: one device"
    assert set(devices.scenarios) == {"prefill", "decode"}  # copied from the catalog
    assert list(raw) == ["default", "devices", "scenarios"]
    assert list(raw["devices"]["h100"]) == ["name", "hbm_gb_s", "tflops", "link_gb_s", "launch_us", "sources",
                                            "measured"]
    profile = device_profile(path=str(out))
    assert profile["id"] == "h100" and profile["launch_us"] == {"eager": 4.567, "graph": 1.234}


def test_stdout_by_default_and_a_default_id(monkeypatch):
    monkeypatch.setattr(cal, "detect", lambda cpu=False: cal.Accelerator(None, "cuda", H100, "torch"))
    monkeypatch.setattr(cal, "measure", lambda acc, sizes, say: _fake(acc.name))
    r = _invoke()
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("# A device profile") and "\ndefault: nvidia_h100_80gb_hbm3\n" in r.stdout
    assert "launch_us: {eager: 4.567, graph: 1.234}" in r.stdout
    assert r.stdout == _invoke().stdout  # deterministic


def test_cpu_run_measures_and_writes(tmp_path, monkeypatch, torch):
    """The real measuring code at tiny sizes on the CPU (--cpu; the fused scenarios need the interpreter)."""
    _no_accelerator(monkeypatch, torch)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    out = tmp_path / "cpu.yaml"
    r = _invoke("--cpu", "--quick", "--out", str(out))
    assert r.exit_code == 0, r.output
    devices, _ = read(schema.Devices, out, "cpu.yaml")
    d = devices.devices["cpu"]
    assert d.hbm_gb_s > 0 and d.tflops > 0 and d.launch_us.eager > 0 and d.measured == ()
    assert "TRITON_INTERPRET=1" in r.stderr


KERNEL_CHECK = """
import torch
from fusion_analyze.commands import calibrate as cal

add_rmsnorm, silu_mul = cal.build_kernels()
for dt in (torch.float32, torch.float16):  # the interpreter does not compute bfloat16
    for rows, hidden in ((3, 64), (2, 96)):  # 96: a row shorter than the kernel's block
        x, r = torch.randn(rows, hidden, dtype=dt), torch.randn(rows, hidden, dtype=dt)
        w = 1 + 0.1 * torch.randn(hidden, dtype=dt)
        out, total = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
        torch.testing.assert_close(add_rmsnorm(x, r, w, out, total), cal.add_rmsnorm_reference(x, r, w))
        g = torch.randn(rows, 2 * hidden, dtype=dt)
        y = torch.full((rows, hidden), float("nan"), dtype=dt)
        torch.testing.assert_close(silu_mul(g, y), cal.silu_mul_reference(g, torch.nn.functional.silu))
print("ok")
"""


def test_fused_kernels_match_their_references_in_the_interpreter(torch):
    """In a process of its own: TRITON_INTERPRET must be set before triton is first imported."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", KERNEL_CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stdout + proc.stderr[-3000:]


def test_a_wrong_kernel_is_one_line_exit_1(torch):
    x = torch.ones(2, 2)
    with pytest.raises(cal.UserError) as exc:
        cal.check(x + 1, x, "silu_mul")
    assert exc.value.code == 1 and "\n" not in exc.value.message
    assert exc.value.message.startswith("calibrate: the fused silu_mul kernel does not match its reference")


ON_A_BARE_ACCELERATOR = """
import importlib.abc, sys


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("libcst", "typer", "rich"):
            raise ImportError(name + " is not installed on this machine")


sys.meta_path.insert(0, NotInstalled())
from fusion_analyze.commands.calibrate import calibrate

text = calibrate(None, "dev", True, cpu=True, say=lambda line: None)
assert text.startswith("# A device profile") and "default: dev" in text, text[:300]
print("ok")
"""


def test_calibrate_runs_where_only_pytorch_and_pyyaml_are_installed(torch):
    """An accelerator machine may hold PyTorch, Triton and PyYAML alone: calibrate (run there as
    `python -c "from fusion_analyze.commands.calibrate import calibrate; ..."` with src/ on the path) needs none
    of the analysis' packages (libcst, typer, rich)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", ON_A_BARE_ACCELERATOR], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
