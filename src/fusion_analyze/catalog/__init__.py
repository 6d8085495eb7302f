"""Every file of patterns/catalog/, loaded once: the policy the code asks instead of holding it.

leaf_ops   classes, functions and tensor methods that are one op; the assume table of platform tests
kernels    what one device kernel does, as primitive ops (kernel_covers, and when that fuses a scenario)
walk       limits of the walk, which alternative a construction defaults to, what the runtime hands code
composites the parts a composite layer (MoE) is walked to, per backend
aliases    marketing names -> architectures;  presets: published config.json dimensions
devices    device profiles for the estimate (read through estimate/benefit.py, which also takes a user file)

Each file has a declared shape (catalog/schema.py: frozen dataclasses, read by catalog/shape.py): an unknown key,
a missing required key or a value of the wrong type is a CatalogError, `patterns/catalog/<file>.yaml:line: what
is wrong`, which the CLI reports on one line with exit code 2. `catalog().typed` holds the dataclasses; the
older properties (`leaf_ops`, `walk`, `runtime`, ...) the same files as plain YAML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from ..resources import data_dir
from . import schema
from .shape import CatalogError, read

__all__ = ["Catalog", "CatalogData", "CatalogError", "catalog", "load_catalog"]


@dataclass(frozen=True)
class CatalogData:
    """Every file of the catalog as its declared shape (catalog/schema.py)."""

    leaf_ops: schema.LeafOps
    kernels: schema.Kernels
    walk: schema.Walk
    composites: schema.Composites
    hf_fusers: schema.HfFusers
    aliases: schema.Aliases
    presets: schema.Presets
    devices: schema.Devices


class Catalog:
    """The catalog of a folder (patterns/catalog/ by default), each file read once and checked against its
    declared shape: `typed` holds the dataclasses; the other properties are the files as plain YAML (dicts and
    lists) and the tables built from them, for the code that reads them so."""

    def __init__(self, root: Path | None = None, label: str | None = None):
        self.root = root if root is not None else data_dir("patterns") / "catalog"
        self.label = label if label is not None else ("patterns/catalog" if root is None else str(root).rstrip("/"))

    @cached_property
    def _files(self) -> dict[str, tuple]:
        """file name -> (its dataclass, its plain YAML), every file read (CatalogError: `file:line: ...`)."""
        return {name: read(cls, self.root / f"{name}.yaml", f"{self.label}/{name}.yaml")
                for name, cls in schema.FILES.items()}

    @cached_property
    def typed(self) -> CatalogData:
        return CatalogData(**{name: shaped for name, (shaped, _raw) in self._files.items()})

    def check(self) -> CatalogData:
        """Read and check every file now (they are read at the first question otherwise)."""
        return self.typed

    def _read(self, name: str) -> dict:
        return self._files[name][1]

    # -- the files as plain YAML ------------------------------------------------------------------------
    @cached_property
    def leaf_ops(self) -> dict:
        return self._read("leaf_ops")

    @cached_property
    def walk(self) -> dict:
        return self._read("walk")

    @cached_property
    def hf_fusers(self) -> dict:
        """What the Transformers backend's load-time fusers do to the Hugging Face modules it builds."""
        return self._read("hf_fusers")

    @cached_property
    def composites(self) -> dict:
        """leaf kind -> backend -> [part spec]: the parts a composite layer's op is walked to."""
        return self._read("composites")

    @cached_property
    def aliases(self) -> list[dict]:
        return self._read("aliases").get("aliases", [])

    @cached_property
    def presets(self) -> dict:
        return self._read("presets")["presets"]

    @cached_property
    def devices(self) -> dict:
        return self._read("devices")

    @cached_property
    def runtime(self) -> dict:
        return self.walk.get("runtime", {})

    # -- tables built from them -------------------------------------------------------------------------
    @cached_property
    def kernels(self) -> list[tuple[re.Pattern, frozenset[str]]]:
        return [(re.compile(e.match), frozenset(e.covers)) for e in self.typed.kernels.kernels]

    @cached_property
    def dispatchers(self) -> list[re.Pattern]:
        """Entries marked `dispatch: true`: vLLM custom ops that hand the work to the attention backend's impl."""
        return [re.compile(e.match) for e in self.typed.kernels.kernels if e.dispatch]

    def limit(self, name: str) -> int:
        return int(getattr(self.typed.walk.limits, name))

    @cached_property
    def default_choice(self) -> list[dict]:
        """Ordered preferences among conditional constructions: [{name: regex, unless_all: regex}, ...]."""
        return [{"id": p.id, "name": re.compile(p.name, re.IGNORECASE if p.ignore_case else 0),
                 "unless_all": re.compile(p.unless_all) if p.unless_all else None}
                for p in self.typed.walk.default_choice]

    @cached_property
    def roles(self) -> list[tuple[str, re.Pattern, re.Pattern]]:
        """(role, attribute-name regex, lowercased class-name regex), in the order they are tried."""
        return [(r.role, re.compile(r.attr), re.compile(r.cls)) for r in self.typed.walk.roles]

    @cached_property
    def placeholders(self) -> frozenset[str]:
        return frozenset(self.typed.walk.placeholders)

    @cached_property
    def symbols(self) -> frozenset[str]:
        """Dotted names of outside libraries' constants the evaluator knows as themselves (torch.bfloat16)."""
        return frozenset(f"{lib}.{n}" for lib, names in self.typed.walk.symbols.items() for n in names)


