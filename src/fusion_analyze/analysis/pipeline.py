"""The pipeline: sources -> locate -> index -> walk -> match -> status -> estimate -> render."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import UserError
from ..locate.resolve import Location
from .session import Session
from ..render.json import to_json
from ..ir.ops import WalkResult
from ..ir.texts import say
from ..status.waits import undecided
from ..semantics.environment import Environment
from ..walk.walker import Walker


@dataclass
class Analysis:
    session: Session
    location: Location
    walk: WalkResult
    opportunities: list = field(default_factory=list)
    passes: dict = field(default_factory=dict)
    benefits: dict = field(default_factory=dict)  # opportunity id -> Benefit
    shapes: object = None
    device: dict = field(default_factory=dict)
    tp: int | None = None
    steps: dict = field(default_factory=dict)  # scenario -> estimate.cost.StepModel (empty without dimensions)
    ep: int = 1
    errors: list = field(default_factory=list)  # files of the trees this analysis could not read
    configuration: object = None  # walk.config.model_config.ConfigFacts: what decided the walk
    report: dict = field(default_factory=dict)  # the JSON report, built once (render/json.py)
    deployment: object = None  # ir.deployment.Deployment: what the report answers for
    mc2_capacity: int | None = None  # the MC2 token capacity the deployment gives (semantics/environment.py)
    compile_path: dict | None = None  # which compiler runs the graph (passes/compile_path.py), for the report
    memory: dict | None = None  # whether the weights fit one card (estimate/memory.py)


@dataclass
class Options:
    """What the estimate needs besides the trees: shapes, TP degree and the device profile."""

    config: str | None = None
    tp: int | None = None
    ep: int | None = None
    device: str | None = None
    device_profile: str | None = None
    hf_root: str | None = None  # a transformers tree (path or transformers==X) for configuration defaults
    # the rest of the deployment, in vLLM's engine-argument names (ir/deployment.py)
    dp: int | None = None
    enable_expert_parallel: bool = False
    quantization: str | None = None
    additional_config: str | None = None
    enforce_eager: bool = False
    max_num_seqs: int | None = None
    optimization_level: str | None = None
    compilation_config: str | None = None
    speculative_config: str | None = None
    kv_cache_dtype: str | None = None
    serve_args: str | None = None  # a `vllm serve ...` command line: its engine arguments, under the options above

    def engine_args(self, index=None) -> dict:
        """The deployment's engine arguments: `serve_args` first (read with the option names and short forms the
        vLLM tree of `index` declares), the options given one by one over it."""
        from ..ir.deployment import parse_serve_args
        from ..semantics.engine_args import serve_options

        out: dict = {}
        if self.serve_args:
            out, ignored = parse_serve_args(self.serve_args, serve_options(index) if index is not None else None)
            if ignored:
                from ..errors import warn

                warn(say("serve_args_ignored", options=", ".join(ignored)))
        for key in ("tp", "dp", "quantization", "additional_config", "max_num_seqs", "optimization_level",
                    "compilation_config", "speculative_config", "kv_cache_dtype"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        for key in ("enable_expert_parallel", "enforce_eager"):
            if getattr(self, key):
                out[key] = True
        if self.ep is not None:
            out["ep"] = self.ep
        return out


def analyze(model: str, vllm_root, ascend_root, backend, patterns_dir=None, options: Options | None = None,
            cache: bool = True) -> Analysis:
    session = Session.open(vllm_root, ascend_root, backend, patterns_dir, cache, read_passes=True)
    try:
        return analyze_in(session, model, options)
    finally:
        session.stop_passes()  # a bad option fails before analyze_in collects the passes


def analyze_in(session: Session, model: str, options: Options | None = None) -> Analysis:
    from ..estimate.benefit import device_profile

    options = options or Options()
    if options.tp is not None and options.tp < 1:
        raise UserError(f"--tp {options.tp}: the tensor-parallel size is a positive integer")
    if options.ep is not None and options.ep < 1:
        raise UserError(f"--ep {options.ep}: the expert-parallel size is a positive integer")
    device = device_profile(options.device, options.device_profile)
    index = session.index
    engine = _checked_engine_args(session, options)  # against the trees, before any model is walked
    # what every model reads (registry, Ascend overrides and patches, graph passes) is read once per session;
    # its unreadable files belong to every report, the rest only to the model that asked for them
    session.start_passes()  # in a child, while this process reads the rest and walks the model
    try:
        session.resolver.overrides, session.resolver.patches
        hf = session.hf_tree(options.hf_root)
        if hf is not None:  # the Transformers backend's models live there (config/transformers_auto.py)
            index.trees.setdefault("transformers", hf)
        if session.shared_errors is None:
            session.shared_errors = set(index.touched)
        index.touched = set(session.shared_errors)
        loc = session.resolver.resolve(model)
        return _analyze_located(session, model, options, loc, device, engine)
    finally:
        session.stop_passes()


def _checked_engine_args(session: Session, options: Options) -> dict:
    """The engine arguments, checked as the trees check them (semantics/engine_args.py): `--additional-config`
    against vllm-ascend's configuration classes, `--quantization` against the methods the trees register."""
    from ..ir.deployment import parse_additional_config
    from ..semantics.engine_args import check_additional_config, check_quantization

    engine = options.engine_args(session.index)
    if session.backend == "ascend" and session.ascend is not None:
        check_additional_config(session.index, parse_additional_config(engine.get("additional_config")))
    check_quantization(session.index, engine.get("quantization"), session.backend if session.ascend else None)
    return engine


