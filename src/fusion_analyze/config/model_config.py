"""What is known of the model's configuration: a config.json (or a preset of one), and the defaults of its
configuration class, read statically (never imported) from vLLM's own configs or a transformers tree.

transformers 5 declares a field as an annotated class attribute (`hidden_act: str = "silu"`); older classes and
vLLM's own configs take it as an `__init__` parameter (`hidden_act="silu"`, then `self.hidden_act = hidden_act`).
A field that `__post_init__` / `__init__` computes from others (`self.sliding_window = ... if ... else None`) has
no default to read: it stays unknown. `getattr(config, "x", d)` of a field the class does not declare is `d`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from ..semantics.values import Known, Unknown, Value
from ..ir.texts import joined, say
from .reader import ConfigRead, read_config

# Fields that transformers standardizes after reading a checkpoint (modeling_rope_utils.standardize_rope_params):
# a legacy `rope_scaling` (with `type`) and `rope_theta` become `rope_parameters` with `rope_type`.
_ROPE = "rope_parameters"


@dataclass
class ConfigClass:
    """A configuration class read with CPython ast: its defaults and which fields it computes instead."""

    name: str
    file: str  # relative to its tree
    line: int
    package: str  # "vllm" or "transformers"
    version: str | None
    defaults: dict = field(default_factory=dict)  # field -> literal default
    declared: set = field(default_factory=set)  # every field it declares (literal default or not)
    computed: set = field(default_factory=set)  # fields __post_init__ / __init__ reassign from other values
    attribute_map: dict = field(default_factory=dict)  # alias -> field (GPT-2: hidden_size -> n_embd)
    model_type: str | None = None  # its own `model_type`, where read
    text: "ConfigClass | None" = None  # a multimodal wrapper's text sub-configuration (`sub_configs["text_config"]`)
    wrapper: str | None = None  # for a text sub-configuration used as the model's: the wrapper's name
    # where the class is registered for the model type (vLLM's _CONFIG_REGISTRY, a vllm-ascend platform patch),
    # and the classes that registration wins over (transformers' own class of that type, vLLM's entry)
    registered: "Registration | None" = None
    over: tuple = ()
    inits: tuple = ()  # its `__init__` / `__post_init__` (ast), in the order they run: what computes fields
    elsewhere: set = field(default_factory=set)  # fields its other methods assign (not derived from inits)
    fields: dict = field(default_factory=dict)  # a dataclass field's literal default, before __post_init__ runs
    # its other methods and properties (ast), name -> (def, is a property): `config.is_kda_layer(i)`, `config.is_moe`
    methods: dict = field(default_factory=dict)
    # the names its body (or a base's) gives a value: class attributes, fields with a default, methods and
    # properties; `hasattr(config, name)` holds for them whatever the configuration gives
    class_attrs: set = field(default_factory=set)
    # its __init__ sets `self.rope_parameters` only after `super().__init__(...)` (vLLM's OlmoHybridConfig):
    # transformers' base finds none to standardize when it runs (PreTrainedConfig.__post_init__ standardizes an
    # existing `rope_parameters`), and vLLM's patch_rope_parameters does only from a `rope_theta` it is given
    rope_late: bool = False
    bases: tuple = ()  # the names of the class's own bases, as its `class` statement writes them

    def to_json(self) -> dict:
        out = {"class": self.name, "file": self.file, "line": self.line, "package": self.package,
               "version": self.version}
        if self.wrapper:
            out["text_config_of"] = self.wrapper
        if self.registered is not None:
            r = self.registered
            out["registered"] = {"model_type": r.model_type, "file": r.file, "line": r.line, "by": r.package,
                                 "over": list(self.over)}
        return out


@dataclass(frozen=True)
class Registration:
    """A configuration class registered for a model type: vLLM's `_CONFIG_REGISTRY` entry, or a vllm-ascend
    platform patch's `_CONFIG_REGISTRY["glm5_next"] = Glm5NextConfig` (a later one wins, as at run time)."""

    model_type: str
    class_name: str
    module: str | None  # the module that defines it; "transformers": transformers' class of that name
    file: str  # where it is registered
    line: int
    package: str  # the tree that registers it: vllm or vllm_ascend
    tests: tuple = ()  # the `if` tests a patch's registration stands under


_BASE_NAMES = frozenset({"PreTrainedConfig", "PretrainedConfig"})  # transformers' base configuration class


class ConfigFacts:
    """Answers `config.x` for the evaluator. `complete`: `values` is a checkpoint's whole config.json (a field it
    lacks is the class default, or absent); an incomplete preset holds only some published fields. `left_out`:
    fields of the published file a complete preset leaves out (quantization_config): unknown, never absent."""

    def __init__(self, values: dict | None = None, source: str | None = None, complete: bool = False,
                 cls: ConfigClass | None = None, model_type: str | None = None, left_out: tuple = (),
                 absent: tuple = ()):
        self.values = normalize(dict(values)) if values else {}
        self.source, self.complete, self.cls, self.model_type = source, complete, cls, model_type
        self.left_out = frozenset(left_out)
        self.absent = frozenset(absent)  # keys `values` surely lacks, complete or not (rebuilt(): an alias)
        self._derived: dict | None = None
        self._depth = [0]  # nesting of the methods that run (config.derive.run_method)
        self._rebuilt: dict = {}  # (class, text) -> the configuration a model builds from this one (rebuilt())

    @staticmethod
    def class_named(path: str, name: str, tree, trees: list):
        """config_class_named, for the evaluator (which reads configurations through this object only)."""
        return config_class_named(path, name, tree, trees)

    def derived(self, name: str) -> Value | None:
        """A field the class computes from the others (`layer_types` from `num_hidden_layers` and
        `full_attention_interval`), its statements run over the configuration (config.derive); None where
        they do not decide it."""
        cls = self.cls
        if cls is None or not cls.inits or name in cls.elsewhere:
            return None
        if self._derived is None:
            from .derive import derive_fields

            self._derived = derive_fields(cls.inits, cls.declared, {**cls.defaults, **cls.fields}, self.values, self.complete,
                                          self.left_out, frozenset(cls.class_attrs), self.absent)
        return Known(_outward(self._derived[name], name)) if name in self._derived else None

    def _values(self, text: bool) -> dict:
        sub = self.values.get("text_config") if text else None
        return normalize(dict(sub)) if isinstance(sub, dict) else self.values

    def _own_class(self, text: bool) -> ConfigClass | None:
        """The class whose methods answer `config.m()`: not for a text sub-configuration given as such."""
        return self.cls if self.cls is not None and not (text and "text_config" in self.values) else None

    def has_method(self, name: str, text: bool = False, prop: bool = False) -> bool:
        cls = self._own_class(text)
        found = cls.methods.get(name) if cls is not None else None
        return found is not None and found[1] == prop

    def gives_no_attribute(self, name: str, text: bool = False) -> bool:
        """Whether its class (a direct subclass of transformers' PreTrainedConfig, whose own body and base are
        read) gives no attribute `name`: no field, class attribute, method or property, none computed or set by
        a method; what `getattr(config, name, d)` finds is then a key of config.json (data, never a callable)
        or `d`."""
        own = self._own_class(text)
        if own is None or any(b.rsplit(".", 1)[-1] not in _BASE_NAMES for b in own.bases):
            return False
        real = own.attribute_map.get(name, name)
        return not any(n in group for n in (name, real) for group in
                       (own.class_attrs, own.declared, own.computed, own.elsewhere, own.methods))

    def method(self, name: str, args: tuple = (), text: bool = False) -> Value:
        """`config.<name>(*args)` (a property with no args): the class's method run over the configuration's
        fields (config.derive.run_method), its arguments known values; unknown where it does not decide."""
        own = self._own_class(text)
        if own is None or name not in own.methods:
            return Unknown(f"config.{name} is not a method of the configuration class")
        cls: ConfigClass = own
        found = cls.methods[name]
        from .derive import UNKNOWN, run_method

        def raw(value: Value):
            return _inward(value.value) if isinstance(value, Known) else UNKNOWN

        def field_of(field: str):
            if field in cls.methods and not cls.methods[field][1]:
                return UNKNOWN  # a bound method as a value
            return raw(self.attr(field, text))

        got = run_method(found[0], args, field_of, lambda m, a: raw(self.method(m, a, text)) if m in cls.methods
                         else UNKNOWN, self._depth)
        if got is UNKNOWN:
            return Unknown(f"config.{name}{'' if found[1] else '(...)'} is not decided by {cls.name}'s code")
        return Known(_outward(got, name))

    def attr(self, name: str, text: bool = False) -> Value:
        values, cls = self._values(text), self.cls
        real = cls.attribute_map.get(name, name) if cls else name
        if name not in values and real not in values and self.has_method(real, text, prop=True):
            return self.method(real, (), text)  # a property of the class (`is_moe`), run over the fields
        if cls is not None and real in cls.computed and not (text and "text_config" in self.values) \
                and values.get(name) is None and values.get(real) is None:
            derived = self.derived(real)  # what the class makes of a value not given (None -> [])
            if derived is not None:
                return derived
        for key in (name, real):
            if key in values:
                return Known(values[key])
        if name in self.left_out or real in self.left_out:
            return Unknown(f"config.{name} is left out of {self.source}")
        if cls is not None and not (text and "text_config" in self.values):
            if real in cls.computed:
                return Unknown(f"config.{name} is computed by {cls.name} from other fields")
            if real in cls.defaults:
                default = cls.defaults[real]
                if real == _ROPE and default is None and cls.rope_late:
                    theta = cls.defaults.get("rope_theta")
                    if isinstance(theta, (int, float)) and not isinstance(theta, bool):
                        return Known({"rope_type": "default", "rope_theta": theta})  # vLLM standardizes it
                    if self.complete or "rope_theta" in self.absent:
                        return Known(None)  # nothing standardizes it: no rope
                    return Unknown(f"config.rope_parameters: {cls.name} sets it after transformers' base has run, "
                                   f"so it is standardized only from a rope_theta the configuration may give")
                if real == _ROPE and default is None:  # standardized to the default rope when not given
                    rope = {"rope_type": "default"}
                    if isinstance(cls.defaults.get("default_theta"), (int, float)):
                        rope["rope_theta"] = cls.defaults["default_theta"]
                    return Known(rope)
                return Known(default)
            if real in cls.declared:
                return Unknown(f"the default of config.{name} in {cls.name} is not a literal")
        if self.complete and name == _ROPE:
            return Known({"rope_type": "default"})
        if name == "model_type" and self.model_type and (not text or (cls is not None and cls.wrapper)):
            # the class's `model_type` (its registry key); of the text configuration (`hf_text_config`) where
            # the facts are that sub-configuration (Qwen3_5ForCausalLM reads Qwen3_5TextConfig's)
            return Known(self.model_type)
        if name == "model_type" and text and cls is not None and cls.text is not None and cls.text.model_type \
                and "text_config" not in self.values:
            return Known(cls.text.model_type)  # a wrapper's text sub-configuration class: its own model_type
        return Unknown(f"config.{name} is not known ({self.describe_source()})")

    def has(self, name: str, text: bool = False) -> Value:
        """`hasattr(config, name)`: a key the configuration gives, a field its class gives a value (a default, a
        class attribute, a method or property) or computes to a known value is an attribute; a name a whole
        config.json lacks and the class neither declares nor computes is not; else it is not known."""
        values, own = self._values(text), self._own_class(text)
        real = own.attribute_map.get(name, name) if own is not None else name
        if name in values or real in values or isinstance(self.attr(name, text), Known):
            return Known(True)
        if own is not None and real in own.class_attrs:
            return Known(True)
        if name in self.left_out or real in self.left_out:
            return Unknown(f"whether config has {name}: it is left out of {self.source}")
        if own is not None and (real in own.declared or real in own.computed or real in own.elsewhere):
            return Unknown(f"whether config has {name}: {own.name} sets it in code not decided")
        if self.complete or name in self.absent:
            return Known(False)
        return Unknown(f"whether config has {name}")

    def rebuilt(self, cls: ConfigClass, text: bool = False) -> "ConfigFacts":
        """The configuration a model builds from this one's attributes (LongCat-Flash's
        `FlashConfig(**hf_config.__dict__)`): the fields of this one's `__dict__` carry over, by name into the
        parameters of `cls`'s __init__, the rest through its **kwargs to transformers' base, which sets them as
        attributes; `cls`'s own defaults and statements do the rest. What this one may hold but does not know
        is not known there either."""
        key = (cls.file, cls.name, cls.package, text)
        kept = self._rebuilt.get(key)
        if kept is None:
            kept = self._rebuilt[key] = self._rebuild(cls, text)
        return kept

    def _rebuild(self, cls: ConfigClass, text: bool) -> "ConfigFacts":
        given, own = self._values(text), self._own_class(text)
        params = {a.arg for fn in cls.inits if fn.name == "__init__" for a in fn.args.args[1:] + fn.args.kwonlyargs}
        names = set(given) | cls.declared | cls.computed | params
        if own is not None:
            names |= own.declared | own.computed
        values: dict = {}
        unknown: set = set()
        absent: set = set(own.attribute_map) if own is not None else set()
        for name in sorted(names):
            real = own.attribute_map.get(name, name) if own is not None else name
            if name in given:  # (a key given under an alias is set as the field it names)
                values[real] = given[name]
                continue
            if own is not None and (name in own.attribute_map or (
                    name in own.class_attrs and name not in own.declared and name not in own.computed)):
                absent.add(name)  # an alias, a property, a method, a class attribute: not in the __dict__
                continue
            if own is not None and (name in own.declared or name in own.computed):
                value = self.attr(name, text)
                if isinstance(value, Known):
                    values[name] = value.value
                else:
                    unknown.add(name)
            elif not self.complete or name in self.left_out:
                unknown.add(name)  # a field a checkpoint may carry: not known whether it is there
        unknown -= set(values)
        absent -= set(values)
        return ConfigFacts(values, self.source, self.complete, cls, cls.model_type or self.model_type,
                           tuple(sorted(unknown)), tuple(sorted(absent)))

    def getattr(self, name: str, default: Value, text: bool = False) -> Value:
        """`getattr(config, name, default)`: the field, or `default` where the configuration cannot have it: a
        whole checkpoint config.json that lacks it. A configuration class's defaults alone do not say: a
        checkpoint may carry a key its class does not declare (Qwen3-MoE's `head_dim`), and transformers keeps
        every extra key as an attribute."""
        value = self.attr(name, text)
        if isinstance(value, Known):
            return value
        if self.complete and name not in self._values(text) and name not in self.left_out:
            return default
        return value

    def describe_source(self) -> str:
        parts = []
        if self.source:
            parts.append(self.source)
        if self.cls is not None:
            where = f"{self.cls.package} {self.cls.version}" if self.cls.version else self.cls.package
            parts.append(say("config_defaults_of", where=where, cls=self.cls.name, wrapper=self.cls.wrapper)
                         if self.cls.wrapper else say("config_defaults", where=where, cls=self.cls.name))
            r = self.cls.registered
            if r is not None:  # which registration made it the model type's class, over which others
                parts.append(say("config_registered", cls=self.cls.name, model_type=r.model_type,
                                 at=f"{r.file}:{r.line}", over=", ".join(self.cls.over) or "-"))
        return joined(parts, " + ") if parts else say("no_configuration")

    def to_json(self) -> dict:
        return {"decided_by": self.describe_source(), "config": self.source, "complete": self.complete,
                "model_type": self.model_type, "class": self.cls.to_json() if self.cls else None}