def load_catalog(directory: str | Path) -> Catalog:
    """The catalog of another folder (a copy of patterns/catalog/ with the same eight files), every file read and
    checked now: CatalogError (`<directory>/<file>.yaml:line: what is wrong`) for the first that is malformed."""
    out = Catalog(Path(directory))
    out.check()
    return out


@lru_cache(maxsize=1)
def catalog() -> Catalog:
    return Catalog()


# -- kernels.yaml as questions --------------------------------------------------------------------
@lru_cache(maxsize=4096)
def kernel_covers(name: str) -> frozenset[str]:
    """The primitives a kernel (dotted name) does in one launch; empty when the table does not know it, and
    for a layer's forward_native (`native:...`: several PyTorch ops, not one launch)."""
    if name.startswith("native:"):
        return frozenset()
    for rx, covers in catalog().kernels:
        if rx.search(name):
            return covers
    return frozenset()


def is_dispatcher(name: str) -> bool:
    """A custom op that only calls the backend's implementation (unified_attention_with_output): it fuses
    what the implementation's kernels fuse, and is evidence only when none of them is known."""
    return any(rx.search(name) for rx in catalog().dispatchers)


def fuses(covers: frozenset[str], need: tuple[str, ...], optional: tuple[str, ...] = ()) -> bool:
    """A kernel or pass fuses a scenario when it does all of its primitives and nothing outside it."""
    want = set(need)
    return bool(want) and want <= covers and covers <= want | set(optional) | _NEUTRAL


# Primitives a fusing kernel may do besides the scenario's without changing what it is.
_NEUTRAL = {"split", "view", "cast", "scale"}


def kernel_covers_of(kernel, op=None) -> frozenset[str]:
    """What a kernel of the walk does: its name's primitives (kernels.yaml); a grouped GEMM of the experts
    ("experts") is the experts' GEMM too ("matmul": a W8A8 checkpoint's grouped_matmul_swiglu_quant is GEMM +
    SwiGLU + quant) where it surely runs (no condition) or the op is a quantised checkpoint's experts (their
    quant type known: the fused kernels under the comm method's own tests). The quantised branch of an
    unquantised walk is only what its name says, so no claim rests on a branch that does not run there."""
    covers = kernel_covers(kernel.name)
    if "experts" in covers and (getattr(kernel, "condition", None) is None
                                or (op is not None and op.attrs.get("quant_type"))):
        return covers | {"matmul"}
    return covers


def kernel_fuses(covers: frozenset[str], need: tuple[str, ...]) -> bool:
    """One kernel fuses a scenario when it does at least all of the scenario's primitives."""
    return bool(need) and set(need) <= covers


COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "all_to_all")


def collective_functions(kind: str) -> list[str]:
    """The functions of the trees that run a collective of this kind (leaf_ops.yaml `functions`: allreduce is
    tensor_model_parallel_all_reduce), as a traced pass pattern names them."""
    if kind not in COLLECTIVES:
        return []
    return sorted(name for name, info in catalog().typed.leaf_ops.functions.items() if info.kind == kind)
