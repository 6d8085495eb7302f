"""The catalog (patterns/catalog/*.yaml) read into its declared shapes (catalog/schema.py): every shipped file loads,
a malformed copy is refused with `file:line: what is wrong` at the right line, and the files' `examples` are test
cases (as Fixit turns a rule's examples into tests): a kernel name an entry of kernels.yaml lists must be matched
first by that entry, a query an alias lists must be taken first by that alias."""

from __future__ import annotations

import re
import shutil
import textwrap

import pytest

import fusion_analyze.catalog as catalog_module
from fusion_analyze.catalog import Catalog, CatalogError, catalog, is_dispatcher, kernel_covers, load_catalog, schema
from fusion_analyze.catalog.shape import read
from fusion_analyze.errors import UserError
from fusion_analyze.resources import data_dir, load_yaml

from .conftest import MINI

CATALOG = data_dir("patterns") / "catalog"


# -- the shipped files -------------------------------------------------------------------------------------
def test_every_shipped_file_loads_into_its_declared_shape():
    data = load_catalog(CATALOG).typed
    assert sorted(p.stem for p in CATALOG.glob("*.yaml")) == sorted(schema.FILES)  # each file has a shape
    for name, cls in schema.FILES.items():
        assert isinstance(getattr(data, name), cls), name


def test_plain_accessors_still_give_the_files_as_yaml_reads_them():
    c = Catalog()
    raw = {name: load_yaml((CATALOG / f"{name}.yaml").read_text(encoding="utf-8")) for name in schema.FILES}
    for name in ("leaf_ops", "walk", "hf_fusers", "composites", "devices"):
        assert getattr(c, name) == raw[name], name
    assert c.runtime == raw["walk"]["runtime"]
    assert c.presets == raw["presets"]["presets"] and c.aliases == raw["aliases"]["aliases"]
    assert [(rx.pattern, set(cov)) for rx, cov in c.kernels] == [(e["match"], set(e["covers"]))
                                                                  for e in raw["kernels"]["kernels"]]


def test_typed_fields_hold_the_same_values():
    c = catalog()
    t = c.typed
    assert t.walk.limits.max_ops == c.walk["limits"]["max_ops"] == c.limit("max_ops")
    assert t.walk.runtime.layers_of == tuple(c.runtime["layers_of"])
    assert t.leaf_ops.classes["RMSNorm"].values == c.leaf_ops["classes"]["RMSNorm"]["values"]
    assert t.leaf_ops.classes["Dropout"].values is None  # left out, not empty: a pass's guards tell them apart
    moe = t.composites.of("moe", "ascend")
    assert moe is not None and [p.part for p in moe.parts] == [p["part"] for p in c.composites["moe"]["ascend"]["parts"]]
    assert moe.parts[1].registered_by is not None and moe.parts[1].registered_by.values == {"moe_config": {"ep_size": 1}}
    assert t.composites.of("rmsnorm", "ascend") is None and t.composites.of("moe", None) is None
    assert isinstance(t.hf_fusers.fusers["GLUFuser"], schema.GluFuser)  # chosen by `rewrite: glu`
    qkv = t.hf_fusers.fusers["QKVFuser"]
    assert isinstance(qkv, schema.QkvFuser) and qkv.merged.name == "qkv_proj"
    assert t.presets.presets["Qwen3-8B"].config == c.presets["Qwen3-8B"]["config"]
    assert t.devices.devices[t.devices.default].soc == "A2"