def _outward(value, name: str):
    """A value config.derive computed, its items not decided (derive.UNKNOWN, in a dict whose keys are known)
    made the evaluator's Unknown."""
    from .derive import UNKNOWN, unsure

    if value is UNKNOWN:
        return Unknown(f"an item of config.{name} is not decided by the class's code")
    if not unsure(value):
        return value
    if isinstance(value, dict):
        return {k: _outward(v, name) for k, v in value.items()}
    return type(value)(_outward(v, name) for v in value)


def _inward(value):
    """The evaluator's Unknown items of a known value as config.derive's UNKNOWN (what a method reads)."""
    from .derive import UNKNOWN

    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {k: _inward(v) for k, v in value.items()} if any(
            isinstance(v, (Unknown, dict, list, tuple)) for v in value.values()) else value
    if isinstance(value, (list, tuple)) and any(isinstance(v, (Unknown, dict, list, tuple)) for v in value):
        return type(value)(_inward(v) for v in value)
    return value


def normalize(cfg: dict) -> dict:
    """A published config.json read the way transformers standardizes it: rope_scaling -> rope_parameters."""
    if _ROPE not in cfg and ("rope_scaling" in cfg or "rope_theta" in cfg):
        rope = dict(cfg.get("rope_scaling") or {})
        rope["rope_type"] = rope.pop("type", None) or rope.get("rope_type") or "default"
        if "rope_theta" in cfg:
            rope.setdefault("rope_theta", cfg["rope_theta"])
        cfg[_ROPE] = rope
    return cfg


