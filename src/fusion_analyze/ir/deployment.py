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
    # whether the quantisation is known: stated, found in the checkpoint folder, or read from a config.json that
    # names none (vLLM's `vllm_config.quant_config` is then None); False where no configuration was read
    quant_known: bool = field(default=False, compare=False)
    additional_config: dict = field(default_factory=dict, compare=False)  # --additional-config JSON
    enforce_eager: bool = False  # --enforce-eager
    max_num_seqs: int | None = None  # --max-num-seqs; None: vLLM's default
    optimization_level: str | None = None  # -O / --optimization-level (vllm/config/vllm.py OptimizationLevel)
    compilation_config: dict = field(default_factory=dict, compare=False)  # -cc / --compilation-config JSON
    speculative_config: dict | None = field(default=None, compare=False)  # -sc / --speculative-config JSON
    kv_cache_dtype: str | None = None  # --kv-cache-dtype; None: vLLM's "auto"
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
    def pcp(self) -> int:
        """Prefill context parallelism: no option of this tool states it, so vLLM's default (1)."""
        return 1

    @property
    def num_seqs(self) -> int:
        return self.max_num_seqs or DEFAULT_MAX_NUM_SEQS

    @property
    def no_compile(self) -> str | None:
        """Why vLLM compiles nothing, so that no graph pass runs (None: it compiles): --enforce-eager (vllm-ascend
        sets the compilation mode NONE, vllm_ascend/platform.py), -O0 (vLLM's OptimizationLevel.O0: no
        compilation, no graphs), or a compilation mode other than VLLM_COMPILE (3): NONE runs the model as it is,
        and vllm-ascend sets the others to NONE (platform.py `mode not in [NONE, VLLM_COMPILE]`)."""
        if self.enforce_eager:
            return "--enforce-eager"
        if self.optimization_level == "0":
            return "-O0"
        mode = self.compilation_config.get("mode", self.compilation_config.get("level"))
        if mode is not None and str(mode).upper() not in ("3", "VLLM_COMPILE"):
            return f"--compilation-config mode {mode}"
        return None

    @property
    def graph_mode(self) -> bool:
        """Whether decode is captured in graphs: not with --enforce-eager, -O0 (no graphs) or cudagraph_mode NONE."""
        if self.enforce_eager or self.optimization_level == "0":
            return False
        return str(self.compilation_config.get("cudagraph_mode", "")).upper() != "NONE"

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
            "optimization_level": self.optimization_level, "compilation_config": self.compilation_config,
            "speculative_config": self.speculative_config, "kv_cache_dtype": self.kv_cache_dtype or "auto",
            "graph_passes": self.no_compile is None, "graph_capture": self.graph_mode,
        }

    def quant_types(self) -> dict:
        """{quant type: number of weights} of the checkpoint's description ("FLOAT" included)."""
        out: dict = {}
        for key, value in sorted((self.quant_description or {}).items()):
            if key.endswith(".weight") and isinstance(value, str):
                out[value] = out.get(value, 0) + 1
        return out

    # ----- what the code reads of vLLM's configuration objects
    def engine_fields(self) -> tuple[dict, set]:
        """({EngineArgs field: value}, {fields stated otherwise}) of the engine arguments stated: the field of an
        option is its long name (`--kv-cache-dtype` -> `kv_cache_dtype`, vLLM's `add_cli_args`); a scalar value is
        given as such, a JSON or level option only said to be stated (its value is no plain field)."""
        given = {s.split()[0] for s in self.stated}
        values, other = {}, set()
        for option, name in READ.items():
            field_name = option[2:].replace("-", "_")
            value = getattr(self, name, None)
            if option in given and isinstance(value, (str, int, bool)):
                values[field_name] = value
            elif option in given:
                other.add(field_name)
        if any(g.startswith("-O") for g in given):
            other.add("optimization_level")
        if "--ep" in given:
            other.update({"enable_expert_parallel", "expert_parallel_size"})
        return values, other

    def vllm_config(self, num_experts: int | None) -> dict:
        """vLLM's `vllm_config` as the code reads it (attribute by attribute), for the values this deployment
        states or vLLM defaults; a key ending in `()` is what the method of that name returns."""
        parallel = {"tensor_parallel_size": self.tp_size, "data_parallel_size": self.dp,
                    "pipeline_parallel_size": 1, "enable_expert_parallel": self.uses_ep,
                    "world_size_across_dp": self.world_size_across_dp, "world_size": self.tp_size,
                    "prefill_context_parallel_size": self.pcp, "decode_context_parallel_size": 1}
        model = {"get_num_experts()": num_experts} if num_experts is not None else {}  # unknown: not made up
        out = {"parallel_config": parallel, "model_config": model, "lora_config": None,
               "kv_transfer_config": None, "speculative_config": None}
        if self.quantization is None and self.quant_known:  # VllmConfig._get_quantization_config: None
            out["quant_config"] = None
        return out


