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
    return "not_traced", None, "a local value the walk did not trace to its inputs"


def _parameter_input(texts: list[str], config, deployment, sources) -> tuple[str, bool | None, str]:
    """What a test on parameters waits on, from the code the caller bound them to, read as a test on that code
    would be (a `self.x` argument as a test on the attribute, where what it is computed from is read); an input
    not given first, then a given one (the tool's debt), said with that code; else it stays not traced, saying
    what it reads."""
    found = []
    for text in texts:
        got = classify(text, text, config, deployment, sources)
        # (an attribute whose sources were not read is no evidence of what it reads: `D.stride(-1)` of a weight)
        if got[0] != "not_traced" and not (got[0] == "construction" and got[1] is True):
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
    tool's debt)."""
    for attr in dict.fromkeys(re.findall(r"self((?:\.\w+)+)", test)):
        for name in reversed(attr.strip(".").split(".")):  # self.layer.expert_gate: expert_gate, then layer
            held = [texts for texts in sources(name) if texts]  # (a module that assigns it nowhere says nothing)
            if not held:
                continue
            found = [_not_given(texts, config, deployment) for texts in held]
            first = found[0]
            if first is not None and all(f is not None for f in found):
                category, why, text = first
                return category, False, f"{why} (self.{name} is computed from `{_short(text)}`)"
            break
    return None


# what an attribute computed in __init__ can wait on (a batch value or the runtime path is no input of a
# construction: a name that looks like one there is not read as one; the layer index is decided per kind)
_CONSTRUCTION_INPUTS = ("tp_size", "dtype", "config_field")


def _not_given(texts: list[str], config, deployment) -> tuple[str, str, str] | None:
    """(category, why, the code) of the first input these texts read that was not given, in the rules' order."""
    for name, rx in _rules():
        if name not in _CONSTRUCTION_INPUTS:
            continue
        for text in texts:
            if name == "config_field" and not (re.search(r"\bconfig\.\w+(?!\w|\s*\()", text) or _GETATTR.search(text)):
                continue  # a configuration object read without a named field (`model_config.dtype`): no field
            if rx.search(text) or (name == "config_field" and _GETATTR.search(text)):
                given, why = _given(name, text, config, deployment)
                if given is False:
                    return name, why, text
    return None


_GETATTR = re.compile(r"(?:get|has)attr\(\s*(?:\w+\.)*\w*config,\s*\"(\w+)\"")


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."


def _given(name: str, test: str, config, deployment) -> tuple[bool | None, str]:
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
    if name == "engine_argument":
        return True, "the engine arguments given (or vLLM's defaults) decide it"
    if name == "dtype":
        from ..config.reader import stated_dtype

        if stated_dtype(getattr(config, "values", None)) is not None:
            return True, "the model dtype (the configuration's dtype, vLLM's --dtype auto)"
        return False, "a configuration field not given (dtype)"
    if name == "config_field":
        # (a method of the configuration, `config.get_text_config()`, is no field)
        fields = list(dict.fromkeys(re.findall(r"\bconfig\.(\w+)(?!\w|\s*\()", test) + _GETATTR.findall(test)))
        if _no_configuration(config):
            return False, "a configuration field not given (no configuration)"
        missing = [f for f in fields if not _holds(config, f)]
        if missing or not fields:
            return False, "a configuration field not given: " + ", ".join(missing or ["(not named)"])
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