# -- reading configuration classes ---------------------------------------------------------------------
def config_class_named(path: str, name: str, tree, trees: list) -> ConfigClass | None:
    """The configuration class `name` defined in `path` (a file of `tree`), with transformers' base fields."""
    found = _read_named(path, name, tree.package, tree.version, str(tree.root))
    return _with_base(found, trees) if found is not None else None


def find_config_class(model_type: str, trees: list, replacements=None) -> ConfigClass | None:
    """The configuration class vLLM builds for `model_type`: the one registered for it last (vLLM's
    `_CONFIG_REGISTRY`, then a vllm-ascend platform patch's item assignment into it, read from `replacements`),
    as vLLM's config parser takes the registry's class over transformers' own; else the class AutoConfig
    builds for it: vLLM's own (vllm/transformers_utils/configs/) where a module there registers it with
    `AutoConfig.register("<model_type>", Cls)`, else transformers/models/<type>/configuration_<type>.py. A class
    of vLLM's configs folder that only declares the type (BailingMoeV3TextConfig's `model_type =
    "bailing_hybrid"`, a wrapper's text sub-configuration) is not what vLLM builds for a checkpoint of that
    type: transformers' is (BailingHybridConfig)."""
    regs = registrations(model_type, trees, replacements)
    for reg in reversed(regs):
        if reg.tests:  # a registration the configuration reader cannot decide: the class is not known
            return None
        found = _registered_class(reg, trees)
        if found is None:  # registered, but not readable here (transformers' class without --hf-root)
            return None
        # what it wins over: transformers' own class of the type, the registrations before it
        over = [f"{r.package} {r.class_name} ({r.file}:{r.line})" for r in regs if r is not reg
                and (r.class_name, r.module) != (reg.class_name, reg.module)]
        own = _by_model_type(model_type, [t for t in trees if t.package == "transformers"])
        if own is not None and (own.name, own.file) != (found.name, found.file) and not any(
                r.module == "transformers" and r.class_name == own.name for r in regs):
            over.insert(0, f"{own.package} {own.name} ({own.file}:{own.line})")
        return replace(_with_base(found, trees), registered=reg, over=tuple(over))
    plain = _by_model_type(model_type, trees)
    return _with_base(plain, trees) if plain is not None else None


