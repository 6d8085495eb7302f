"""Calls the walk follows through what a forward holds (a hand check of Qwen4Exp's report): a local holding a
submodule or object of the instance (`attn_hc = self.attn_hyper_connection; attn_hc.mix(h)`, `impl =
cast(Impl, self.impl); impl.run(q)`), a submodule's method of the loop's layer (`layer.hc.combine(...)`), a
function imported inside the calling method, a literal argument deciding the callee's test (`mode="decode"`);
host-side Python (Triton's host helpers, vLLM's platform object, `int.bit_length`, `slice`, a tensor's metadata)
is no device op; a tensor's `.is_cuda` is false on Ascend; and a raise the deployment surely reaches (in a
constructor or a forward) says the model cannot run, with its line, while one under an open test says nothing.

The mini tree gets a model of its own (hc.py, hc_ops.py), the 0.30 pair's Qwen4Exp the same checks."""

from __future__ import annotations

import json
import shutil

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze

HC_OPS = '''\
import torch


def hc_gate(x, gate, mode="mix"):
    if mode == "decode":
        out = x * gate  # DECODE-ONLY
    else:
        out = x + gate  # NOT-DECODE
    return out
'''

HC_MODEL = '''\
"""A decoder layer whose residual mixing runs through a module's own methods."""

from typing import cast

import torch
from torch import nn
from vllm.distributed import get_tensor_model_parallel_world_size
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.linear import ReplicatedLinear
from vllm.platforms import current_platform
from vllm.triton_utils import triton

from .qwen2 import Qwen2MLP, Qwen2Model
from .utils import maybe_prefix


def kernel_available():
    if current_platform.is_cuda():
        return True
    return False


class HcMixer(nn.Module):
    def __init__(self, hidden_size, prefix=""):
        super().__init__()
        self.down = ReplicatedLinear(hidden_size, 16, bias=False)
        self.up = ReplicatedLinear(16, hidden_size, bias=False)

    def mix(self, x):
        from .hc_ops import hc_gate

        lora, _ = self.down(x)
        gate, _ = self.up(lora)
        return hc_gate(x, gate, mode="decode")

    def combine(self, x, y):
        return x - y  # COMBINE-SUB


class HcImpl:
    def __init__(self, num_heads, kv_cache_dtype="auto"):
        if not kernel_available():
            raise NotImplementedError("HcImpl requires its CUDA kernel")  # INIT-RAISE
        if kv_cache_dtype not in ("auto", "bfloat16"):
            raise NotImplementedError("HcImpl requires a BF16 cache")  # INIT-NO-RAISE
        self.num_heads = num_heads

    def run(self, q):
        if q.shape[0] == 0:
            raise ValueError("no tokens")  # OPEN-RAISE
        return q * 2.0  # IMPL-MUL


class HcDecoderLayer(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        self.attn_hc = HcMixer(config.hidden_size, prefix=f"{prefix}.attn_hc")
        self.impl = HcImpl(config.num_attention_heads)
        self.tp_impl = HcImpl(config.num_attention_heads) if get_tensor_model_parallel_world_size() > 1 else None
        self.mlp = Qwen2MLP(config.hidden_size, config.intermediate_size, config.hidden_act, prefix=f"{prefix}.mlp")
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, positions, hidden_states, residual):
        hc = self.attn_hc
        hidden_states = hc.mix(hidden_states)  # MIX-CALL
        impl = cast(HcImpl, self.impl)
        hidden_states = impl.run(hidden_states)  # IMPL-CALL
        if self.tp_impl is not None:
            hidden_states = self.tp_impl.run(hidden_states)
        n = hidden_states.shape[0]
        blocks = triton.cdiv(n, 64) * triton.next_power_of_2(n)  # HOST-TRITON
        pdl = current_platform.is_arch_support_pdl()  # HOST-PLATFORM
        iters = max(n, 1).bit_length()  # HOST-BITLEN
        part = slice(0, n)  # HOST-SLICE
        if hidden_states.is_cuda:
            hidden_states = hidden_states * 3.0  # CUDA-ONLY
        hidden_states = self.norm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


class HcModel(Qwen2Model):
    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        hidden_states = self.embed_input_ids(input_ids)
        residual = None
        for layer in self.layers:
            hidden_states, residual = layer(positions, hidden_states, residual)
            hidden_states = layer.attn_hc.combine(hidden_states, residual)  # LAYER-SUB-METHOD
        return hidden_states
'''


def _causal_lm(name: str, model: str, layer: str) -> str:
    """The model class of a test model: its backbone built with its decoder-layer class, forward handed on."""
    return f'''

class {name}(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = {model}(vllm_config=vllm_config, prefix=maybe_prefix(prefix, "model"), decoder_layer_type={layer})

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        return self.model(input_ids, positions, intermediate_tensors, inputs_embeds)
'''


HC_MODEL += _causal_lm("HcForCausalLM", "HcModel", "HcDecoderLayer")


def _line(text: str, tag: str) -> int:
    (line,) = [i for i, s in enumerate(text.splitlines(), 1) if tag in s]
    return line