def _analyze_located(session: Session, model: str, options: Options, loc: Location, device: dict,
                     engine: dict | None = None) -> Analysis:
    from ..estimate.benefit import apply_fused, estimate, step_models
    from ..estimate.cost import Parallel
    from ..config.reader import preset_for, read_config
    from ..estimate.shapes import Shapes, load_shapes
    from ..passes.guards import decide_guards
    from ..status.derive import derive

    index = session.index
    # --config (or the model query's config.json, or the preset the query names), read once: the walk's facts
    # and the estimate's shapes
    spec = options.config or loc.config_path or (model if model.endswith(".json") else None)
    named = options.config is not None
    if spec is None:  # `fusion-analyze Qwen3-8B` (or Qwen/Qwen3-8B): that checkpoint's preset, as `--config Qwen3-8B`
        spec = preset_for(loc.name or model, loc.architecture)
        named = spec is not None
    read = read_config(spec) if spec else None
    facts = _facts(session, loc, options, spec, read)
    shapes = load_shapes(read, facts.cls) if named else Shapes()
    if not named and read is not None:
        try:  # the model was named by its config.json: its dimensions serve the estimate too
            shapes = load_shapes(read, facts.cls)
        except UserError:
            pass
    _served_by_transformers(session, loc, facts)
    deployment = _deployment(options, loc, read, engine)
    memory = _memory_fit(shapes, read, deployment, device)
    if not deployment.graph_mode:  # --enforce-eager, -O0: no graph capture, every path runs eager
        device = {**device, "scenarios": {k: {**v, "mode": "eager"} for k, v in device["scenarios"].items()}}
    env = _environment(session, device, facts, deployment)
    env = replace(env, transformers_backend=_transformers_backend(loc))
    walker = Walker(session.index, session.resolver.replacements, env)
    result = walker.walk_model(_walked_class(session, loc))
    _warn_blockers(result.blockers, session.backend)
    ascend, cuda = session.passes()  # joins the child: the shared errors now include the passes' ones
    ascend = decide_guards(env, ascend, result.ops)  # what each pass's __init__ checks, for this model
    path = _compile_path(session, deployment, ascend)
    from ..catalog import catalog

    # vLLM compiles only the modules whose class carries @support_torch_compile: a model with none is run
    # eagerly, and no graph pass fuses anything in it (on either backend)
    uncompiled = None if result.compiled_by or not catalog().runtime.get("compile_decorators") else say(
        "model_not_compiled", decorator=", ".join(f"@{d}" for d in catalog().runtime["compile_decorators"]))
    ascend = _passes_for(deployment, ascend, path, uncompiled)
    if uncompiled is not None:
        cuda = _passes_for(None, cuda, None, uncompiled)
        if path is not None and not path[1].get("note"):  # the compile section says so too
            path = (path[0], {**path[1], "note": str(say("no_compile_no_passes", why=uncompiled))})
    from ..passes.cuda_passes import inductor_default

    opps = derive(result.ops, session.patterns, session.backend, ascend, cuda, inductor_default(session.index))
    par = Parallel(deployment.tp_size, deployment.ep)
    models = step_models(result.ops, shapes, device, par, [kd["count"] for kd in result.layer_kinds])
    apply_fused(models, opps)
    benefits = {o.id: estimate(o, models, shapes, device, par, deployment.tp is not None) for o in opps}
    a = Analysis(session, loc, result, opps, {"ascend": ascend, "cuda": cuda}, benefits, shapes, device, deployment.tp,
                 models, par.ep, index.errors_touched(), configuration=facts, deployment=deployment,
                 mc2_capacity=env.mc2_capacity, compile_path=path[1] if path else None, memory=memory)
    a.report = to_json(a)  # before save_lines: the line numbers it asks for are cached with the trees
    # every test the walk left open, with what it waits on (status/waits.py): given inputs are the tool's debt;
    # an op's kernels' own conditions (the tests of its implementation's code) count too
    printed = [c for op in a.report["ops"]
               for c in [op.get("condition")] + [k.get("condition") for k in op.get("kernels") or ()]]
    a.report["undecided"] = undecided(printed, facts, deployment, walker.ctor.unknown_sources, walker.test_reads.get)
    session.index.save_lines()
    return a