def _by_model_type(model_type: str, trees: list) -> ConfigClass | None:
    for tree in trees:
        if tree.package == "vllm":
            folder = tree.package_dir / "transformers_utils" / "configs"
            files = sorted(folder.glob("*.py")) if folder.is_dir() else []
        elif tree.package == "transformers":  # models/<type>/configuration_<type>.py, else the folder a
            models = tree.package_dir / "models"  # sub-type lives in (gemma3 for gemma3_text)
            files = [models / model_type / f"configuration_{model_type}.py"]
            files += sorted(p for p in models.glob("*/configuration_*.py")
                            if model_type.startswith(p.parent.name) and p.parent.name != model_type)
        else:
            continue
        for path in files:
            found = _read_class(str(path), model_type, tree.package, tree.version, str(tree.root))
            if found is not None and (tree.package != "vllm" or (model_type, found.name) in _auto_registered(str(path))):
                return found
    return None


@lru_cache(maxsize=256)
def _auto_registered(path: str) -> frozenset:
    """(model type, class name) of each module-level `AutoConfig.register("<type>", Cls)` of one file (vLLM's
    configs/ovis.py registers its visual tokenizers' configurations so)."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    out = set()
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "register" \
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "AutoConfig" \
                and len(call.args) >= 2 and isinstance(call.args[0], ast.Constant) and isinstance(call.args[1], ast.Name):
            out.add((call.args[0].value, call.args[1].id))
    return frozenset(out)


def registrations(model_type: str, trees: list, replacements=None) -> list[Registration]:
    """The registrations of a configuration class for `model_type`, in the order they take effect: vLLM's
    `_CONFIG_REGISTRY = LazyConfigDict(type="Class", ...)`, then vllm-ascend's item assignments into it."""
    out: list[Registration] = []
    vllm = next((t for t in trees if t.package == "vllm"), None)
    if vllm is not None:
        entry = _vllm_registry(str(vllm.package_dir / "transformers_utils"), str(vllm.root)).get(model_type)
        if entry is not None:
            name, module, file, line = entry
            out.append(Registration(model_type, name, module, file, line, "vllm"))
    for p in replacements.item(_REGISTRY, model_type) if replacements is not None else ():
        if p.value_name and "." in p.value_name:
            module, _, name = p.value_name.rpartition(".")
            out.append(Registration(model_type, name, module, p.file, p.line, "vllm_ascend", p.tests))
    return out


_REGISTRY = "vllm.transformers_utils.config._CONFIG_REGISTRY"