# -- a malformed copy ----------------------------------------------------------------------------------------
# (file, text to replace, its replacement, a text of the line the error must name, what the message must say).
# The line is looked up in the changed file, so the cases hold while the shipped files change around them.
MALFORMED = [
    ("kernels.yaml", "kernels:", "kernls:", "kernls:", "top level: unknown key `kernls`; allowed: kernels"),
    ("walk.yaml", "limits:", "limit:", "limit:", "unknown key `limit`"),  # a typo at the top level
    ("walk.yaml", "  max_ops: 4000", "  max_opps: 4000", "max_opps", "limits: unknown key `max_opps`"),
    ("walk.yaml", "  max_ops: 4000", "  max_ops: lots", "max_ops", "limits.max_ops must be an integer, not 'lots'"),
    ("walk.yaml", "  kernel_depth: 6", "", "limits:", "limits: missing key `kernel_depth`"),
    ("walk.yaml", "placeholders: [PPMissingLayer, Identity]", "placeholders: PPMissingLayer", "placeholders:",
     "placeholders must be a list, not 'PPMissingLayer'"),
    ("walk.yaml", "  layers_of: [get_layers_from_vllm_config]", "  layers_of: [get_layers_from_vllm_config]\n  layer_of: []",
     "layer_of:", "runtime: unknown key `layer_of`"),
    ("walk.yaml", "    ascend:\n      module: vllm_ascend.attention.attention_v1",
     "    acsend:\n      module: vllm_ascend.attention.attention_v1", "acsend:",
     "runtime.attention_paths: unknown key `acsend`; allowed: ascend, cuda"),
    ("kernels.yaml", "{match: '^MatcherSiluAndMul$', covers: [silu, mul]}", "{match: '^MatcherSiluAndMul$', covers: silu}",
     "MatcherSiluAndMul", "covers must be a list, not 'silu'"),
    ("kernels.yaml", "{match: '^MatcherSiluAndMul$', covers: [silu, mul]}", "{match: '^MatcherSiluAndMul$'}",
     "MatcherSiluAndMul", "missing key `covers`"),
    ("kernels.yaml", "{match: '^MatcherSiluAndMul$', covers: [silu, mul]}",
     "{match: '^MatcherSiluAndMul$', covers: [silu, mul], dispach: true}", "MatcherSiluAndMul", "unknown key `dispach`"),
    ("kernels.yaml", "{match: '^MatcherSiluAndMul$', covers: [silu, mul]}",
     "{match: '^MatcherSiluAndMul($', covers: [silu, mul]}", "MatcherSiluAndMul", "is not a valid regular expression"),
    ("kernels.yaml", "{match: '^MatcherSiluAndMul$', covers: [silu, mul]}",
     "{match: '^MatcherSiluAndMul$', covers: [silu, mul], dispatch: 'yes'}", "MatcherSiluAndMul",
     "dispatch must be true or false, not 'yes'"),
    ("leaf_ops.yaml", "  RMSNormGated: {kind: rmsnorm_gated}", "  RMSNormGated: {knd: rmsnorm_gated}", "RMSNormGated:",
     "classes.RMSNormGated: unknown key `knd`"),
    ("leaf_ops.yaml", "  torch.cat: {kind: cat}", "  torch.cat: {kind: [cat]}", "torch.cat:",
     "functions.torch.cat.kind must be a string, not a list"),
    ("leaf_ops.yaml", "  - {match: 'aux_hidden_state', value: false}", "  - {match: 'aux_hidden_state', value: 0}",
     "aux_hidden_state", "value must be true or false, not 0"),
    ("hf_fusers.yaml", "    rewrite: qkv\n", "    rewrite: qvk\n", "rewrite: qvk",
     "fusers.QKVFuser.rewrite must be one of glu, qkv, packed_qkv, rms_norm, attention_interface, not 'qvk'"),
    ("hf_fusers.yaml", "    down_style: rowwise", "    down_style: rowwise\n    up_style: columnwise", "up_style:",
     "fusers.GLUFuser: unknown key `up_style`"),
    ("composites.yaml", "moe:\n", "moee:\n", "moee:", "top level: unknown key `moee`; allowed: mla_attention, moe"),
    ("composites.yaml", "    own_method_parts: [experts]", "    own_method_parts: [expert]", "own_method_parts:",
     "`own_method_parts` names `expert`, not a part"),
    ("devices.yaml", "default: ascend_a2", "default: ascend_a9", "default:", "`default: ascend_a9` is not a device"),
    ("devices.yaml", "    hbm_gb_s: 4000", "    hbm_gb_s: fast", "hbm_gb_s: fast",
     "devices.ascend_a5.hbm_gb_s must be a number, not 'fast'"),
    ("devices.yaml", "  decode: {", "  decod: {", "decod:", "scenarios: unknown key `decod`; allowed: prefill, decode"),
    ("presets.yaml", "    source: https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json\n", "", "Qwen3-8B:",
     "presets.Qwen3-8B: missing key `source`"),
    ("aliases.yaml", "    architectures: [Qwen2ForCausalLM]", "    architectures: []", "architectures: []",
     "`architectures` names no architecture"),
    ("devices.yaml", "default: ascend_a2", "default: ascend_a2: a3", "default:",
     "not valid YAML: mapping values are not allowed"),
]


def _copy(tmp_path, file: str, old: str, new: str):
    root = tmp_path / "catalog"
    shutil.copytree(CATALOG, root)
    text = (root / file).read_text(encoding="utf-8")
    assert old in text, f"{file} no longer has {old!r}: update the case"
    (root / file).write_text(text.replace(old, new, 1), encoding="utf-8")
    return root