def _compile_path(session: Session, deployment, passes: list) -> tuple | None:
    """(the CompilePath, its report section) on the Ascend backend: the compiler that runs the graph for this
    deployment, where each pass registers its patterns, and the tree's release-note lines on fusions."""
    if session.backend != "ascend" or "vllm_ascend" not in session.index.trees:
        return None
    from ..passes.compile_path import for_deployment, registries, release_notes

    path = for_deployment(session.index, deployment)
    regs = {p.name: {k: c.to_json() for k, c in sorted(registries(session.index, _module_of(p.file)).items())}
            for p in passes}
    return path, {**path.to_json(), "registrations": regs, "release_notes": release_notes(session.index)}


def _module_of(rel: str) -> str:
    return rel[:-3].replace("/", ".") if rel.endswith(".py") else rel.replace("/", ".")


def _warn_blockers(blockers: list[dict], backend: str) -> None:
    """A warning on stderr for each raise the walked deployment surely reaches (walk/blockers.py)."""
    from ..errors import warn

    for b in blockers:
        warn(say("blocker", backend=backend, where=b["in"], raises=b["raises"], file=b["file"], line=b["line"],
                 when=b["when"]))


def _memory_fit(shapes, read, deployment, device: dict) -> dict | None:
    """Whether the weights one rank keeps fit the device's memory (estimate/memory.py); a warning on stderr where
    they do not, with the smallest TP / EP that holds them."""
    from ..errors import warn
    from ..estimate.memory import advice, fit

    got = fit(shapes.dims, read.values if read is not None else None, deployment, device, shapes.dtype_bytes)
    if got is not None and not got["fits"]:
        warn(say("memory_no_fit", weights=got["weights_gib"], memory=got["memory_gib"], device=got["device"],
                 tp=deployment.tp_size, ep=deployment.ep, fits=advice(got)))
    return got