@lru_cache(maxsize=4)
def _vllm_registry(folder: str, root: str) -> dict:
    """model type -> (class name, its module, file, line) of vLLM's `_CONFIG_REGISTRY` (config.py), the
    module named by configs/__init__.py's `_CLASS_TO_MODULE` ("transformers" for transformers' class)."""
    path = Path(folder) / "config.py"
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return {}
    modules = _class_modules(str(Path(folder) / "configs" / "__init__.py"))
    rel = path.relative_to(root).as_posix()
    out: dict = {}
    for node in tree.body:
        call = _module_value(node, "_CONFIG_REGISTRY")
        if not isinstance(call, ast.Call):
            continue
        pairs = []
        for kw in call.keywords:
            if kw.arg is not None:
                pairs.append((kw.arg, kw.value, kw.value.lineno))
            elif isinstance(kw.value, ast.Dict):  # **{"unlimited-ocr": "UnlimitedOCRConfig"}
                pairs += [(k.value, v, v.lineno) for k, v in zip(kw.value.keys, kw.value.values)
                          if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        for key, value, line in pairs:
            name = value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else \
                value.id if isinstance(value, ast.Name) else None
            if name is not None:
                out[key] = (name, modules.get(name), rel, line)
    return out


@lru_cache(maxsize=4)
def _class_modules(path: str) -> dict:
    """configs/__init__.py's `_CLASS_TO_MODULE = {"Class": "module", ...}` (empty where it has none)."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return {}
    for node in tree.body:
        table = _module_value(node, "_CLASS_TO_MODULE")
        if table is not None:
            ok, value = _literal(table)
            return value if ok and isinstance(value, dict) else {}
    return {}


def _module_value(node: ast.stmt, name: str) -> ast.expr | None:
    """The value a module-level `name = ...` (or `name: T = ...`) statement assigns, else None."""
    if isinstance(node, ast.AnnAssign):
        target, value = node.target, node.value
    elif isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    else:
        return None
    return value if isinstance(target, ast.Name) and target.id == name else None


def _registered_class(reg: Registration, trees: list) -> ConfigClass | None:
    """The class a registration names, read from its module's file (transformers' by its own name there)."""
    if reg.module == "transformers":
        tree = next((t for t in trees if t.package == "transformers"), None)
        if tree is None:
            return None
        models = tree.package_dir / "models"
        paths = sorted(p for p in models.glob("*/configuration_*.py") if _defines(str(p), reg.class_name))
        return next((c for c in (_read_named(str(p), reg.class_name, tree.package, tree.version, str(tree.root))
                                 for p in paths) if c is not None), None)
    for tree in trees:
        if reg.module is None:  # vLLM's registry without a module table: its configs folder
            if tree.package != "vllm":
                continue
            folder = tree.package_dir / "transformers_utils" / "configs"
            paths = sorted(p for p in folder.glob("*.py") if _defines(str(p), reg.class_name))
        elif reg.module.split(".")[0] == tree.package:
            base = tree.root.joinpath(*reg.module.split("."))
            paths = [base.with_suffix(".py"), base / "__init__.py"]
        else:
            continue
        for path in paths:
            found = _read_named(str(path), reg.class_name, tree.package, tree.version, str(tree.root))
            if found is not None:
                return found
    return None


@lru_cache(maxsize=4096)
def _defines(path: str, name: str) -> bool:
    try:
        return f"class {name}(".encode() in Path(path).read_bytes()
    except OSError:
        return False


def _with_base(cls: ConfigClass, trees: list) -> ConfigClass:
    """Fields of transformers' PreTrainedConfig count as declared too (`getattr(config, "x", d)` of one of them
    is not `d`), with its literal defaults where the class has none."""
    base = next((_read_base(str(t.package_dir / "configuration_utils.py"), str(t.root)) for t in trees
                 if t.package == "transformers"), None)
    if base is None:
        return cls
    merged = ConfigClass(cls.name, cls.file, cls.line, cls.package, cls.version, dict(base.defaults),
                         set(base.declared) | cls.declared, set(cls.computed), dict(cls.attribute_map),
                         cls.model_type, cls.text, cls.wrapper, cls.registered, cls.over, cls.inits,
                         set(cls.elsewhere), {**base.fields, **cls.fields}, dict(cls.methods),
                         set(base.class_attrs) | cls.class_attrs, rope_late=cls.rope_late, bases=cls.bases)
    merged.defaults.update(cls.defaults)
    for name in cls.computed:
        merged.defaults.pop(name, None)
    return merged


@lru_cache(maxsize=4)
def _read_base(path: str, root: str) -> ConfigClass | None:
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("PreTrainedConfig", "PretrainedConfig"):
            cls = ConfigClass(node.name, Path(path).relative_to(root).as_posix(), node.lineno, "transformers", None)
            _read_body(node, cls)
            cls.computed.clear()  # what the base computes is overridden by each model's fields
            return cls
    return None


def model_type_of(architecture: str, trees: list, stem: str | None = None) -> str | None:
    """The model type transformers' auto mappings (modeling_auto.py `*_MAPPING_NAMES`) give an architecture.
    Several types may name one class (llama, internlm3, ... -> LlamaForCausalLM): the one spelled like the
    vLLM model file or the architecture wins; with no such one the type is not known."""
    for tree in trees:
        if tree.package == "transformers":
            found = _auto_mapping(str(tree.package_dir / "models" / "auto" / "modeling_auto.py")).get(architecture, [])
            if len(found) == 1:
                return found[0]
            plain = architecture.lower()
            for suffix in ("forcausallm", "lmheadmodel", "forconditionalgeneration", "model"):
                plain = plain.removesuffix(suffix)
            for cand in found:
                if cand == stem or cand.replace("_", "").replace("-", "") == plain:
                    return cand
    return None


@lru_cache(maxsize=8)
def _auto_mapping(path: str) -> dict:
    """class name -> the model types every `*_MAPPING_NAMES` table maps to it."""
    from .transformers_auto import mapping_pairs

    out: dict = {}
    for table, model_type, name in mapping_pairs(path):
        if table.endswith("_MAPPING_NAMES"):
            types = out.setdefault(name, [])
            if model_type not in types:
                types.append(model_type)
    return out


@lru_cache(maxsize=256)
def _read_class(path: str, model_type: str, package: str, version: str | None, root: str) -> ConfigClass | None:
    return _read(path, model_type, None, package, version, root)


@lru_cache(maxsize=64)
def _read_named(path: str, name: str, package: str, version: str | None, root: str) -> ConfigClass | None:
    return _read(path, None, name, package, version, root)


def _read(path: str, model_type: str | None, name: str | None, package: str, version: str | None,
          root: str) -> ConfigClass | None:
    """The class of `model_type` (its `model_type = ...`), or the class `name`, of one file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError:
        return None
    if (model_type or name or "").encode() not in data:  # most files of the configs folder are other models'
        return None
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None
    if name is not None:
        found = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    else:
        found = [node for node in tree.body if isinstance(node, ast.ClassDef) and _class_model_type(node) == model_type]
    # a sub-configuration shares its wrapper's model type (Qwen3_5VisionConfig, base_config_key "vision_config"):
    # the wrapper is the class of that type
    found.sort(key=lambda node: _class_attr(node, "base_config_key") is not None)
    if not found:
        return None
    node = found[0]
    cls = ConfigClass(node.name, p.relative_to(root).as_posix(), node.lineno, package, version)
    _read_body(node, cls)
    text = _class_attr(node, "sub_configs") or _class_attr(node, "sub_configs_defaults")
    if isinstance(text, ast.Dict):  # the text sub-configuration, where this file defines it
        for key, value in zip(text.keys, text.values):
            if isinstance(key, ast.Constant) and key.value == "text_config" and isinstance(value, ast.Name):
                sub = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == value.id), None)
                if sub is not None:
                    cls.text = ConfigClass(sub.name, cls.file, sub.lineno, package, version,
                                           model_type=_class_model_type(sub))
                    _read_body(sub, cls.text)
    return cls


