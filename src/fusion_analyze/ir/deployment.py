"""The deployment a report answers for, stated the way users state it to vLLM: parallel sizes, expert
parallelism, the quantisation (named, or found in the checkpoint folder as vllm-ascend finds it), vllm-ascend's
`--additional-config`, eager or graph mode, the scheduler's `max_num_seqs`, and the device. Read once per
analysis; the one Environment (semantics/environment.py) carries it, so every choice the code makes with these
values (a linear's quant method, the MoE communication method, a config flag) is decided with them.

A value the user did not state stays what vLLM and vllm-ascend default to, and the report says which values
were stated. Nothing here imports or runs the analysed code: a checkpoint folder is read as JSON.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import UserError

# the file msmodelslim writes next to the weights (vllm_ascend/quantization/configs/modelslim_config.py
# MODELSLIM_CONFIG_FILENAME); its presence makes vllm-ascend pick its "ascend" quantization
# (quantization/utils.py detect_quantization_method)
MODELSLIM_FILE = "quant_model_description.json"
ASCEND_QUANTIZATION = "ascend"
# vLLM's own default (vllm/config/scheduler.py), and the fallback the tool uses for the cost model's decode batch
DEFAULT_MAX_NUM_SEQS = 256


@dataclass(frozen=True)
class Deployment:
    tp: int | None = None  # --tensor-parallel-size; None: not stated (vLLM's default, 1)
    dp: int = 1  # --data-parallel-size
    enable_expert_parallel: bool = False  # --enable-expert-parallel
    ep_size: int | None = None  # --ep N: the expert-parallel size itself (legacy option of this tool)
    quantization: str | None = None  # --quantization, or "ascend" where the checkpoint holds MODELSLIM_FILE
    quant_description: dict | None = field(default=None, compare=False)  # the checkpoint's MODELSLIM_FILE
    quant_source: str | None = None  # where quant_description was read
    additional_config: dict = field(default_factory=dict, compare=False)  # --additional-config JSON
    enforce_eager: bool = False  # --enforce-eager
    max_num_seqs: int | None = None  # --max-num-seqs; None: vLLM's default
    stated: tuple = ()  # the engine arguments the user gave, in vLLM's spelling (the report lists them)

    # ----- what the runtime derives from them
    @property
    def tp_size(self) -> int:
        return self.tp or 1

    @property
    def world_size_across_dp(self) -> int:
        return self.tp_size * self.dp

    @property
    def ep(self) -> int:
        """vLLM's expert-parallel group: TP × DP ranks with --enable-expert-parallel, else none (1)."""
        if self.ep_size is not None:
            return self.ep_size
        return self.world_size_across_dp if self.enable_expert_parallel else 1

    @property
    def uses_ep(self) -> bool:
        return self.ep > 1

    @property
    def num_seqs(self) -> int:
        return self.max_num_seqs or DEFAULT_MAX_NUM_SEQS

    @property
    def graph_mode(self) -> bool:
        return not self.enforce_eager

    @property
    def is_default(self) -> bool:
        return not self.stated

    def key(self) -> str:
        """A canonical text of the deployment (caches, `all` jobs): the same deployment, the same key."""
        return json.dumps(self.as_json(), sort_keys=True)

    def as_json(self) -> dict:
        return {
            "tensor_parallel_size": self.tp_size, "tensor_parallel_stated": self.tp is not None,
            "data_parallel_size": self.dp, "enable_expert_parallel": self.uses_ep, "expert_parallel_size": self.ep,
            "quantization": self.quantization, "quant_description": self.quant_source,
            "quant_types": self.quant_types(), "quant_layers_mapped": self.quant_description is not None,
            "additional_config": self.additional_config,
            "enforce_eager": self.enforce_eager, "max_num_seqs": self.num_seqs,
            "max_num_seqs_stated": self.max_num_seqs is not None, "stated": list(self.stated),
        }

    def quant_types(self) -> dict:
        """{quant type: number of weights} of the checkpoint's description ("FLOAT" included)."""
        out: dict = {}
        for key, value in sorted((self.quant_description or {}).items()):
            if key.endswith(".weight") and isinstance(value, str):
                out[value] = out.get(value, 0) + 1
        return out

    # ----- what the code reads of vLLM's configuration objects
    def vllm_config(self, num_experts: int | None) -> dict:
        """vLLM's `vllm_config` as the code reads it (attribute by attribute), for the values this deployment
        states or vLLM defaults; a key ending in `()` is what the method of that name returns."""
        parallel = {"tensor_parallel_size": self.tp_size, "data_parallel_size": self.dp,
                    "pipeline_parallel_size": 1, "enable_expert_parallel": self.uses_ep,
                    "world_size_across_dp": self.world_size_across_dp, "world_size": self.tp_size,
                    "prefill_context_parallel_size": 1, "decode_context_parallel_size": 1}
        model = {"get_num_experts()": num_experts} if num_experts is not None else {}  # unknown: not made up
        return {"parallel_config": parallel, "model_config": model, "lora_config": None,
                "kv_transfer_config": None, "speculative_config": None}