def _passes_for(deployment, passes: list, path: tuple | None = None, uncompiled=None) -> list:
    """The graph passes as the deployment runs them: none where nothing is compiled (--enforce-eager, -O0, a
    compilation mode other than VLLM_COMPILE: vllm_ascend/platform.py turns compilation off), none whose patterns
    are not registered with the compiler that runs (passes/compile_path.py), and each flag the user's
    --additional-config sets (`{"ascend_compilation_config": {"fuse_norm_quant": false}}`) at the user's value."""
    from dataclasses import replace

    from ..passes.compile_path import EAGER

    compiled = path[0] if path else None
    off = deployment.no_compile if deployment is not None else None
    if off is None and uncompiled is not None:  # the model's classes carry no compile decorator
        off = uncompiled
    if off is None and compiled is not None and compiled.compiler == EAGER:
        off = "compilation mode NONE"
    registered = path[1]["registrations"] if path else {}
    skipped = {p.name for p in passes if compiled is not None and compiled.registry and registered.get(p.name)
               and compiled.registry not in registered[p.name]}
    if off is None and not skipped and (deployment is None or not deployment.additional_config):
        return passes
    given = _flags(deployment.additional_config) if deployment is not None else {}
    out = []
    for p in passes:
        if off is not None:
            p = replace(p, flag=p.flag or "compilation", default=say("no_compile_no_passes", why=off),
                        default_file=None, default_line=None, not_compiled=off)
        elif p.name in skipped and compiled is not None:
            at = compiled.evidence[-1] if compiled.evidence else None
            p = replace(p, flag=p.flag or "compilation", default_file=None, default_line=None,
                        default=say("compiler_skips_pass", compiler=compiled.compiler, registry=compiled.registry,
                                    where=f"{at.file}:{at.line}" if at else "?"))
        elif p.flag and p.flag in given:
            p = replace(p, default=say("flag_given", value=given[p.flag]), default_file=None, default_line=None)
        out.append(p)
    return out


def _flags(config: dict, out: dict | None = None) -> dict:
    """Every leaf key of a (nested) --additional-config, as `str(value)` in Python's spelling."""
    out = {} if out is None else out
    for k, v in config.items():
        if isinstance(v, dict):
            _flags(v, out)
        else:
            out[k] = str(v).capitalize() if isinstance(v, bool) else str(v)
    return out


def _walked_class(session: Session, loc: Location):
    """The class that runs: on the Ascend backend, the class vllm-ascend registers for the architecture
    (`ModelRegistry.register_model` in vllm_ascend/models/__init__.py), else the registry's class."""
    from ..index.modules import Definition

    from ..locate.resolve import Evidence, verify

    o = loc.ascend_override
    if session.backend == "ascend" and o is not None:
        found = session.index.lookup(o.module, o.class_name)
        if isinstance(found, Definition) and found.kind == "class":
            reg = session.index.get("vllm_ascend.models")
            lines = reg.text().splitlines() if reg is not None else []
            at = next((i for i, t in enumerate(lines, 1) if f'"{o.architecture}"' in t), None)
            said = Evidence(reg.rel, at, lines[at - 1].strip()) if reg is not None and at else None
            family = found.name.removeprefix("Ascend")
            own = verify(found.module, [found.name, family], limit=4)
            loc.verification = ([Evidence(found.module.rel, found.line, f"class {found.name}")]
                                + [e for e in own if e.line != found.line]
                                + ([said] if said else []) + loc.verification)
            return found
    return loc.definition


def _deployment(options: Options, loc: Location, read, engine: dict | None = None):
    """The deployment the report answers for: the engine arguments given, the checkpoint folder's
    quantisation description (the model query's folder, or --config's), vLLM's defaults for the rest."""
    from ..ir.deployment import build

    engine = dict(engine if engine is not None else options.engine_args())
    engine.pop("model", None)
    folder = None
    for path in (options.config, loc.config_path):
        if path and Path(path).is_file():
            folder = str(Path(path).parent)
            break
        if path and Path(path).is_dir():
            folder = path
            break
    return build(**engine, checkpoint=folder, config_values=read.values if read is not None else None)


def _environment(session: Session, device: dict, facts, deployment=None) -> Environment:
    """The one environment of this analysis: backend, the device (its SoC family, and its hardware profile
    where the vllm-ascend tree has a profile table), the trees, the configuration facts, the deployment."""
    from ..passes.hardware import read_profiles

    scenarios = dict(device.get("scenarios") or {})
    if session.backend != "ascend":
        return Environment(session.backend, session.index, config=facts, deployment=deployment, scenarios=scenarios)
    hardware = read_profiles(session.index).get(device.get("soc"))
    soc = hardware.soc if hardware is not None else device.get("soc")
    return Environment(session.backend, session.index, soc=soc, hardware=hardware, config=facts,
                       deployment=deployment, scenarios=scenarios)