def _class_attr(node: ast.ClassDef, name: str):
    """The value a class body assigns to `name` (an ast node), or None."""
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return getattr(stmt, "value", None)
    return None


def _class_model_type(node: ast.ClassDef) -> str | None:
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        value = getattr(stmt, "value", None)
        if any(isinstance(t, ast.Name) and t.id == "model_type" for t in targets) and isinstance(value, ast.Constant):
            return value.value if isinstance(value.value, str) else None
    return None


def _literal(node):
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _read_body(node: ast.ClassDef, cls: ConfigClass) -> None:
    cls.bases = tuple(ast.unparse(b) for b in node.bases)
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if stmt.value is not None:
                cls.class_attrs.add(stmt.target.id)  # (a bare annotation gives the class no attribute)
            if "ClassVar" in ast.unparse(stmt.annotation):
                continue
            cls.declared.add(stmt.target.id)
            ok, value = _literal(stmt.value) if stmt.value is not None else (False, None)
            if ok:
                cls.defaults[stmt.target.id] = value
                cls.fields[stmt.target.id] = value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            cls.class_attrs.add(name)
            ok, value = _literal(stmt.value)
            if name == "attribute_map" and ok and isinstance(value, dict):
                cls.attribute_map = value
            elif name == "default_theta" and ok:
                cls.defaults[name] = value
        elif isinstance(stmt, ast.FunctionDef) and stmt.name in ("__init__", "__post_init__"):
            _read_init(stmt, cls)
            cls.inits += (stmt,)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cls.class_attrs.add(stmt.name)
            decorators = [ast.unparse(d) for d in stmt.decorator_list]
            if isinstance(stmt, ast.FunctionDef) and stmt.args.args and stmt.args.args[0].arg == "self" \
                    and decorators in ([], ["property"]):
                cls.methods[stmt.name] = (stmt, decorators == ["property"])
            elif any(d.endswith(".setter") for d in decorators):
                cls.methods.pop(stmt.name, None)  # a property with a setter stores what __init__ sets: not read
            for sub in ast.walk(stmt):
                for t in sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(sub, (ast.AugAssign, ast.AnnAssign)) else []:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        cls.elsewhere.add(t.attr)


