"""What each undecided test of a report waits for (issue 45): a configuration field not given, an engine
argument not given, a runtime path (prefill / decode / graph capture), a value only a running batch has, the
layer's index (decided layer by layer), or something the user gave (the configuration, the engine arguments or
vLLM's defaults for them) that the walk did not decide: those are the tool's debt, counted apart (goal: none).

A test is read as the report prints it (one conjunct of an op's condition); what it reads is told by the rules
of walk.yaml `waits_on` (first match wins), and whether that input was given by the configuration facts and the
deployment of the analysis. Nothing here decides a test: it says why the evaluator could not.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..ir.conditions import split_outside

# categories whose input the user gave (or vLLM defaults): an undecided test on them is the tool's debt
GIVEN = "given"
RUNTIME = frozenset({"runtime_path", "batch_value"})


@lru_cache(maxsize=1)
def _rules() -> tuple:
    from ..catalog import catalog

    spec = catalog().walk.get("waits_on") or {}
    return tuple((name, re.compile(rx)) for name, rx in (spec.get("rules") or {}).items())


def test_text(term: str) -> str:
    """A printed conjunct as the test it reads: without `built when`, negations and a computed-from note."""
    t = " ".join(term.split())
    if t.startswith("built when "):
        t = t[len("built when "):]
    while t.startswith("not (") and t.endswith(")") and _balanced(t[5:-1]):
        t = t[5:-1]
    m = re.match(r"^(.*?) \[\w+ = .*\]$", t)
    return m.group(1) if m else t


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def classify(test: str, full: str, config=None, deployment=None, sources=None, reads=None) -> tuple[str, bool | None, str]:
    """(category, whether its input was given, why) of one undecided test; `full` is the printed conjunct
    (a computed-from note names what a local flag reads); `sources(name)`: for each module of the walk whose
    `self.<name>` stayed unknown, the code that attribute is computed from (Constructor.unknown_sources);
    `reads(test)`: the code the parameters it tests are bound to where the caller wrote them (Walker.test_reads)."""
    for name, rx in _rules():
        if rx.search(test) or (name == "layer_index" and rx.search(full)):
            if name == "engine_argument" and _quantisation_open(test, deployment):
                return "quantization", False, _QUANTISATION_OPEN
            return name, *_given(name, test, config, deployment)
    if "self." in test:
        if _no_configuration(config):
            return "construction", False, "an attribute the module's construction sets; no configuration given"
        found = _attribute_input(test, config, deployment, sources) if sources is not None else None
        if found is not None:
            return found
        return "construction", True, "an attribute the module's construction sets from what was given, not traced"
    texts = reads(test) if reads is not None else None
    if texts:  # parameters of the function it is in: what the caller bound them to
        return _parameter_input(texts, config, deployment, sources)
    found = _called_input(test, config, deployment, sources) if sources is not None \
        and not _no_configuration(config) else None
    if found is not None:  # `is_turboquant(vllm_config)`: a function that reads an input not given
        return found
    return "not_traced", None, "a local value the walk did not trace to its inputs"


def _parameter_input(texts: list[str], config, deployment, sources) -> tuple[str, bool | None, str]:
    """What a test on parameters waits on, from the code the caller bound them to, read as a test on that code
    would be (a `self.x` argument as a test on the attribute); an input not given first, then a given one
    (the tool's debt), said with that code; else it stays not traced, saying what it reads."""
    found = []
    for text in texts:
        got = classify(text, text, config, deployment, sources)
        if got[0] != "not_traced":
            found.append((got, text))
    for (name, given, why), text in found:
        if given is False:
            return name, False, f"{why} (a parameter bound to `{_short(text)}`)"
    if found:
        (name, given, why), text = found[0]
        return name, given, f"{why} (a parameter bound to `{_short(text)}`)"
    return "not_traced", None, f"a parameter bound to `{_short(texts[0])}`, not traced further"


def _attribute_input(test: str, config, deployment, sources) -> tuple[str, bool, str] | None:
    """What an undecided test on `self.x` waits on where every module holding `x` computes it from an input
    not given (a configuration field the configuration does not give, --tensor-parallel-size, the runtime path):
    that input's category, with the code it is read in; None where one of them reads only given inputs (the
    tool's debt). A function of the trees the test calls and the walk left undecided (`is_turboquant(
    self.vllm_config)`) is read the same way, through what its returns read (`sources(name)` of the function)."""
    for attr in dict.fromkeys(re.findall(r"self((?:\.\w+)+)", test)):
        # compared by order or computed with: a None there is no value the code runs with (`None > 0` raises)
        ordered = re.search(rf"self{re.escape(attr)}\s*(?:[<>]=?|[-+*/%])|(?:[<>]=?|[-+*/%])\s*self{re.escape(attr)}\b",
                            test) is not None
        for name in reversed(attr.strip(".").split(".")):  # self.layer.expert_gate: expert_gate, then layer
            got = _held_input(name, f"self.{name}", config, deployment, sources, ordered)
            if got is None:
                continue
            if got is not False:
                return got
            break
    return _called_input(test, config, deployment, sources)


def _called_input(test: str, config, deployment, sources) -> tuple[str, bool, str] | None:
    """What a test waits on through a function of the trees it calls that the walk left undecided, where it
    reads an input not given; None otherwise."""
    for name in dict.fromkeys(re.findall(r"(?<![\w.])(\w+)\(", test)):
        got = _held_input(name, f"{name}(...)", config, deployment, sources)
        if got:
            return got
    return None


def _held_input(name: str, shown: str, config, deployment, sources, ordered: bool = False):
    """(category, False, why) where every holder of `name` reads an input not given; False where one reads only
    given inputs; None where none says what it reads. `ordered`: see _not_given."""
    # (a module that assigns it nowhere says nothing; one that holds None, where the test cannot use it)
    held = [texts for texts in (sources(name, with_none=True) if ordered else sources(name)) if texts]
    if not held:
        return None
    found = [_not_given(texts, config, deployment, ordered) for texts in held]
    first = found[0]
    if first is not None and all(f is not None for f in found):
        category, why, text = first
        return category, False, f"{why} ({shown} is computed from `{_short(text)}`)"
    return False


# what an attribute computed in __init__ can wait on (a batch value or the runtime path is no input of a
# construction: a name that looks like one there is not read as one; the layer index is decided per kind); an
# engine argument only where it is the checkpoint's quantisation, not known (_quantisation_open)
_CONSTRUCTION_INPUTS = ("tp_size", "engine_argument", "dtype", "config_field", "quantization", "optional_package")

# what reads the checkpoint's quantisation: vLLM's quantisation config and a layer's quant method, and the KV-cache
# dtype `--kv-cache-dtype auto` resolves from the checkpoint's quantization config (resolve_kv_cache_dtype_string)
_QUANTISATION = re.compile(r"\b(quant_config|quant_method|quantization|cache_dtype|kv_cache_dtype)\b")
# vLLM's quantisation config handed on as an argument (`Indexer(vllm_config, config, quant_config, ...)`,
# `quant_config=quant_config`): not read where it is handed on
_PASSED_ON = re.compile(r"\b(?:quant_config|quantization)\s*=(?!=)|(?:(?<=[(,])(?<!isinstance\()|(?<=[\w\s]=))\s*"
                        r"(?:quant_config|quantization)(?=\s*[,)])")
_QUANTISATION_OPEN = ("the checkpoint's quantisation section (quantization_config), which vLLM reads from its "
                      "config.json, decides it: no config.json read, none stated")


def _quantisation_open(text: str, deployment) -> bool:
    """`text` reads the checkpoint's quantisation and the deployment does not know it: neither stated
    (--quantization) nor read from a config.json or the checkpoint folder (ir/deployment.py quant_known)."""
    # (a construction handed vLLM's quantisation config, `ReplicatedLinear(..., quant_config=quant_config)`, does
    # not read it for what is tested)
    if deployment is None or not _QUANTISATION.search(_PASSED_ON.sub("", text)):
        return False
    return getattr(deployment, "quantization", None) is None and not getattr(deployment, "quant_known", False)


def _not_given(texts: list[str], config, deployment, ordered: bool = False) -> tuple[str, str, str] | None:
    """(category, why, the code) of the first input these texts read that was not given, in the rules' order;
    an attribute only a method sets (Constructor.value_sources: `<set at run time by C.m()>`) is a value the
    object keeps between calls, which the runtime path decides. `ordered`: the test compares the value by order
    (or computes with it), so a configuration field at a None default is no value it can run with: not given.
    First, a configuration field left None that the code computes with (NONE_OPERAND_SOURCE)."""
    for text in texts:
        fields = _none_computed(text, config)
        if fields:
            return ("config_field", "a configuration field its class leaves None where the code computes with it "
                    "(a checkpoint gives it): " + ", ".join(fields), text)
    from ..walk.construction.constructor import RUN_TIME_SOURCE

    head, _, tail = RUN_TIME_SOURCE.partition("{}")
    for text in texts:
        if text.startswith(head) and text.endswith(tail):
            method = text[len(head):len(text) - len(tail)]
            return "runtime_path", f"a value the object keeps between calls: {method}() sets it when it runs", text
    for name, rx in _rules():
        if name not in _CONSTRUCTION_INPUTS:
            continue
        for text in texts:
            if name == "config_field" and not (re.search(r"\bconfig\.\w+(?!\w|\s*\()", text) or _GETATTR.search(text)):
                continue  # a configuration object read without a named field (`model_config.dtype`): no field
            if name == "engine_argument":
                if rx.search(text) and _quantisation_open(text, deployment):
                    return "quantization", _QUANTISATION_OPEN, text
                continue
            if rx.search(text) or (name == "config_field" and _GETATTR.search(text)):
                given, why = _given(name, text, config, deployment, ordered)
                if given is False:
                    return name, why, text
    return None


def _none_computed(text: str, config) -> list[str]:
    """The configuration fields a NONE_OPERAND_SOURCE text reads that hold None by their class's default and
    that no config.json states (a whole config.json stating null is what the user gave)."""
    from ..walk.construction.constructor import NONE_OPERAND_SOURCE

    head, _, tail = NONE_OPERAND_SOURCE.partition("{}")
    if _no_configuration(config) or not (text.startswith(head) and text.endswith(tail)):
        return []
    inner = text[len(head):len(text) - len(tail)]
    fields = dict.fromkeys(re.findall(r"\bconfig\.(\w+)(?!\w|\s*\()", inner) + _GETATTR.findall(inner))
    stated = getattr(config, "values", None) or {}
    return [f for f in fields if f not in stated and _is_none(config, f)]


# (the model's configuration by the names the code gives it: `config`, `self.config`, `hf_config`, `text_config`;
# not vLLM's `vllm_config` / `cache_config`)
_CONFIG_OBJECTS = frozenset({"hf_config", "hf_text_config"})  # the configuration itself, no field of it
_GETATTR = re.compile(r"(?:get|has)attr\(\s*(?:\w+\.)*(?<!\w)(?:hf_|hf_text_|text_)?config,\s*\"(\w+)\"")


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."


def _given(name: str, test: str, config, deployment, ordered: bool = False) -> tuple[bool | None, str]:
    if name == "runtime_path":
        return False, "the runtime path (prefill, decode, graph capture) decides it"
    if name == "batch_value":
        return False, "a value only a running batch has"
    if name == "layer_index":
        return False, "the layer's index: decided layer by layer"
    if name == "tp_size":
        if deployment is not None and getattr(deployment, "tp", None) is not None:
            return True, "the tensor-parallel size is stated"
        return False, "an engine argument not given (--tensor-parallel-size)"
    if name == "optional_package":
        return False, "whether a package outside the trees that the code imports first is installed on the deployment"
    if name == "engine_argument":
        return True, "the engine arguments given (or vLLM's defaults) decide it"
    if name == "dtype":
        from ..config.reader import stated_dtype

        if stated_dtype(getattr(config, "values", None)) is not None:
            return True, "the model dtype (the configuration's dtype, vLLM's --dtype auto)"
        return False, "a configuration field not given (dtype)"
    if name == "quantization":
        if deployment is not None and getattr(deployment, "quant_known", False):
            return True, "the quantisation (stated, or a config.json that names none)"
        return False, "the checkpoint's quantisation section (quantization_config) is not given"
    if name == "config_field":
        # (a method of the configuration, `config.get_text_config()`, is no field; nor the configuration itself
        # read off vLLM's model configuration, `getattr(model_config, "hf_config", None)`)
        fields = [f for f in dict.fromkeys(re.findall(r"\bconfig\.(\w+)(?!\w|\s*\()", test) + _GETATTR.findall(test))
                  if f not in _CONFIG_OBJECTS]
        if not fields and re.search(r"\b(hf_config|hf_text_config)\b", test) and not re.search(r"\bconfig\.\w", test):
            return True, "the model's configuration itself"
        if _no_configuration(config):
            return False, "a configuration field not given (no configuration)"
        # a field given as None that the code reads an item of (`config.layer_types[layer_idx]` where the class
        # leaves layer_types None) has no value the code can use: the checkpoint must give it
        indexed = set(re.findall(r"\bconfig\.(\w+)\s*\[", test))
        missing = [f for f in fields if not _holds(config, f) or (f in indexed and _is_none(config, f))]
        if missing or not fields:
            return False, "a configuration field not given: " + ", ".join(missing or ["(not named)"])
        unset = [f for f in fields if ordered and _none_default(config, f)]
        if unset:  # KimiLinearConfig's `qk_rope_head_dim: int | None = None`, compared `> 0`
            return False, "a configuration field not given: " + ", ".join(unset) + \
                " (its class default None is no value the test compares)"
        return True, "the configuration gives " + ", ".join(fields)
    return None, "not traced"


def _no_configuration(config) -> bool:
    """No configuration: none given and no configuration class found for the model type (the report's
    "no configuration: branches listed as alternatives")."""
    if getattr(config, "values", None) is None:
        return True
    return not config.values and getattr(config, "cls", None) is None


def _holds(config, field: str) -> bool:
    from ..semantics.values import Known

    try:
        return isinstance(config.attr(field, True), Known) or isinstance(config.attr(field, False), Known)
    except Exception:  # a configuration that cannot answer the field: not given
        return False


def _is_none(config, field: str) -> bool:
    from ..semantics.values import Known

    try:
        return all(isinstance(v, Known) and v.value is None for v in (config.attr(field, False), config.attr(field, True)))
    except Exception:  # a configuration that cannot answer the field
        return False


def _none_default(config, field: str) -> bool:
    """The field is None only because no configuration file gives it (its class's default)."""
    from ..semantics.values import Known

    values = getattr(config, "values", None) or {}
    if field in values:
        return False
    try:
        return config.attr(field, True) == Known(None) or config.attr(field, False) == Known(None)
    except Exception:  # a configuration that cannot answer the field
        return False


def undecided(conditions, config=None, deployment=None, sources=None, reads=None) -> list[dict]:
    """The undecided tests of a report's printed conditions, one entry per test: its text, what it waits on
    (`waits_on`), whether that input was given, why, and how many printed conditions hold it (`sources`: see
    classify)."""
    seen: dict[str, dict] = {}
    for cond in conditions:
        if not cond:
            continue
        for part in split_outside(" ".join(cond.split()), " and "):
            test = test_text(part)
            if test not in seen:
                kind, given, why = classify(test, part, config, deployment, sources, reads)
                seen[test] = {"test": test, "waits_on": kind, "given": given, "why": why, "count": 0}
            seen[test]["count"] += 1
    return sorted(seen.values(), key=lambda e: (e["waits_on"], e["test"]))


def bucket(entry: dict) -> str:
    """given (the tool's debt), runtime (a path or a batch value), open (an input not given: a configuration
    field, --tensor-parallel-size, the layer index) or not_traced."""
    if entry["given"] is True:
        return "given"
    if entry["waits_on"] in RUNTIME:
        return "runtime"
    return "open" if entry["given"] is False else "not_traced"


def counts(entries: list[dict]) -> dict:
    """{bucket: n} and {"bucket:category": n} of a report's undecided tests."""
    out = {"given": 0, "runtime": 0, "open": 0, "not_traced": 0}
    for e in entries:
        b = bucket(e)
        out[b] += 1
        out[f"{b}:{e['waits_on']}"] = out.get(f"{b}:{e['waits_on']}", 0) + 1
    return out