def _transformers_backend(loc: Location) -> bool | None:
    """Whether the registry serves the model through vLLM's Transformers modeling backend (ModelConfig's
    `using_transformers_backend()`, which `use_mla` reads); None where the registry entry is not known."""
    from ..catalog import catalog

    entry = getattr(loc, "entry", None)
    module = getattr(entry, "module", None)
    return None if module is None else module == catalog().typed.hf_fusers.backend_module


def _served_by_transformers(session: Session, loc: Location, facts) -> None:
    """An architecture vLLM serves through its Transformers modeling backend: its layers are in the transformers
    tree's modeling file. Without that tree it cannot be analyzed (an empty report would be a wrong answer);
    with it, the registry line and the modeling file's class are the evidence."""
    from ..catalog import catalog
    from ..locate.resolve import Evidence
    from ..config.transformers_auto import find_class

    if loc.entry.module != catalog().typed.hf_fusers.backend_module:
        return
    reg = session.index.get("vllm.model_executor.models.registry")
    registry = [Evidence(reg.rel, loc.entry.line, reg.text().splitlines()[loc.entry.line - 1].strip())] if reg else []
    tree = session.index.trees.get(catalog().typed.hf_fusers.package)
    if tree is None:
        raise UserError(say("hf_backend_no_tree", arch=loc.architecture, table=loc.entry.table, line=loc.entry.line))
    cls = find_class(session.index, tree, facts.model_type, loc.architecture) if facts.model_type else None
    if cls is None:
        raise UserError(say("hf_backend_no_class", arch=loc.architecture, version=tree.version or "",
                            model_type=facts.model_type))
    loc.verification = registry + [Evidence(cls.module.rel, cls.line, f"class {cls.name}")] + [
        e for e in loc.verification if e.file != cls.module.rel]


def _facts(session: Session, loc: Location, options: Options, spec: str | None, read):
    """What decides the walk: --config (or the model query's config.json) over the defaults of the model type's
    configuration class, read from vLLM's configs and the transformers tree (--hf-root, else an installed one)."""
    from pathlib import Path

    from ..config.model_config import load_facts

    trees = [session.vllm] + [t for t in (session.hf_tree(options.hf_root), session.ascend) if t is not None]
    # the Ascend replacement index: a platform patch may register the model type's configuration class
    replacements = session.resolver.replacements if session.index.backend == "ascend" else None
    return load_facts(loc.architecture, Path(loc.file).stem, trees, spec, read, replacements)


def render(a: Analysis, fmt: str, template: str | None = None, lang: str = "zh") -> str:
    if fmt == "json":
        from ..render.json_text import dumps

        return dumps(a.report) + "\n"  # json.dumps(indent=2, sort_keys=True, ensure_ascii=False), byte for byte
    if fmt == "md":
        from ..render.markdown import render_markdown

        return render_markdown(a, template, lang)
    raise UserError(f"unknown --format {fmt}: use md or json")


def write_output(a: Analysis, fmt: str, output: str | None, template: str | None = None, lang: str = "zh") -> None:
    write_text(render(a, fmt, template, lang), output)


def write_stubs(a: Analysis, output: str) -> None:
    """One importable module: a stub and a PyTorch reference for every open opportunity of the report."""
    from ..render.stubs import stubs_module

    items = [(o.pattern, o.matches[0]) for o in a.opportunities
             if o.status == "open" and not a.benefits[o.id].rejected]
    write_text(stubs_module(items, a.location.architecture), output, flag="--stubs")


def write_text(text: str, output: str | None, flag: str = "-o") -> None:
    """Plain file I/O (never a rich console); a temporary file renamed into place. `flag`: the option that named
    the path, for the error."""
    if output in (None, "-"):
        sys.stdout.write(text)
        return
    from pathlib import Path

    path = Path(output)
    tmp = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # a Ctrl-C never leaves a half-written report
    except OSError as exc:
        _discard(tmp)
        raise UserError(f"cannot write {output}: {exc.strerror or exc}; choose a writable {flag} path")
    except BaseException:  # Ctrl-C while writing: no partial report is left behind
        _discard(tmp)
        raise


def _discard(path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