def _positive(flag: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UserError(f"{flag} {value}: give a positive integer")


def parse_additional_config(text: str | dict | None, flag: str = "--additional-config",
                            example: str = '{"enable_fused_mc2": true}') -> dict:
    """`--additional-config '{"enable_fused_mc2": true}'`: a JSON object (vllm-ascend's additional_config); the
    same for --compilation-config and --speculative-config (`flag`)."""
    if isinstance(text, dict):
        return text
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{flag}: not JSON ({exc.msg} at column {exc.colno}); give a JSON object "
                        f"such as '{example}'") from None
    if not isinstance(value, dict):
        raise UserError(f"{flag}: give a JSON object such as '{example}'")
    return value


def parse_compilation_config(text: str | dict | None) -> dict:
    """-cc / --compilation-config: a JSON object, or vLLM's short form, the mode alone (`-cc 0`)."""
    if isinstance(text, str) and text.strip().isdigit():
        return {"mode": int(text)}
    return parse_additional_config(text, "--compilation-config", '{"mode": 0}')


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


def _names_no_quantisation(config: dict | None) -> bool:
    """A config.json read that carries no quantisation section, nor its text part (vLLM's
    ModelArchConfigConvertor.get_quantization_config reads `quantization_config`, else `compression_config`)."""
    if config is None:
        return False
    text = config.get("text_config")
    return not any(key in part for part in (config, text if isinstance(text, dict) else {})
                   for key in ("quantization_config", "compression_config"))


def build(tp: int | None = None, dp: int | None = None, enable_expert_parallel: bool = False, ep: int | None = None,
          quantization: str | None = None, additional_config: str | dict | None = None,
          enforce_eager: bool = False, max_num_seqs: int | None = None, checkpoint: str | None = None,
          config_values: dict | None = None, optimization_level: str | int | None = None,
          compilation_config: str | dict | None = None, speculative_config: str | dict | None = None,
          kv_cache_dtype: str | None = None) -> Deployment:
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
    level = None if optimization_level is None else str(optimization_level)
    if level is not None:
        stated.append(f"-O{level}")
    compilation = parse_compilation_config(compilation_config)
    if compilation:
        stated.append("--compilation-config " + json.dumps(compilation, sort_keys=True, separators=(",", ":")))
    speculative = parse_additional_config(speculative_config, "--speculative-config",
                                          '{"method": "mtp", "num_speculative_tokens": 1}') or None
    if speculative:
        stated.append("--speculative-config " + json.dumps(speculative, sort_keys=True, separators=(",", ":")))
    if kv_cache_dtype is not None:
        stated.append(f"--kv-cache-dtype {kv_cache_dtype}")
    return Deployment(tp=tp, dp=dp or 1, enable_expert_parallel=enable_expert_parallel or (ep or 1) > 1,
                      ep_size=ep, quantization=method, quant_description=description, quant_source=source,
                      quant_known=method is not None or _names_no_quantisation(config_values),
                      additional_config=extra, enforce_eager=enforce_eager, max_num_seqs=max_num_seqs,
                      optimization_level=level, compilation_config=compilation, speculative_config=speculative,
                      kv_cache_dtype=kv_cache_dtype, stated=tuple(stated))


