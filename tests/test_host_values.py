"""Host values are no device ops (issue 45): numpy values and their arithmetic, Python scalars the trees
declare (a parameter annotated `int`, a metadata dataclass's `int` field, through a TypeVar's bound and an
unannotated parameter it is handed to), and a lazy one-time init (`if self.x is not None: return` before code
that assigns `self.x`, or `if self.x is None: self.x = ...`) that runs once: its ops are not steady."""

from __future__ import annotations

import pytest

from fusion_analyze.analysis.pipeline import analyze

_HEAD = '''"""Inference-only Qwen3 model compatible with HuggingFace weights."""

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
'''

_HELPERS = '''

@dataclass
class MiniMetadata:
    num_actual_tokens: int
    num_decode_tokens: int | None
    slot_mapping: torch.Tensor


M = TypeVar("M", bound=MiniMetadata)


class Qwen3Attention(nn.Module):
'''

_INIT_END = '''        self.k_norm = RMSNorm(self.head_dim, eps=rms_norm_eps)
        self.rotation = None
        self.bias_table = None
        self.step_cache = None
'''

_METHODS = '''
    def _initialize(self, x):
        if self.rotation is not None:
            return
        self._initialize_transforms(x, x.device)

    def _initialize_transforms(self, x, device):
        h = np.ones((1, 1), dtype=np.float32)
        rng = np.random.default_rng(0)
        signs = rng.choice([-1.0, 1.0], 4).astype(np.float32)
        self.rotation = torch.tensor(signs[:, None] * h / math.sqrt(4), device=device)
        self.scale = torch.ones_like(x) * 2.0  # LAZY-AFTER-GUARD

    def _table(self, x):
        if self.bias_table is None:
            self.bias_table = torch.ones_like(x) * 3.0  # LAZY-BODY
        return self.bias_table

    def _step(self, x):
        if self.step_cache is None:
            self.step_cache = torch.ones_like(x) * 5.0  # RESET-BODY
        return self.step_cache

    def clear(self):
        self.step_cache = None  # set back each step: not a one-time init

    def _prefill_tokens(self, q, attn_metadata: M, n: int):
        count = n - 1  # INT-PARAM
        return self._prefill_split(q, attn_metadata) * count  # SCALAR-MUL

    def _prefill_split(self, q, attn_metadata):
        num_prefill = attn_metadata.num_actual_tokens - attn_metadata.num_decode_tokens  # METADATA-SUB
        shifted = attn_metadata.slot_mapping + 1  # TENSOR-FIELD
        last = len(q) - q.size(0) + q.shape[0] - 1  # LEN-SUB
        return q[:num_prefill] + shifted

    def forward(self, positions, hidden_states):
        self._initialize(hidden_states)
        hidden_states = hidden_states + self._table(hidden_states)  # TABLE-ADD
        hidden_states = hidden_states + self._step(hidden_states)
        hidden_states = self._prefill_tokens(hidden_states, positions, 8)
'''


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    import shutil

    from .conftest import MINI

    root = tmp_path_factory.mktemp("host") / "mini"
    shutil.copytree(MINI, root)
    path = root / "vllm" / "model_executor" / "models" / "qwen3.py"
    src = path.read_text()
    src = src.replace('"""Inference-only Qwen3 model compatible with HuggingFace weights."""\n', _HEAD, 1)
    src = src.replace("\n\nclass Qwen3Attention(nn.Module):\n", _HELPERS, 1)
    src = src.replace("        self.k_norm = RMSNorm(self.head_dim, eps=rms_norm_eps)\n", _INIT_END, 1)
    src = src.replace("\n    def forward(self, positions, hidden_states):\n", _METHODS, 1)
    assert src.count("LAZY-BODY") == 1 and "MiniMetadata" in src and "self.bias_table = None" in src
    path.write_text(src)
    lines = {tag: next(i for i, line in enumerate(src.splitlines(), 1) if tag in line)
             for tag in ("LAZY-AFTER-GUARD", "LAZY-BODY", "TABLE-ADD", "INT-PARAM", "SCALAR-MUL", "METADATA-SUB", "TENSOR-FIELD", "LEN-SUB", "RESET-BODY")}
    guard = next(i for i, line in enumerate(src.splitlines(), 1) if "if self.rotation is not None:" in line)
    a = analyze("Qwen3ForCausalLM", str(root), str(root), None, cache=False)
    return a.walk.ops, lines, guard


def _at(ops, line):
    return [op for op in ops if op.file.endswith("qwen3.py") and op.line == line]


def test_numpy_values_are_no_device_ops(walked):
    ops, lines, _guard = walked
    start, end = lines["LAZY-AFTER-GUARD"] - 4, lines["LAZY-AFTER-GUARD"] - 1
    host = [op for op in ops if op.file.endswith("qwen3.py") and start <= op.line <= end]
    assert host == [], [(op.kind, op.name, op.line) for op in host]  # np.ones, rng.choice(...).astype, mul/div


def test_lazy_init_after_a_guard_runs_once(walked):
    ops, lines, guard = walked
    mul = _at(ops, lines["LAZY-AFTER-GUARD"])
    assert [op.kind for op in mul] == ["mul"]  # a device op, of the init: kept, but not steady
    assert not mul[0].steady and mul[0].attrs["once"].startswith("self.rotation is not None (")
    assert mul[0].attrs["once"].endswith(f"qwen3.py:{guard})")