def _positive(flag: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UserError(f"{flag} {value}: give a positive integer")


def parse_additional_config(text: str | None) -> dict:
    """`--additional-config '{"enable_fused_mc2": true}'`: a JSON object (vllm-ascend's additional_config)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"--additional-config: not JSON ({exc.msg} at column {exc.colno}); give a JSON object "
                        "such as '{\"enable_fused_mc2\": true}'") from None
    if not isinstance(value, dict):
        raise UserError("--additional-config: give a JSON object such as '{\"enable_fused_mc2\": true}'")
    return value


def read_quant_description(folder: str | Path) -> tuple[dict | None, str | None]:
    """The checkpoint folder's msmodelslim description (MODELSLIM_FILE), as vllm-ascend reads it."""
    path = Path(folder) / MODELSLIM_FILE
    if not path.is_file():
        return None, None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a readable JSON file ({exc}); fix or remove it") from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: not a JSON object of weight name -> quant type")
    return value, str(path)


def config_quant_method(config: dict | None) -> str | None:
    """`config.json`'s `quantization_config.quant_method`, vLLM's own way of naming a checkpoint's scheme."""
    q = (config or {}).get("quantization_config")
    return q.get("quant_method") if isinstance(q, dict) and isinstance(q.get("quant_method"), str) else None


def build(tp: int | None = None, dp: int | None = None, enable_expert_parallel: bool = False, ep: int | None = None,
          quantization: str | None = None, additional_config: str | dict | None = None,
          enforce_eager: bool = False, max_num_seqs: int | None = None, checkpoint: str | None = None,
          config_values: dict | None = None) -> Deployment:
    """The deployment of the engine arguments given (None / False: not given). `checkpoint`: the model's
    folder, where vllm-ascend finds msmodelslim's description; `config_values`: its config.json."""
    for flag, value in (("--tensor-parallel-size", tp), ("--data-parallel-size", dp), ("--ep", ep),
                        ("--max-num-seqs", max_num_seqs)):
        _positive(flag, value)
    extra = additional_config if isinstance(additional_config, dict) else parse_additional_config(additional_config)
    stated = []
    if tp is not None:
        stated.append(f"--tensor-parallel-size {tp}")
    if dp is not None:
        stated.append(f"--data-parallel-size {dp}")
    if enable_expert_parallel:
        stated.append("--enable-expert-parallel")
    if ep is not None:
        stated.append(f"--ep {ep}")
    description, source = read_quant_description(checkpoint) if checkpoint else (None, None)
    method = quantization
    if quantization is not None:
        stated.append(f"--quantization {quantization}")
    elif description is not None:  # detect_quantization_method: msmodelslim first
        method = ASCEND_QUANTIZATION
    else:
        method = config_quant_method(config_values)
    if method == ASCEND_QUANTIZATION and description is None and checkpoint:
        raise UserError(f"--quantization ascend: {checkpoint} has no {MODELSLIM_FILE}; give the checkpoint folder "
                        "msmodelslim wrote")
    if extra:
        stated.append("--additional-config " + json.dumps(extra, sort_keys=True, separators=(",", ":")))
    if enforce_eager:
        stated.append("--enforce-eager")
    if max_num_seqs is not None:
        stated.append(f"--max-num-seqs {max_num_seqs}")
    return Deployment(tp=tp, dp=dp or 1, enable_expert_parallel=enable_expert_parallel or (ep or 1) > 1,
                      ep_size=ep, quantization=method, quant_description=description, quant_source=source,
                      additional_config=extra, enforce_eager=enforce_eager, max_num_seqs=max_num_seqs,
                      stated=tuple(stated))


# the `vllm serve` arguments read from a command line (value-taking ones, then flags); vLLM's spelling
_VALUE_ARGS = {"--tensor-parallel-size": "tp", "-tp": "tp", "--data-parallel-size": "dp", "-dp": "dp",
               "--quantization": "quantization", "--additional-config": "additional_config",
               "--max-num-seqs": "max_num_seqs", "--model": "model"}
_FLAG_ARGS = {"--enable-expert-parallel": "enable_expert_parallel", "-ep": "enable_expert_parallel",
              "--enforce-eager": "enforce_eager"}
_INTS = {"tp", "dp", "max_num_seqs"}


def parse_serve_args(text: str) -> tuple[dict, list[str]]:
    """The engine arguments of a `vllm serve MODEL ...` command line (or just its options): {field: value} for
    `build`, and the options it does not read (said once on stderr by the caller)."""
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"--serve-args: {exc}; quote it as a shell would") from None
    if tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[2:]
    out: dict = {}
    ignored: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, eq, inline = tok.partition("=")
        if name in _VALUE_ARGS:
            if eq:
                value = inline
            elif i + 1 < len(tokens):
                value, i = tokens[i + 1], i + 1
            else:
                raise UserError(f"--serve-args: {name} needs a value")
            key = _VALUE_ARGS[name]
            if key == "additional_config":
                parse_additional_config(value)  # a bad one is said now, before any tree is read
            if key in _INTS:
                try:
                    value = int(value)
                except ValueError:
                    raise UserError(f"--serve-args: {name} {value}: give an integer") from None
            out[key] = value
        elif name in _FLAG_ARGS:
            out[_FLAG_ARGS[name]] = True
        elif not tok.startswith("-") and "model" not in out and not ignored:
            out["model"] = tok
        elif tok.startswith("-"):
            ignored.append(name)
        i += 1
    return out, ignored


def with_default_tp(d: Deployment, tp: int | None) -> Deployment:
    return d if d.tp is not None or tp is None else replace(d, tp=tp)