@pytest.mark.parametrize("file,old,new,marker,said", MALFORMED, ids=[f"{c[0]}:{c[4][:40]}" for c in MALFORMED])
def test_malformed_copy_names_file_line_and_what_is_wrong(tmp_path, file, old, new, marker, said):
    root = _copy(tmp_path, file, old, new)
    text = (root / file).read_text(encoding="utf-8")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if marker in t)
    with pytest.raises(CatalogError) as exc:
        load_catalog(root)
    assert exc.value.message.startswith(f"{root}/{file}:{line}: "), exc.value.message
    assert said in exc.value.message, exc.value.message
    assert isinstance(exc.value, UserError) and exc.value.code == 2  # the CLI: one line, exit 2


def test_shape_errors_on_a_small_file(tmp_path):
    """The reader on a file written here: the line numbers are the file's own."""
    f = tmp_path / "devices.yaml"
    f.write_text(textwrap.dedent("""\
        default: a2
        devices:
          a2:
            name: A2
            hbm_gb_s: 1600
            tflops: 313
            launch_us: {eager: 5, graph: 2.5}
            sources: {hbm_gb_s: spec}
        scenarios:
          prefill: {num_tokens: 4096, batch: 1, q_len: 4096, kv_len: true}
        """), encoding="utf-8")
    with pytest.raises(CatalogError) as exc:
        read(schema.Devices, f, "d.yaml")
    assert exc.value.message == "d.yaml:10: scenarios.prefill.kv_len must be an integer, not true"
    f.write_text(f.read_text().replace("kv_len: true", "kv_len: 4096"), encoding="utf-8")
    devices, raw = read(schema.Devices, f, "d.yaml")
    launch = devices.devices["a2"].launch_us
    assert launch.eager == 5 and type(launch.eager) is int and launch.graph == 2.5  # kept as written
    assert raw["devices"]["a2"]["sources"] == {"hbm_gb_s": "spec"} and type(raw["devices"]) is dict
    f.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"^d\.yaml:1: top level must be a mapping of default, devices, scenarios"):
        read(schema.Devices, f, "d.yaml")
    f.write_text("", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"^d\.yaml:1: top level: missing key `default`$"):
        read(schema.Devices, f, "d.yaml")


def test_cli_exits_2_with_file_line_on_a_malformed_catalog(run, tmp_path, monkeypatch):
    root = _copy(tmp_path, "aliases.yaml", "    architectures: [Qwen2ForCausalLM]", "    architectures: Qwen2")
    monkeypatch.setattr(catalog_module, "catalog", lambda: Catalog(root))  # read where the code asks for it
    r = run("locate", "--lang", "en", "qwen2.5-7b", "--vllm-root", str(MINI))
    assert r.exit_code == 2, r.output
    assert f"{root}/aliases.yaml:" in r.output and "architectures must be a list" in r.output
    assert "Traceback" not in r.output


# -- the examples of the files, as test cases ----------------------------------------------------------------
KERNELS = catalog().typed.kernels.kernels
KERNEL_CASES = [(i, name) for i, e in enumerate(KERNELS) for name in e.examples]


def test_kernels_yaml_has_examples():
    assert len(KERNEL_CASES) >= 30


@pytest.mark.parametrize("i,name", KERNEL_CASES, ids=[n for _i, n in KERNEL_CASES])
def test_kernel_example_is_matched_first_by_its_entry(i, name):
    entry = KERNELS[i]
    first = next(e for e in KERNELS if re.search(e.match, name))
    assert first is entry, f"{name}: matched first by `{first.match}`, not by `{entry.match}` (keep the specific first)"
    assert kernel_covers(name) == frozenset(entry.covers)
    assert is_dispatcher(name) == entry.dispatch


ALIASES = catalog().typed.aliases.aliases
ALIAS_CASES = [(i, query) for i, a in enumerate(ALIASES) for query in a.examples]


@pytest.mark.parametrize("i,query", ALIAS_CASES, ids=[q for _i, q in ALIAS_CASES])
def test_alias_example_is_taken_first_by_its_alias(i, query):
    first = next((a for a in ALIASES if re.fullmatch(a.match, query, re.IGNORECASE)), None)
    assert first is ALIASES[i], f"{query}: taken by `{first.match if first else None}`, not `{ALIASES[i].match}`"


def test_every_alias_has_an_example():
    assert all(a.examples for a in ALIASES)
