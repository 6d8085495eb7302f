"""Every file of patterns/catalog/, loaded once: the policy the code asks instead of holding it.

leaf_ops   classes, functions and tensor methods that are one op; the assume table of platform tests
kernels    what one device kernel does, as primitive ops (kernel_covers, and when that fuses a scenario)
walk       limits of the walk, which alternative a construction defaults to, what the runtime hands code
composites the parts a composite layer (MoE) is walked to, per backend
aliases    marketing names -> architectures;  presets: published config.json dimensions
devices    device profiles for the estimate (read through estimate/benefit.py, which also takes a user file)
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache

from ..resources import data_dir, load_yaml


class Catalog:
    def _read(self, name: str) -> dict:
        path = data_dir("patterns") / "catalog" / f"{name}.yaml"
        return load_yaml(path.read_text(encoding="utf-8")) or {}

    @cached_property
    def leaf_ops(self) -> dict:
        return self._read("leaf_ops")

    @cached_property
    def kernels(self) -> list[tuple[re.Pattern, frozenset[str]]]:
        return [(re.compile(e["match"]), frozenset(e["covers"])) for e in self._read("kernels")["kernels"]]

    @cached_property
    def dispatchers(self) -> list[re.Pattern]:
        """Entries marked `dispatch: true`: vLLM custom ops that hand the work to the attention backend's impl."""
        return [re.compile(e["match"]) for e in self._read("kernels")["kernels"] if e.get("dispatch")]

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

    def limit(self, name: str) -> int:
        return int(self.walk["limits"][name])

    @cached_property
    def default_choice(self) -> list[dict]:
        """Ordered preferences among conditional constructions: [{name: regex, unless_all: regex}, ...]."""
        out = []
        for p in self.walk.get("default_choice", []):
            out.append({"id": p["id"], "name": re.compile(p["name"], re.IGNORECASE if p.get("ignore_case") else 0),
                        "unless_all": re.compile(p["unless_all"]) if p.get("unless_all") else None})
        return out

    @cached_property
    def roles(self) -> list[tuple[str, re.Pattern, re.Pattern]]:
        """(role, attribute-name regex, lowercased class-name regex), in the order they are tried."""
        return [(r["role"], re.compile(r["attr"]), re.compile(r["class"])) for r in self.walk.get("roles", [])]

    @cached_property
    def placeholders(self) -> frozenset[str]:
        return frozenset(self.walk.get("placeholders", []))

    @cached_property
    def runtime(self) -> dict:
        return self.walk.get("runtime", {})

    @cached_property
    def symbols(self) -> frozenset[str]:
        """Dotted names of outside libraries' constants the evaluator knows as themselves (torch.bfloat16)."""
        return frozenset(f"{lib}.{n}" for lib, names in self.walk.get("symbols", {}).items() for n in names)


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


def kernel_fuses(covers: frozenset[str], need: tuple[str, ...]) -> bool:
    """One kernel fuses a scenario when it does at least all of the scenario's primitives."""
    return bool(need) and set(need) <= covers


COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "all_to_all")


def collective_functions(kind: str) -> list[str]:
    """The functions of the trees that run a collective of this kind (leaf_ops.yaml `functions`: allreduce is
    tensor_model_parallel_all_reduce), as a traced pass pattern names them."""
    if kind not in COLLECTIVES:
        return []
    return sorted(name for name, info in catalog().leaf_ops["functions"].items() if info.get("kind") == kind)