def test_lazy_init_body_runs_once(walked):
    ops, lines, _guard = walked
    mul = [op for op in _at(ops, lines["LAZY-BODY"]) if op.kind == "mul"]
    assert len(mul) == 1 and not mul[0].steady and "self.bias_table is None" in mul[0].attrs["once"]
    # the forward's own add of the table stays a steady device op
    assert any(op.kind == "add" and op.steady for op in _at(ops, lines["TABLE-ADD"]))


def test_declared_ints_are_no_device_ops(walked):
    ops, lines, _guard = walked
    assert _at(ops, lines["INT-PARAM"]) == []  # n: int
    assert _at(ops, lines["METADATA-SUB"]) == []  # num_actual_tokens: int, through M's bound, handed on unannotated
    mul = _at(ops, lines["SCALAR-MUL"])  # the tensor times the host int: a device op, its scalar side said
    assert [op.kind for op in mul] == ["mul"] and mul[0].steady and mul[0].attrs["scalar"] is True
    assert _at(ops, lines["LEN-SUB"]) == []  # len(), .size(), .shape[...]: integers
    field = _at(ops, lines["TENSOR-FIELD"])  # slot_mapping: torch.Tensor stays a tensor
    assert [op.kind for op in field] == ["add"] and field[0].steady


# ---- the 0.30 pair ----------------------------------------------------------------------------------------

def _config(name: str) -> str:
    from .conftest import FIXTURES

    return str(FIXTURES / "configs" / name)


def _lines(root, rel: str, text: str) -> list[int]:
    src = (root / rel).read_text(encoding="utf-8").splitlines()
    return [i for i, line in enumerate(src, 1) if text in line]


def test_real_glm_dsa_turboquant_init_is_host_and_once(session, hf, real_tree):
    """GlmMoeDsa's TurboQuantLatent: `_initialize` returns while `self.rotation is not None`, then
    `_initialize_transforms` builds the rotation with numpy (np.block, rng.choice, `signs[:, None] * h / ...`,
    `cent[...] ** 2 + ...`): none of it is a device op of the step, and no fusion row is claimed there; the
    rotation's matmul in `forward` stays."""
    from fusion_analyze.analysis.pipeline import Options, analyze_in

    a = analyze_in(session, "GlmMoeDsaForCausalLM", Options(config=_config("glm-moe-dsa.json"), hf_root=hf))
    rel = "vllm_ascend/quantization/methods/kv_cache/turboquant/latent.py"
    root = real_tree("vllm-ascend==0.30.0rc2")
    (start,) = _lines(root, rel, "def _initialize_transforms(self, device):")
    (end,) = _lines(root, rel, "self.norm_lut = torch.tensor(cent[codes & 15] ** 2")
    (matmul,) = _lines(root, rel, "return (x.float().reshape(-1, HEAD_DIM) @ rotation).to(x.dtype)")
    latent = [op for op in a.walk.ops if op.file == rel]
    # (at vllm-ascend's defaults the SFA turboquant cache is off: ascend_config decides `enable_sparse_sfa_
    # turboquant` False, so the latent's forward may not be walked at all; where it is, its matmul is steady)
    assert all(op.steady for op in latent if op.kind == "matmul" and op.line == matmul)
    init = [(op.kind, op.name, op.line) for op in latent if start <= op.line <= end]
    assert init == []
    assert not [o.id for o in a.opportunities if o.file == rel and start <= o.line <= end]


def test_real_kimi_mla_metadata_counters_are_host_ints(session, hf, real_tree):
    """mla_v1.py `num_actual_prefill_tokens = num_actual_tokens - num_decode_tokens`: counters read from the
    attention metadata (`attn_metadata: M`, M bound to AscendMLAMetadata, whose fields are declared `int`),
    handed to `mla_preprocess_prefill` unannotated: integer arithmetic, no op; the q_proj after it stays."""
    from fusion_analyze.analysis.pipeline import Options, analyze_in

    a = analyze_in(session, "KimiLinearForCausalLM", Options(config=_config("kimi-linear-kda-mla.json"), hf_root=hf))
    rel = "vllm_ascend/attention/mla_v1.py"
    root = real_tree("vllm-ascend==0.30.0rc2")
    (sub,) = _lines(root, rel, "num_actual_prefill_tokens = num_actual_tokens - num_decode_tokens")
    (proj,) = _lines(root, rel, "prefill_q = self.q_proj(prefill_q_c)[0]")
    mla = [op for op in a.walk.ops if op.file == rel]
    assert any(op.kind == "matmul" and op.line == proj for op in mla)  # the walk is in mla_preprocess_prefill
    assert [(op.kind, op.line) for op in mla if op.line == sub] == []


def test_a_guard_set_back_elsewhere_is_no_one_time_init(walked):
    ops, lines, _guard = walked
    mul = [op for op in _at(ops, lines["RESET-BODY"]) if op.kind == "mul"]
    assert len(mul) == 1 and mul[0].steady and "once" not in mul[0].attrs