# The `vllm serve` options the deployment reads, by vLLM's long name -> the field of `build`; their short forms
# and which options are flags come from the vLLM tree (semantics/engine_args.py serve_options: EngineArgs.add_cli_args).
READ = {"--tensor-parallel-size": "tp", "--data-parallel-size": "dp", "--enable-expert-parallel": "enable_expert_parallel",
        "--quantization": "quantization", "--additional-config": "additional_config",
        "--enforce-eager": "enforce_eager", "--max-num-seqs": "max_num_seqs",
        "--optimization-level": "optimization_level", "--compilation-config": "compilation_config",
        "--speculative-config": "speculative_config", "--kv-cache-dtype": "kv_cache_dtype", "--model": "model"}
_INTS = {"tp", "dp", "max_num_seqs"}
_JSON = {"additional_config", "compilation_config", "speculative_config"}
# before a tree is read (the command's first check): the spellings vLLM 0.30 declares for what READ reads
_FALLBACK = ({**{k: k for k in READ}, "-tp": "--tensor-parallel-size", "-dp": "--data-parallel-size",
              "-q": "--quantization", "-ep": "--enable-expert-parallel", "-cc": "--compilation-config",
              "-sc": "--speculative-config"}, {"--enable-expert-parallel", "--enforce-eager"})


def parse_serve_args(text: str, options: tuple | None = None) -> tuple[dict, list[str]]:
    """The engine arguments of a `vllm serve MODEL ...` command line (or just its options): {field: value} for
    `build`, and the options it does not read (said once on stderr by the caller). `options`: (spelling -> long
    name, the long names that are flags) as the vLLM tree declares them; -O3 / -O 3 / -O=3 are
    --optimization-level 3 and `--x.y v` sets key y of the JSON option x, as vLLM's FlexibleArgumentParser
    reads them (vllm/utils/argparse_utils.py)."""
    spellings, flags = (options or _FALLBACK)[:2]
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
        if tok.startswith("-O") and not tok.startswith("--") and tok != "-O":  # -O0, -O=0
            tok = "--optimization-level=" + (tok[3:] if tok[2:3] == "=" else tok[2:])
        elif tok == "-O" and i + 1 < len(tokens) and tokens[i + 1] in {"0", "1", "2", "3"}:
            tok = "--optimization-level"
        name, eq, inline = tok.partition("=")
        name, dot, key = name.partition(".") if name.startswith("-") else (name, "", "")
        if name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        long = spellings.get(name)
        if not tok.startswith("-"):
            if "model" not in out:
                out["model"] = tok
            i += 1
            continue
        negated = long is not None and name.startswith("--no-") and long != name
        takes_value = long is not None and long not in flags
        if long is None:  # not an engine argument of the tree (a frontend option, a typo): its value, if any, skipped
            ignored.append(name)
            if not eq and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                i += 1
            i += 1
            continue
        value: object = not negated
        if takes_value:
            if eq:
                value = inline
            elif i + 1 < len(tokens):
                value, i = tokens[i + 1], i + 1
            else:
                raise UserError(f"--serve-args: {name} needs a value")
        field_name = READ.get(long)
        if field_name is None:
            ignored.append(long)
            i += 1
            continue
        if field_name in _JSON:
            if dot:  # --compilation-config.mode 0
                got = out.get(field_name) or {}
                try:
                    parsed = json.loads(str(value))
                except json.JSONDecodeError:
                    parsed = value
                value = {**got, key: parsed}
            elif field_name == "compilation_config":
                value = parse_compilation_config(str(value))  # a bad one is said now, before any tree is read
            else:
                value = parse_additional_config(str(value), long)
        if field_name in _INTS:
            try:
                value = int(str(value))
            except ValueError:
                raise UserError(f"--serve-args: {name} {value}: give an integer") from None
        out[field_name] = value
        i += 1
    return out, ignored


def with_default_tp(d: Deployment, tp: int | None) -> Deployment:
    return d if d.tp is not None or tp is None else replace(d, tp=tp)
