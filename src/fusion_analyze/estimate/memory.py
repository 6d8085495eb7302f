"""Whether the deployment can hold the model's weights: the weights one rank keeps, from the configuration's
dimensions (estimate/shapes.py), the quantisation and the TP / EP sizes, against the device's memory per card
(devices.yaml `memory_gib`, with its source). Only the weights are counted (no KV cache, activations or
workspace), so a deployment said not to fit cannot run, and one said to fit may still run short of memory.

What one rank keeps, as vLLM shards it:
- the embedding and the LM head (unless tied): vocab-parallel, split by TP;
- attention and dense MLP projections: column / row parallel, split by TP (MLA's low-rank projections too,
  counted as split: vLLM replicates a few small ones, which this rounds away);
- routed experts: split by EP with --enable-expert-parallel, else each expert's intermediate size by TP;
  shared experts and the router: split by TP (the router replicated, and small);
- norms and biases: not counted (well under a percent).

Bytes per weight: the checkpoint's dtype, or 1 for an 8-bit quantised linear (msmodelslim's W8A8* types, fp8)
and 1/2 for a 4-bit one (W4A8*, W4A16); the embedding and the LM head stay in the model's dtype.
"""

from __future__ import annotations

GIB = 1024 ** 3
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # the parallel sizes tried for the smallest deployment that fits


def _d(dims: dict, name: str) -> float:
    v = dims.get(name)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else 0.0


def weight_parts(dims: dict, config: dict | None) -> dict | None:
    """{"embed": elements split by TP in the model dtype, "dense": linear elements split by TP, "experts":
    routed experts' elements}; None where the dimensions are not known."""
    h, layers, vocab = _d(dims, "hidden_size"), _d(dims, "num_layers"), _d(dims, "vocab_size")
    nh = _d(dims, "num_heads")
    if not (h and layers and vocab and nh):
        return None
    config = config or {}
    embed = vocab * h * (1 if config.get("tie_word_embeddings") else 2)
    kv_lora = _d(dims, "kv_lora_rank")
    if kv_lora:  # MLA
        q_lora, nope, rope, v = (_d(dims, "q_lora_rank"), _d(dims, "qk_nope_head_dim"), _d(dims, "qk_rope_head_dim"),
                                 _d(dims, "v_head_dim"))
        q = (h * q_lora + q_lora * nh * (nope + rope)) if q_lora else h * nh * (nope + rope)
        attn = q + h * (kv_lora + rope) + kv_lora * nh * (nope + v) + nh * v * h
    else:
        hd, nkv = _d(dims, "head_dim") or h / nh, _d(dims, "num_kv_heads") or nh
        attn = h * (nh + 2 * nkv) * hd + nh * hd * h
    experts_n = _d(dims, "num_experts")
    inter = _d(dims, "intermediate_size")
    if experts_n:
        moe_inter = _d(dims, "moe_intermediate_size") or inter
        dense_layers = min(layers, _d(dims, "first_k_dense_replace"))
        moe_layers = layers - dense_layers
        shared = (_d(dims, "shared_expert_intermediate_size") or _d(dims, "n_shared_experts") * moe_inter)
        dense = layers * attn + dense_layers * 3 * h * inter + moe_layers * (3 * h * shared + h * experts_n)
        experts = moe_layers * experts_n * 3 * h * moe_inter
    else:
        dense = layers * (attn + 3 * h * inter)
        experts = 0.0
    return {"embed": embed, "dense": dense, "experts": experts}


def linear_bytes(deployment, dtype_bytes: float) -> tuple[float, str]:
    """Bytes of one quantised linear weight, and how it was decided."""
    method = getattr(deployment, "quantization", None)
    types = " ".join((getattr(deployment, "quant_types", lambda: {})() or {}).keys()).upper()
    if method == "ascend" and types:
        if "W4" in types:
            return 0.5, f"ascend {types.split()[0]}: 4-bit weights"
        if "W8" in types:
            return 1.0, "ascend W8: 8-bit weights"
    if method and "fp8" in method.lower():
        return 1.0, f"{method}: 8-bit weights"
    if method:
        return dtype_bytes, f"{method}: weights counted at the model's dtype (its packing is not read here)"
    return dtype_bytes, f"unquantised: {int(dtype_bytes)} bytes per weight"


def per_rank(parts: dict, tp: int, ep: int, embed_bytes: float, lin_bytes: float) -> float:
    """Bytes of weights one rank keeps at these sizes (EP > 1 splits the experts by EP, else by TP)."""
    experts = parts["experts"] / (ep if ep > 1 else tp)
    return parts["embed"] * embed_bytes / tp + parts["dense"] * lin_bytes / tp + experts * lin_bytes


def fit(dims: dict, config: dict | None, deployment, device: dict, dtype_bytes: float) -> dict | None:
    """{weights_gib, memory_gib, fits, smallest_tp, smallest_ep, bytes_per_weight, memory_source}; None where the
    device's memory or the model's dimensions are not known."""
    memory = device.get("memory_gib")
    parts = weight_parts(dims, config)
    if not memory or parts is None or deployment is None:
        return None
    lin, how = linear_bytes(deployment, dtype_bytes)
    limit = float(memory) * GIB
    tp, ep = deployment.tp_size, deployment.ep
    mine = per_rank(parts, tp, ep, dtype_bytes, lin)
    heads = _d(dims, "num_heads")
    n_experts = _d(dims, "num_experts")
    smallest_tp = next((t for t in SIZES if (not heads or heads % t == 0)
                        and per_rank(parts, t, 1, dtype_bytes, lin) <= limit), None)
    smallest_ep = None
    if n_experts:  # --enable-expert-parallel over TP x DP ranks: the smallest group, then the smallest TP in it
        for size in SIZES:
            if n_experts % size:
                continue
            t = next((t for t in SIZES if t <= size and size % t == 0 and (not heads or heads % t == 0)
                      and per_rank(parts, t, size, dtype_bytes, lin) <= limit), None)
            if t is not None:
                smallest_ep = {"ep": size, "tp": t, "dp": size // t}
                break
    return {"weights_gib": round(mine / GIB, 1), "memory_gib": float(memory), "fits": mine <= limit,
            "smallest_tp": smallest_tp, "smallest_ep": smallest_ep, "bytes_per_weight": how,
            "memory_source": (device.get("sources") or {}).get("memory_gib"), "device": device.get("name")}


def advice(f: dict) -> str:
    """The smallest deployments that hold the weights, in vLLM's arguments."""
    out = []
    if f.get("smallest_tp"):
        out.append(f"--tensor-parallel-size {f['smallest_tp']}")
    e = f.get("smallest_ep")
    if e:
        args = (f"--tensor-parallel-size {e['tp']} " if e["tp"] > 1 else "") + \
            (f"--data-parallel-size {e['dp']} " if e["dp"] > 1 else "") + "--enable-expert-parallel"
        out.append(f"{args} (EP {e['ep']})")
    return " or ".join(out) if out else f"none up to {SIZES[-1]} ranks"