def _set_after_base(fn: ast.FunctionDef, name: str) -> bool:
    """`fn` (an __init__) assigns `self.<name>` only after its `super().__init__(...)` call."""
    base = [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "__init__" and isinstance(n.func.value, ast.Call)
            and isinstance(n.func.value.func, ast.Name) and n.func.value.func.id == "super"]
    sets = [n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" and t.attr == name]
    return bool(base and sets) and min(sets) > min(base)


def _other_than_default(test, cls: ConfigClass) -> bool:
    """`self.x == literal` where x's declared default is another literal."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    left, right = test.left, test.comparators[0]
    if not (isinstance(left, ast.Attribute) and isinstance(left.value, ast.Name) and left.value.id == "self"):
        return False
    ok, value = _literal(right)
    return ok and left.attr in cls.defaults and cls.defaults[left.attr] != value


def _read_init(fn: ast.FunctionDef, cls: ConfigClass) -> None:
    params = fn.args.args[1:] + fn.args.kwonlyargs
    defaults = [None] * (len(fn.args.args) - 1 - len(fn.args.defaults)) + list(fn.args.defaults) + list(fn.args.kw_defaults)
    param_defaults = {}
    for p, d in zip(params, defaults):
        if fn.name == "__init__" and d is not None:
            ok, value = _literal(d)
            param_defaults[p.arg] = (ok, value)
    # `if self.hidden_act == "gelu": self.hidden_act = ...` does not run at a default that is another value
    idle = {id(n) for test in ast.walk(fn) if isinstance(test, ast.If) and _other_than_default(test.test, cls)
            for s in test.body for n in ast.walk(s)}
    # a parameter the body rebinds (`if mlp_only_layers is None: mlp_only_layers = []`): not its default
    rebound = {t.id for node in ast.walk(fn) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    for name in rebound:
        param_defaults.pop(name, None)
    if fn.name == "__init__":
        cls.rope_late = _set_after_base(fn, _ROPE)
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign) or id(node) in idle:
            continue
        for t in node.targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                name = t.attr
                if isinstance(node.value, ast.Name) and node.value.id == name and name in param_defaults \
                        and name not in cls.computed:
                    ok, value = param_defaults[name]  # self.x = x: the parameter's default is the field's
                    cls.declared.add(name)
                    if ok:
                        cls.defaults[name] = value
                else:
                    cls.declared.add(name)
                    cls.computed.add(name)
                    cls.defaults.pop(name, None)


# -- what decides one analysis's walk ----------------------------------------------------------------
def load_facts(architecture: str, stem: str, trees: list, config_spec: str | None,
               read: ConfigRead | None = None, replacements=None) -> ConfigFacts:
    """The facts of one analysis: `config_spec` (a config.json path or preset name, or None; `read`, its
    content when the caller has read it already) over the defaults of the model type's configuration class in
    `trees` (vLLM's, then transformers' when given; the class registered for it last, where vLLM's registry or
    a vllm-ascend platform patch in `replacements` registers one)."""
    from ..errors import UserError

    if read is None and config_spec:
        read = read_config(config_spec)
    values, source, complete, left_out = read if read is not None else (None, None, False, ())
    if values is not None:
        archs = values.get("architectures")
        if isinstance(archs, list) and archs and architecture not in archs:
            raise UserError(f"--config {config_spec}: it is the configuration of {', '.join(map(str, archs))}, "
                            f"not {architecture}; give this model's config.json")
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
            if key in values and not (isinstance(values[key], int) and not isinstance(values[key], bool)):
                raise UserError(f"--config {config_spec}: {key} is {values[key]!r}, not a whole number; "
                                f"give an HF config.json")
    model_type = values.get("model_type") if values else None
    model_type = model_type if isinstance(model_type, str) else model_type_of(architecture, trees, stem)
    cls = find_config_class(model_type, trees, replacements) if model_type else None
    if cls is not None and cls.text is not None and architecture.endswith("ForCausalLM") \
            and not (values and "text_config" not in values):
        # a text model of a multimodal wrapper's configuration (Qwen3_5ForCausalLM of Qwen3_5Config) reads
        # its text sub-configuration (vLLM's hf_text_config): its defaults and its model type decide
        text = cls.text
        cls = _with_base(ConfigClass(text.name, text.file, text.line, text.package, text.version,
                                     dict(text.defaults), set(text.declared), set(text.computed),
                                     dict(text.attribute_map), text.model_type, None, cls.name,
                                     cls.registered, cls.over, text.inits, set(text.elsewhere),
                                     dict(text.fields), dict(text.methods), set(text.class_attrs),
                                     rope_late=text.rope_late, bases=text.bases), trees)
        model_type = text.model_type or model_type
    return ConfigFacts(values, source, complete, cls, model_type, left_out)
