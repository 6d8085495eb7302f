"""Model dimensions for the benefit model: from an HF config.json, a built-in preset, or symbolic."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

from ..config.reader import ConfigRead, stated_dtype
from ..errors import UserError

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1, "int8": 1}

# Sizes the interface stubs' example inputs use (small enough for a CPU test).
SMALL = {"num_tokens": 4, "hidden_size": 64, "intermediate_size": 96, "num_heads": 4, "num_kv_heads": 2,
         "head_dim": 16, "max_position": 32, "num_experts": 8, "top_k": 2, "moe_intermediate_size": 32,
         "out_features": 48, "in_features": 64, "batch": 2, "q_len": 4, "kv_len": 4, "kdim": 8, "m": 6, "n": 5,
         "num_blocks": 4, "block_size": 8, "num_layers": 2}


@dataclass
class Shapes:
    dims: dict = field(default_factory=dict)  # empty: symbolic
    source: str | None = None
    dtype_bytes: int = 2

    @property
    def symbolic(self) -> bool:
        return not self.dims

    def for_ops(self, ops) -> "Shapes":
        """The dimensions as these ops see them: ops of a MoE layer's shared expert (`attrs.role`) have its own
        intermediate size (`shared_expert_intermediate_size`, else `moe_intermediate_size` x `n_shared_experts`),
        as the cost model sizes their GEMMs, not the dense MLP's `intermediate_size`."""
        if self.symbolic or not any(getattr(op, "attrs", {}).get("role") == "shared_expert" for op in ops):
            return self
        d = self.dims
        shared = d.get("shared_expert_intermediate_size")
        if not shared and d.get("moe_intermediate_size") and d.get("n_shared_experts"):
            shared = d["moe_intermediate_size"] * d["n_shared_experts"]
        if not shared:
            return self
        return Shapes({**d, "intermediate_size": shared}, self.source, self.dtype_bytes)

    def with_scenario(self, scenario: dict) -> dict:
        d = dict(self.dims)
        d.update(scenario)
        d.setdefault("out_features", d.get("hidden_size"))
        d.setdefault("in_features", d.get("intermediate_size") or d.get("hidden_size"))
        d.setdefault("kdim", d.get("head_dim"))
        d.setdefault("m", d.get("num_tokens"))
        d.setdefault("n", d.get("head_dim"))
        return d


def _from_config(cfg: dict, source: str, cls=None) -> Shapes:
    """`cls`: the configuration class the model type reads it with (config.model_config.ConfigClass): a name
    the file gives under the class's own field name (LongCat's `ffn_hidden_size` for `intermediate_size`,
    through its attribute_map) or leaves to the class's literal default is read as the class reads it."""
    sub = isinstance(cfg.get("text_config"), dict)
    text = dict(cfg["text_config"] if sub else cfg)
    own = (cls.text if sub else cls) if cls is not None else None
    if own is not None:
        for alias, real in own.attribute_map.items():
            if text.get(alias) is None and text.get(real) is not None:
                text[alias] = text[real]
        for name, value in own.defaults.items():
            text.setdefault(name, value)
    g = lambda *names, default=None: next((text[n] for n in names if text.get(n) is not None), default)  # noqa: E731
    hidden = g("hidden_size", "d_model", "n_embd")
    heads = g("num_attention_heads", "n_head")
    if not isinstance(hidden, int) or not isinstance(heads, int):
        raise UserError(f"{source}: config has no hidden_size / num_attention_heads; give a decoder model's config.json")
    dims = {
        "hidden_size": hidden,
        "intermediate_size": g("intermediate_size", "ffn_dim", "n_inner", default=4 * hidden),
        "num_heads": heads,
        "num_kv_heads": g("num_key_value_heads", "num_kv_heads", default=heads),
        "head_dim": g("head_dim", default=hidden // heads),
        "num_layers": g("num_hidden_layers", "n_layer", "num_layers"),
        "max_position": g("max_position_embeddings", default=4096),
        "vocab_size": g("vocab_size"),
        "num_experts": g("num_experts", "n_routed_experts", "num_local_experts", default=0),
        "top_k": g("num_experts_per_tok", "moe_topk", default=0),
        "moe_intermediate_size": g("moe_intermediate_size", default=g("intermediate_size", default=4 * hidden)),
        "n_shared_experts": g("n_shared_experts", "num_shared_experts"),
        "shared_expert_intermediate_size": g("shared_expert_intermediate_size"),
        "first_k_dense_replace": g("first_k_dense_replace"),
        "kv_lora_rank": g("kv_lora_rank"), "q_lora_rank": g("q_lora_rank"),
        "qk_rope_head_dim": g("qk_rope_head_dim"), "qk_nope_head_dim": g("qk_nope_head_dim"),
        "v_head_dim": g("v_head_dim"),
        "block_size": 128, "num_blocks": 1024,
    }
    dtype = stated_dtype(cfg) or "bfloat16"
    return Shapes({k: v for k, v in dims.items() if v is not None}, source, DTYPE_BYTES.get(dtype, 2))


def load_shapes(read: ConfigRead | None, cls=None) -> Shapes:
    """The estimate's dimensions from the configuration read once per analysis (config.reader), read as its
    configuration class `cls` reads it (aliases, defaults); symbolic without one."""
    if read is None:
        return Shapes()
    return _from_config(read.values, read.source, cls)


_ALLOWED = (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Constant, ast.Name,
            ast.Load, ast.USub, ast.UnaryOp)


def evaluate(expr: str, dims: dict) -> float | None:
    """Arithmetic over dimension names; None when a name is unknown (the estimate stays symbolic)."""
    code, names = _compiled(expr)
    if any(not isinstance(dims.get(n), (int, float)) for n in names):
        return None
    return eval(code, {"__builtins__": {}}, dict(dims))  # noqa: S307 - checked in _compiled


@functools.lru_cache(maxsize=4096)
def _compiled(expr: str):
    """The checked, compiled expression and its names, once per text (every estimate asks for the same few)."""
    tree = ast.parse(expr, mode="eval")
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ValueError(f"not an arithmetic shape expression: {expr}")
        if isinstance(node, ast.Name):
            names.append(node.id)
    return compile(tree, "<shape>", "eval"), tuple(names)


def shape_dims(shape: str) -> list[str]:
    """"[num_tokens, 2 * intermediate_size]" -> ["num_tokens", "2 * intermediate_size"]."""
    inner = shape.strip()
    if not (inner.startswith("[") and inner.endswith("]")):
        raise ValueError(f"shape must look like [d0, d1, ...]: {shape}")
    parts, depth, cur = [], 0, ""
    for ch in inner[1:-1]:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([" 
        depth -= ch in ")]"
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts
