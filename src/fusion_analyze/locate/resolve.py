"""Resolve a model query to one registry entry, then verify it against the file's own text."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


from ..catalog.schema import Alias
from ..errors import UserError
from ..index.modules import Definition, ModuleIndex
from ..ir.texts import say
from .ascend import Override, Patch, Replacements, placed, read_overrides, read_patches
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
    name: str | None = None  # the name resolved: an HF repo id's part after the slash (Qwen/Qwen3-8B -> Qwen3-8B)
    config_path: str | None = None  # the config.json of a query that is one, or of a checkpoint directory

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


def _family(query: str) -> tuple[str, bool]:
    """qwen2 for Qwen2.5 / Qwen2.5-7B-Instruct, llama3 for Llama-3.1-8B: the name less its size and chat
    suffixes and its minor version; and whether a minor version was dropped."""
    name = _versioned(query)
    dropped = re.sub(r"(\d+)\.\d+$", r"\1", name)
    return _norm(dropped), dropped != name


def _versioned(query: str) -> str:
    """The name less its size and chat suffixes: Qwen2.5-7B-Instruct -> Qwen2.5."""
    name = re.sub(r"[-_ ]\d+(\.\d+)?[bBmM]([-_ ].*)?$", "", query.strip())
    return re.sub(r"[-_ ](instruct|chat|base|it|hf)$", "", name, flags=re.IGNORECASE)


def _split_version(name: str) -> tuple[str, float, str] | None:
    """(family letters, version, the rest) of a versioned name: glm-4.8 -> (glm, 4.8, ''), DeepSeek-V3 ->
    (deepseek, 3.0, ''), glm4_moe -> (glm, 4.0, 'moe'), qwen3_5 -> (qwen, 3.5, ''); None without a version."""
    m = re.match(r"^([a-z]+)[-_ ]?v?(\d+)(?:[._](\d+))?(.*)$", name.strip().lower())
    if not m:
        return None
    version = float(f"{m.group(2)}.{m.group(3) or 0}")
    return m.group(1), version, _norm(m.group(4))


def _repo_name(query: str) -> str | None:
    """The model name of an HF repo id (`Qwen/Qwen3-8B` -> `Qwen3-8B`), or None when the query is not one."""
    m = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/([A-Za-z0-9][A-Za-z0-9_.-]*)", query)
    return m.group(1) if m else None


def _docstring(text: str) -> str:
    """The module docstring of a source text (after its header comments), or ''."""
    m = re.match(r'(?:\s*(?:#[^\n]*)?\n)*\s*[rRuU]?("""|\'\'\'|"|\')(.*?)\1', text, re.DOTALL)
    return m.group(2) if m else ""


_AUTO_CAUSAL_LM = "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"


def _auto_causal_lm(index, model_type: str) -> str | None:
    """The causal-LM class transformers' auto mapping gives `model_type` (`llama` -> LlamaForCausalLM), read
    statically from the transformers tree of the session, if it has one."""
    tree = index.trees.get("transformers")
    if tree is None:
        return None
    return _auto_table(str(tree.package_dir / "models" / "auto" / "modeling_auto.py")).get(model_type)


@lru_cache(maxsize=4)
def _auto_table(path: str) -> dict:
    import ast

    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == _AUTO_CAUSAL_LM for t in node.targets):
            for pair in ast.walk(node.value):
                if isinstance(pair, ast.Tuple) and len(pair.elts) == 2:
                    key, name = pair.elts
                    if isinstance(key, ast.Constant) and isinstance(name, ast.Constant) \
                            and isinstance(key.value, str) and isinstance(name.value, str):
                        out.setdefault(key.value, name.value)
    return out


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
        self._replacements: Replacements | None = None

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

    @property
    def replacements(self) -> Replacements:
        """The index of every replacement of the Ascend tree: its patch modules' by target, its model-class
        registrations, its custom ops (read once)."""
        if self._replacements is None:
            self._replacements = Replacements(self.patches, self.overrides)
        return self._replacements

    # -- query forms -------------------------------------------------------------------------
    def resolve(self, query: str) -> Location:
        query = query.strip()
        if not query:
            raise UserError("empty model query: pass an architecture (Qwen3ForCausalLM), a model type (qwen3) or a name (GLM-4.7)")
        path = Path(query).expanduser()
        if path.is_dir():  # a checkpoint directory: its config.json names the architecture and is the --config
            cfg = path / "config.json"
            if not cfg.is_file():
                raise UserError(f"{query}: a folder without config.json; pass a checkpoint directory, its config.json "
                                f"or a model name")
            return self._from_config(str(cfg))
        if query.endswith(".json") or path.is_file():
            return self._from_config(query)
        repo = _repo_name(query)
        if repo is not None:  # an HF repo id: Qwen/Qwen3-8B is the marketing name Qwen3-8B
            try:
                loc = self._resolve_name(repo)
            except UserError as exc:
                raise UserError(f"{exc.message} (the name of the HF repo id '{query}')") from None
            loc.name = repo
            return loc
        return self._resolve_name(query)

    def _resolve_name(self, query: str) -> Location:
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
                loc = self._locate(self.by_arch[arch], "config", [arch])
                loc.config_path = str(path)
                return loc
        raise self._unknown(archs[0], extra=f" (from {path.name})")

    def _from_alias(self, query: str) -> Location | None:
        found = self._alias(query)
        if found is None:
            return None
        loc, named = found
        if not named:
            others = [n for n in self._suggestions(query) if _norm(n) != _norm(query)]
            hint = f"; did you mean {' / '.join(others)}?" if others else ""
            raise UserError(
                f"'{query}' maps to {loc.architecture} ({loc.file}), but no line of that file names it: "
                f"this vLLM tree may predate it{hint} (pass the architecture name to analyze it anyway)"
            )
        return loc

    def _alias(self, query: str) -> tuple[Location, bool] | None:
        """The location the first alias that takes `query` maps it to, and whether the file names the model;
        None where no alias takes it or this tree lacks its architecture."""
        for alias in load_aliases():
            m = re.fullmatch(alias.match, query, re.IGNORECASE)
            if not m:
                continue
            version = re.search(r"\d+(\.\d+)?", query)
            terms = [t.replace("{query_version}", version.group(0) if version else "") for t in alias.evidence]
            found = [self.by_arch[a] for a in alias.architectures if a in self.by_arch]
            if not found:
                return None  # this tree lacks the architecture: fall through to the generic search
            loc = self._locate(found[0], "alias", [query] + terms)
            return loc, self._names(loc, [query] + terms)
        return None

    def _names(self, loc: Location, terms: list[str]) -> bool:
        """A line of the model's file that names the model: its docstring or a class statement (a comment that
        mentions a model in passing, `# Older GLM-5 configs ...`, is no such line)."""
        return bool(verify(loc.definition.module, terms, limit=1, kinds=NAMING))

    def _from_type(self, query: str) -> Location:
        q = _norm(query)
        text = [e for e in self.entries if e.table == TEXT_TABLE]
        pools = [text, self.entries]
        for pool in pools:
            by_stem = [e for e in pool if _norm(_stem(e)) == q]
            by_arch = [e for e in pool if _norm(re.sub(r"(ForCausalLM|ForConditionalGeneration|Model|LMHeadModel)$", "", e.architecture)) == q]
            hits = _unique(by_stem + by_arch)
            if len(hits) > 1:
                hits = self._of_type(query, hits)
            if len(hits) == 1:
                return self._locate(hits[0], "model_type", [query])
            if len(hits) > 1:
                raise self._ambiguous(query, hits)
        # A marketing name: its family (Qwen2.5-7B-Instruct -> qwen2: size and chat suffixes and the minor
        # version dropped) against the registry's model types, before any text search. A dropped version must
        # be one the file names (GLM-4.8 is no GLM-4 model: glm4.py names no GLM-4.8).
        family, dropped = _family(query)
        if family and family != q:
            hits = _unique([e for e in text if _norm(_stem(e)) == family])
            if len(hits) > 1:
                hits = self._of_type(family, hits)
            if len(hits) == 1:
                loc = self._locate(hits[0], "model_type", [query, _stem(hits[0])])
                if not dropped or self._names(loc, [_versioned(query)]):
                    return loc
        # A marketing name without an alias: search the model files' docstrings for it.
        hits = self._grep_name(query)
        if len(hits) == 1:
            return self._locate(hits[0], "name", [query])
        if len(hits) > 1:
            raise self._ambiguous(query, hits)
        raise self._unknown(query)

    def _of_type(self, query: str, hits: list[RegistryEntry]) -> list[RegistryEntry]:
        """Of several architectures one file (or spelling) serves, the one the model type's configuration names:
        transformers' causal-LM auto mapping where a transformers tree is given, else `<Type>ForCausalLM` where
        the others of that spelling are aliases of its class (`llama`: LlamaForCausalLM, not LLaMAForCausalLM,
        nor Cwm / InternLM3 / TeleChat3 of the same llama.py)."""
        stems = {_stem(e) for e in hits}
        model_type = stems.pop() if len(stems) == 1 else query.lower().replace("-", "_")
        named = _auto_causal_lm(self.index, model_type)
        if named is not None and any(e.architecture == named for e in hits):
            return [e for e in hits if e.architecture == named]
        q = _norm(query)
        causal = [e for e in hits if e.architecture.endswith("ForCausalLM") and _norm(e.architecture) == q + "forcausallm"]
        if len(causal) > 1 and len({e.class_name for e in causal}) == 1:
            causal = [e for e in causal if e.architecture == e.class_name] or causal
        return causal if len(causal) == 1 else hits

    def _grep_name(self, query: str) -> list[RegistryEntry]:
        """The text-generation architectures whose file's docstring names `query` as a whole name (a model's
        file says which models it implements there; a comment that mentions another model does not count).
        Of a file with several architectures, the one whose name starts with the query's family."""
        if len(query) < 4 or not re.search(r"\d", query):
            return []
        files: dict[str, list[RegistryEntry]] = {}
        for e in self.entries:
            if e.table == TEXT_TABLE:
                files.setdefault(e.module, []).append(e)
        hits = []
        letters = _split_version(query)
        for module, entries in sorted(files.items()):
            found = self.index.module_path(module)
            if found is None or not found[0].is_file():
                continue
            doc = _docstring(found[0].read_text(encoding="utf-8", errors="replace")[:20000])
            if not _mentions(doc, query):
                continue
            if len(entries) > 1 and letters is not None:
                own = [e for e in entries if _norm(e.architecture).startswith(letters[0])]
                entries = own or entries
            hits.extend(entries if len(entries) > 1 else entries[:1])
        return _unique(hits)
    # -- building the answer ------------------------------------------------------------------
    def _locate(self, entry: RegistryEntry, how: str, terms: list[str]) -> Location:
        module = self.index.get(entry.module)
        if module is None:
            rel = entry.module.replace(".", "/")
            err = next((e for f, e in self.index.errors.items() if f.startswith(rel)), None)
            why = err.reason if err else say("module_not_found")
            raise UserError(say("registry_unreadable", arch=entry.architecture, module=entry.module, why=why))
        definition = self.index.lookup(entry.module, entry.class_name)
        if not isinstance(definition, Definition) or definition.kind != "class":
            raise UserError(say("registry_class_missing", arch=entry.architecture, cls=entry.class_name, file=module.rel))
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
        close = self._suggestions(query)
        hint = (f"did you mean {' / '.join(close)}? (all: 'fusion-analyze list-models')" if close
                else "run 'fusion-analyze list-models' to see them")
        return UserError(f"unknown model '{query}'{extra}: not in this tree's registry, or a version it does not "
                         f"have; {hint}")

    def _suggestions(self, query: str, n: int = 3) -> list[str]:
        """The names of this tree nearest to `query`: marketing names (aliases' examples and presets, where the
        file names them), model types and architectures. A versioned name ranks the names of its family by
        version first (glm-4.8: GLM-4.7, GLM-4.6), otherwise by similarity (deepsek-v3: DeepSeek-V3)."""
        from ..catalog import catalog

        text = [e for e in self.entries if e.table == TEXT_TABLE]
        names = list(dict.fromkeys([*catalog().typed.presets.presets, *(n for a in load_aliases() for n in a.examples),
                                    *sorted({_stem(e) for e in text}), *(e.architecture for e in self.entries)]))
        qn, qv = _norm(query), _split_version(query)

        def score(name: str) -> float:
            nv = _split_version(name)
            if qv is not None and nv is not None and nv[0] == qv[0]:
                rest = difflib.SequenceMatcher(None, qv[2], nv[2]).ratio()  # 1.0 for two empty rests
                return 1.0 + 0.5 / (1.0 + abs(nv[1] - qv[1])) + 0.5 * rest
            return difflib.SequenceMatcher(None, qn, _norm(name)).ratio()

        ranked = sorted(((score(name), i, name) for i, name in enumerate(names)), key=lambda t: (-t[0], t[1]))
        out: list[str] = []
        for value, _i, name in ranked:
            if value < 0.6 or len(out) >= n:
                break
            if _norm(name) in {_norm(o) for o in out} or not self._has(name):
                continue
            out.append(name)
        return out

    def _has(self, name: str) -> bool:
        """This tree serves `name`: an architecture or model type of its registry, or a marketing name an alias
        maps to an architecture of it whose file names it."""
        if name in self.by_arch or any(_stem(e) == name for e in self.entries):
            return True
        try:
            found = self._alias(name)
        except UserError:
            return False
        return found is not None and found[1]


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


NAMING = ("doc", "class")  # the lines that name a model: its file's docstring and class statements


def verify(module, terms: list[str], limit: int = 8, kinds: tuple[str, ...] = ("doc", "comment", "class")) -> list[Evidence]:
    """Lines of the module's docstring, comments and class definitions (those of `kinds`) that name any term."""
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
        if kind in kinds and any(_mentions(s, t) for t in terms):
            if kind == "comment" and "Copyright" in s:
                continue
            out.append(Evidence(module.rel, no, s))
            if len(out) >= limit:
                break
    return out