@pytest.fixture(scope="module")
def hc_tree(tmp_path_factory):
    from .conftest import MINI

    root = tmp_path_factory.mktemp("held") / "mini"
    shutil.copytree(MINI, root)
    models = root / "vllm/model_executor/models"
    (models / "hc.py").write_text(HC_MODEL, encoding="utf-8")
    (models / "hc_ops.py").write_text(HC_OPS, encoding="utf-8")
    (root / "vllm/platforms").mkdir()
    (root / "vllm/platforms/__init__.py").write_text("current_platform = None\n", encoding="utf-8")
    (root / "vllm/triton_utils").mkdir()
    (root / "vllm/triton_utils/__init__.py").write_text("import triton\n", encoding="utf-8")
    registry = models / "registry.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(text.replace('    "HybridForCausalLM":', '    "HcForCausalLM": ("hc", "HcForCausalLM"),\n'
                                                               '    "HybridForCausalLM":', 1), encoding="utf-8")
    config = {"architectures": ["HcForCausalLM"], "model_type": "hc", "num_hidden_layers": 2, "hidden_size": 256,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "hidden_act": "silu",
              "rms_norm_eps": 1e-6, "vocab_size": 1000}
    path = root / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return root, str(path)


@pytest.fixture(scope="module")
def walked(hc_tree):
    root, config = hc_tree
    return analyze("HcForCausalLM", str(root), str(root), "ascend", options=Options(config=config), cache=False)


@pytest.fixture(scope="module")
def walked_cuda(hc_tree):
    root, config = hc_tree
    return analyze("HcForCausalLM", str(root), str(root), "cuda", options=Options(config=config), cache=False)


def _at(a, file: str, line: int):
    return [op for op in a.walk.ops if op.file.endswith(file) and op.line == line]


def test_a_local_holding_a_submodule_runs_its_method(walked):
    """`hc = self.attn_hc; hc.mix(h)`: HcMixer.mix is walked with the mixer as self (its two GEMMs, under its
    path), not an unknown callee; `impl = cast(HcImpl, self.impl); impl.run(q)` walks HcImpl.run."""
    ops = walked.walk.ops
    down = [op for op in ops if op.name == "down"]
    up = [op for op in ops if op.name == "up"]
    assert down and up and down[0].path.endswith("layers.attn_hc.down") and down[0].kind == "matmul"
    assert not [op for op in ops if op.kind == "unknown" and op.name in ("hc.mix", "impl.run")]
    mul = _at(walked, "hc.py", _line(HC_MODEL, "# IMPL-MUL"))
    assert [(op.kind, op.path) for op in mul] == [("mul", "model.layers.impl"), ("mul", "model.layers.tp_impl")]


def test_a_submodule_method_of_the_loop_layer_is_walked(walked):
    """`layer.attn_hc.combine(h, r)` in the backbone's loop: HcMixer.combine runs (its subtraction)."""
    sub = _at(walked, "hc.py", _line(HC_MODEL, "# COMBINE-SUB"))
    assert [op.kind for op in sub] == ["sub"]
    assert not [op for op in walked.walk.ops if op.kind == "unknown" and "combine" in op.name]


def test_a_function_imported_in_the_method_is_followed_with_its_literal_argument(walked):
    """`from .hc_ops import hc_gate` inside `mix`, called with `mode="decode"`: hc_gate is walked, and its test
    on `mode` is decided by the literal: the multiply runs, the add does not."""
    assert [op.kind for op in _at(walked, "hc_ops.py", _line(HC_OPS, "# DECODE-ONLY"))] == ["mul"]
    assert _at(walked, "hc_ops.py", _line(HC_OPS, "# NOT-DECODE")) == []
    mul = _at(walked, "hc_ops.py", _line(HC_OPS, "# DECODE-ONLY"))[0]
    assert mul.condition is None and mul.steady


def test_host_side_python_is_no_device_op(walked):
    """triton.cdiv / next_power_of_2 (through vllm.triton_utils), current_platform's methods, int.bit_length,
    the builtin slice and the product of two host values: no op at those lines."""
    for tag in ("# HOST-TRITON", "# HOST-PLATFORM", "# HOST-BITLEN", "# HOST-SLICE"):
        assert _at(walked, "hc.py", _line(HC_MODEL, tag)) == [], tag


def test_a_tensors_is_cuda_is_false_on_ascend_and_open_on_cuda(walked, walked_cuda):
    line = _line(HC_MODEL, "# CUDA-ONLY")
    assert _at(walked, "hc.py", line) == []
    on_cuda = _at(walked_cuda, "hc.py", line)
    assert [op.kind for op in on_cuda] == ["mul"] and on_cuda[0].condition == "hidden_states.is_cuda"


