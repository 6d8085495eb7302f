"""Resolve a model query to one registry entry, then verify it against the file's own text."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path


from ..catalog.schema import Alias
from ..errors import UserError
from ..index.modules import Definition, ModuleIndex
from .ascend import Override, Patch, placed, read_overrides, read_patches
from .registry import TEXT_TABLE, RegistryEntry, read_registry


@dataclass
class Evidence:
    file: str
    line: int
    text: str


@dataclass
class Location:
    architecture: str
    entry: RegistryEntry
    file: str
    class_name: str
    line: int
    definition: Definition
    verification: list[Evidence]
    ascend_override: Override | None
    patches: list[Patch]
    sources: dict
    how: str  # which query form matched

    def to_json(self) -> dict:
        return {
            "architecture": self.architecture,
            "file": self.file,
            "class": self.class_name,
            "line": self.line,
            "verification": [e.__dict__ for e in self.verification],
            "ascend_override": None if self.ascend_override is None else {
                "file": self.ascend_override.file,
                "class": self.ascend_override.class_name,
                "line": self.ascend_override.line,
            },
            "patches": [{"file": p.file, "line": p.line, "target": p.target} for p in self.patches],
            "sources": self.sources,
        }


def _family(query: str) -> str:
    """qwen2 for Qwen2.5 / Qwen2.5-7B-Instruct, llama3 for Llama-3.1-8B: the name less its size and chat
    suffixes and its minor version."""
    name = re.sub(r"[-_ ]\d+(\.\d+)?[bBmM]([-_ ].*)?$", "", query.strip())
    name = re.sub(r"[-_ ](instruct|chat|base|it|hf)$", "", name, flags=re.IGNORECASE)
    name = re.sub(r"(\d+)\.\d+$", r"\1", name)
    return _norm(name)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _stem(entry: RegistryEntry) -> str:
    return entry.module.rsplit(".", 1)[-1]


def load_aliases() -> tuple[Alias, ...]:
    from ..catalog import catalog

    return catalog().typed.aliases.aliases


class Resolver:
    def __init__(self, index: ModuleIndex):
        self.index = index
        self.entries = read_registry(index)
        self.by_arch = {e.architecture: e for e in self.entries}
        self._overrides: dict | None = None
        self._patches: list | None = None

    @property
    def overrides(self) -> dict[str, Override]:
        if self._overrides is None:
            self._overrides = read_overrides(self.index)
        return self._overrides

    def _override(self, architecture: str) -> Override | None:
        o = self.overrides.get(architecture)
        return placed(self.index, o) if o is not None else None

    @property
    def patches(self) -> list[Patch]:
        if self._patches is None:
            self._patches = read_patches(self.index)
        return self._patches

    # -- query forms -------------------------------------------------------------------------
    def resolve(self, query: str) -> Location:
        query = query.strip()
        if not query:
            raise UserError("empty model query: pass an architecture (Qwen3ForCausalLM), a model type (qwen3) or a name (GLM-4.7)")
        if query.endswith(".json") or Path(query).is_file():
            return self._from_config(query)
        if query in self.by_arch:
            return self._locate(self.by_arch[query], "architecture", [query])
        ci = [e for e in self.entries if e.architecture.lower() == query.lower()]
        if len(ci) == 1:
            return self._locate(ci[0], "architecture", [ci[0].architecture])
        alias = self._from_alias(query)
        if alias is not None:
            return alias
        return self._from_type(query)

    def _from_config(self, path_text: str) -> Location:
        path = Path(path_text).expanduser()
        if not path.is_file():
            raise UserError(f"{path_text}: no such config file; pass a path to an HF config.json")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{path_text}: not valid JSON ({exc.__class__.__name__}); pass an HF config.json")
        archs = data.get("architectures") if isinstance(data, dict) else None
        if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
            raise UserError(f"{path_text}: has no \"architectures\" list; pass an HF config.json or name the architecture")
        for arch in archs:
            if arch in self.by_arch:
                return self._locate(self.by_arch[arch], "config", [arch])
        raise self._unknown(archs[0], extra=f" (from {path.name})")

    def _from_alias(self, query: str) -> Location | None:
        for alias in load_aliases():
            m = re.fullmatch(alias.match, query, re.IGNORECASE)
            if not m:
                continue
            version = re.search(r"\d+(\.\d+)?", query)
            terms = [t.replace("{query_version}", version.group(0) if version else "") for t in alias.evidence]
            found = [self.by_arch[a] for a in alias.architectures if a in self.by_arch]
            if not found:
                return None  # this tree lacks the architecture: fall through to the generic search
            entry = found[0]
            loc = self._locate(entry, "alias", [query] + terms)
            named = [e for e in loc.verification if _mentions(e.text, query) or any(_mentions(e.text, t) for t in terms)]
            if not named:
                raise UserError(
                    f"'{query}' maps to {entry.architecture} ({loc.file}), but no line of that file names it: "
                    f"this vLLM tree may predate it; pass the architecture name to analyze it anyway"
                )
            return loc
        return None

    def _from_type(self, query: str) -> Location:
        q = _norm(query)
        text = [e for e in self.entries if e.table == TEXT_TABLE]
        pools = [text, self.entries]
        for pool in pools:
            by_stem = [e for e in pool if _norm(_stem(e)) == q]
            by_arch = [e for e in pool if _norm(re.sub(r"(ForCausalLM|ForConditionalGeneration|Model|LMHeadModel)$", "", e.architecture)) == q]
            hits = _unique(by_stem + by_arch)
            if len(hits) > 1:
                causal = [e for e in hits if e.architecture.endswith("ForCausalLM") and _norm(e.architecture) == q + "forcausallm"]
                if len(causal) == 1:
                    hits = causal
            if len(hits) == 1:
                return self._locate(hits[0], "model_type", [query])
            if len(hits) > 1:
                raise self._ambiguous(query, hits)
        # A marketing name: its family (Qwen2.5-7B-Instruct -> qwen2: size and chat suffixes and the minor
        # version dropped) against the registry's model types, before any text search.
        family = _family(query)
        if family and family != q:
            hits = _unique([e for e in text if _norm(_stem(e)) == family])
            if len(hits) == 1:
                return self._locate(hits[0], "model_type", [query, _stem(hits[0])])
        # A marketing name without an alias: search the model files' own text for it.
        hits = self._grep_name(query)
        if len(hits) == 1:
            return self._locate(hits[0], "name", [query])
        if len(hits) > 1:
            raise self._ambiguous(query, hits)
        raise self._unknown(query)

    def _grep_name(self, query: str) -> list[RegistryEntry]:
        if len(query) < 4 or not re.search(r"\d", query):
            return []
        files: dict[str, list[RegistryEntry]] = {}
        for e in self.entries:
            if e.table == TEXT_TABLE:
                files.setdefault(e.module, []).append(e)
        hits = []
        for module, entries in sorted(files.items()):
            found = self.index.module_path(module)
            if found is None or not found[0].is_file():
                continue
            head = found[0].read_text(encoding="utf-8", errors="replace")[:6000]
            if _mentions(head, query):
                hits.append(entries[0])
        return hits

    # -- building the answer ------------------------------------------------------------------
    def _locate(self, entry: RegistryEntry, how: str, terms: list[str]) -> Location:
        module = self.index.get(entry.module)
        if module is None:
            rel = entry.module.replace(".", "/")
            err = next((e for f, e in self.index.errors.items() if f.startswith(rel)), None)
            why = err.reason if err else "module file not found"
            raise UserError(f"{entry.architecture}: registry names {entry.module}, which cannot be read ({why})")
        definition = self.index.lookup(entry.module, entry.class_name)
        if not isinstance(definition, Definition) or definition.kind != "class":
            raise UserError(f"{entry.architecture}: class {entry.class_name} not found in {module.rel}")
        file = definition.module.rel
        patches = [p for p in self.patches if p.target.startswith(definition.module.name + ".")]
        family = re.sub(r"(ForCausalLM|ForConditionalGeneration|LMHeadModel|Model)$", "", entry.architecture)
        evidence = verify(definition.module, _unique_str(terms + [family]))
        tree_v = self.index.trees.get("vllm")
        tree_a = self.index.trees.get("vllm_ascend")
        sources = {
            "vllm": {"version": tree_v.version if tree_v else None},
            "vllm_ascend": {"version": tree_a.version} if tree_a else None,
        }
        return Location(
            architecture=entry.architecture, entry=entry, file=file, class_name=definition.name,
            line=definition.line, definition=definition, verification=evidence,
            ascend_override=self._override(entry.architecture), patches=patches,
            sources=sources, how=how,
        )

    def candidates_text(self, hits: list[RegistryEntry]) -> str:
        parts = []
        for e in hits:
            mod = self.index.get(e.module)
            ev = verify(mod, [re.sub(r"ForCausalLM$", "", e.architecture)], limit=1) if mod else []
            where = mod.rel if mod else e.module
            proof = f" [L{ev[0].line}: {ev[0].text[:60]}]" if ev else ""
            parts.append(f"{e.architecture} ({where}){proof}")
        return "; ".join(parts)

    def _ambiguous(self, query: str, hits: list[RegistryEntry]) -> UserError:
        return UserError(f"'{query}' is ambiguous: {self.candidates_text(hits)}; pass one architecture name")

    def _unknown(self, query: str, extra: str = "") -> UserError:
        names = [e.architecture for e in self.entries] + sorted({_stem(e) for e in self.entries})
        names += [a.architectures[0] for a in load_aliases() if a.architectures[0] in self.by_arch]
        close = difflib.get_close_matches(query, names, n=5, cutoff=0.5)
        if not close:
            close = difflib.get_close_matches(query.lower(), [n.lower() for n in names], n=5, cutoff=0.5)
        hint = f"closest: {', '.join(close)}" if close else "run 'fusion-analyze list-models' to see them"
        return UserError(f"unknown model '{query}'{extra}: not in this tree's registry; {hint}")


def _unique(entries: list[RegistryEntry]) -> list[RegistryEntry]:
    seen, out = set(), []
    for e in entries:
        if e.architecture not in seen:
            seen.add(e.architecture)
            out.append(e)
    return out


def _unique_str(items: list[str]) -> list[str]:
    seen, out = set(), []
    for i in items:
        if i and i.lower() not in seen:
            seen.add(i.lower())
            out.append(i)
    return out


def _mentions(text: str, term: str) -> bool:
    """`term` appears as a whole name: GLM-4.7 matches 'GLM-4.7 model', not 'GLM-4.7-Flash'."""
    if not term:
        return False
    strict = r"(?<![A-Za-z0-9])" + re.escape(term).replace(r"\-", "[-_ ]?") + r"(?![-.]?[A-Za-z0-9])"
    if re.search(strict, text, re.IGNORECASE):
        return True
    # Identifier terms (Qwen3Moe) also count as the head of a CamelCase name: Qwen3MoeForCausalLM.
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", term):
        return re.search(r"(?<![A-Za-z0-9])" + re.escape(term) + r"(?![a-z0-9])", text) is not None
    return False


def verify(module, terms: list[str], limit: int = 8) -> list[Evidence]:
    """Lines of the module's docstring, comments and class definitions that name any term."""
    out: list[Evidence] = []
    lines = module.path.read_text(encoding="utf-8", errors="replace").splitlines()
    in_doc = False
    doc_done = False
    for no, raw in enumerate(lines, start=1):
        s = raw.strip()
        kind = None
        if not doc_done and (s.startswith('"""') or s.startswith("'''")) and not in_doc:
            kind = "doc"
            in_doc = not (len(s) > 3 and s.endswith(s[:3]) and len(s) >= 6)
            if not in_doc:
                doc_done = True
        elif in_doc:
            kind = "doc"
            if s.endswith('"""') or s.endswith("'''"):
                in_doc = False
                doc_done = True
        elif s.startswith("#"):
            kind = "comment"
        elif s.startswith("class "):
            kind = "class"
        elif s and not s.startswith(("from ", "import ")):
            doc_done = True
        if kind and any(_mentions(s, t) for t in terms):
            if kind == "comment" and "Copyright" in s:
                continue
            out.append(Evidence(module.rel, no, s))
            if len(out) >= limit:
                break
    return out