def test_a_raise_the_construction_surely_reaches_is_a_blocker(walked, walked_cuda):
    """HcImpl's __init__ raises off CUDA (kernel_available() is False on Ascend): the report says the deployment
    cannot run, with the raise's line; the raise under `kv_cache_dtype not in (...)` (decided False) and the one
    under `q.shape[0] == 0` (open) say nothing, nor does the same class built only under TP > 1 (`tp_impl`, TP
    not stated). On CUDA nothing blocks."""
    # (the first layer is walked apart where the loop hands it other values: the blocker names the kind it was
    # met in first; which kinds hold it is not checked here)
    assert [{k: v for k, v in b.items() if k != "layer_kind"} for b in walked.walk.blockers] == [{
        "file": "vllm/model_executor/models/hc.py", "line": _line(HC_MODEL, "# INIT-RAISE"),
        "raises": 'NotImplementedError("HcImpl requires its CUDA kernel")', "in": "HcImpl.__init__",
        "path": "model.layers.impl", "when": "construction"}]
    assert walked.report["blockers"] == walked.walk.blockers
    assert walked_cuda.walk.blockers == []
    from fusion_analyze.render.markdown import render_data

    md = render_data(walked.report, lang="en")
    assert (f"cannot run on ascend: `HcImpl.__init__` raises `NotImplementedError(\"HcImpl requires its CUDA "
            f"kernel\")` (vllm/model_executor/models/hc.py:{_line(HC_MODEL, '# INIT-RAISE')}) during construction") in md


FIRST_MODEL = '''\
from torch import nn
from vllm.model_executor.layers.layernorm import RMSNorm

from .qwen2 import Qwen2MLP, Qwen2Model
from .utils import maybe_prefix


class FirstDecoderLayer(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        layer_id = int(prefix.split(".")[-1])
        self.is_first = layer_id == 0
        self.mlp = Qwen2MLP(config.hidden_size, config.intermediate_size, config.hidden_act, prefix=f"{prefix}.mlp")
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, positions, hidden_states, residual):
        if residual is None:
            residual = hidden_states
            hidden_states = self.norm(hidden_states)  # FIRST-NORM
        else:
            hidden_states, residual = self.norm(hidden_states, residual)  # ADD-NORM
        return self.mlp(hidden_states), residual
''' + _causal_lm("FirstForCausalLM", "Qwen2Model", "FirstDecoderLayer")


def test_a_kind_that_is_the_first_layer_alone_sees_what_the_loop_starts_with(hc_tree):
    """The layers' construction sets layer 0 apart (`self.is_first`): that kind runs only as the loop's first
    iteration, where `residual` is still the None the loop starts with, so it runs the norm without residual
    and not the residual add-norm; the other kind runs the reverse."""
    root, _config = hc_tree
    models = root / "vllm/model_executor/models"
    (models / "first.py").write_text(FIRST_MODEL, encoding="utf-8")
    registry = models / "registry.py"
    text = registry.read_text(encoding="utf-8")
    if "FirstForCausalLM" not in text:
        registry.write_text(text.replace('    "HybridForCausalLM":', '    "FirstForCausalLM": ("first", "FirstForCausalLM"),\n'
                                                                   '    "HybridForCausalLM":', 1), encoding="utf-8")
    config = {"architectures": ["FirstForCausalLM"], "model_type": "first", "num_hidden_layers": 3,
              "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
              "hidden_act": "silu", "rms_norm_eps": 1e-6, "vocab_size": 1000}
    path = root / "first.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    a = analyze("FirstForCausalLM", str(root), str(root), "ascend", options=Options(config=str(path)), cache=False)
    assert [k["layers"] for k in a.report["layer_kinds"]] == [[0], [1, 2]]
    first, add = _line(FIRST_MODEL, "# FIRST-NORM"), _line(FIRST_MODEL, "# ADD-NORM")
    norms = {(op.attrs.get("layer_kind"), op.line): op.steady for op in a.walk.ops
             if op.name == "norm" and op.file.endswith("first.py")}
    # each kind walks only the branch its values decide: the other norm is not in that kind at all
    assert norms == {(0, first): True, (1, add): True}


def test_a_custom_op_registered_by_two_vendor_copies_is_the_callers_own(tmp_path):
    """Two copies of a model's ops (models/x/amd/ops.py, models/x/nvidia/ops.py) register one custom-op name:
    the caller's package's copy is the one its import registers (the first by path otherwise)."""
    from fusion_analyze.walk.kernels.registered_ops import CustomOps

    from .conftest import tree_index

    ops = 'from vllm.utils import direct_register_custom_op\n\n\ndef {f}(x):\n    return x\n\n\n' \
          'direct_register_custom_op("x_gate", {f})\n'
    index = tree_index(tmp_path, {"models/x/amd/ops.py": ops.format(f="amd_gate"),
                                  "models/x/nvidia/ops.py": ops.format(f="nvidia_gate"),
                                  "models/x/nvidia/layer.py": "", "utils.py": ""})
    found = CustomOps(index)
    assert found.get("x_gate").name == "amd_gate"
    assert found.get("x_gate", near="vllm.models.x.nvidia.layer").name == "nvidia_gate"
    assert found.get("x_gate", near="vllm.models.x.amd.ops").name == "amd_gate"
