"""Find the data folders (patterns/, templates/) both in a wheel and in a source checkout, and read their YAML
(with line numbers, for the `file:line` errors of the pattern and catalog loaders)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    # A wheel carries them under fusion_analyze/_data; an editable install or a
    # checkout keeps them at the top of the repository.
    for candidate in (_PKG / "_data" / name, _PKG.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"fusion-analyze data folder '{name}' is missing from the installation")


def load_yaml(text: str):
    """yaml.safe_load, with libyaml's parser when PyYAML has it (about ten times faster)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


# -- YAML with line numbers: the one mechanism behind every `file:line: what is wrong` of the data files -------
class Lines(dict):
    """A mapping read by `load_yaml_lines`: it remembers its own line and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict


@lru_cache(maxsize=1)
def _lined_loader() -> Any:
    import yaml

    # libyaml's parser when PyYAML has it (10x faster), each mapping built as a Lines
    lines_loader = type("LinesLoader", (getattr(yaml, "CSafeLoader", yaml.SafeLoader),), {})

    def construct_mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        out = Lines()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for knode, vnode in node.value:
            key = loader.construct_object(knode, deep=True)
            out[key] = loader.construct_object(vnode, deep=True)
            out.key_lines[key] = knode.start_mark.line + 1
        return out

    lines_loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return lines_loader


def load_yaml_lines(text: str):
    """yaml.safe_load where every mapping is a `Lines` (its line and its keys' lines), for errors that name the
    line. Raises yaml.YAMLError; `yaml_error_line` is the line a yaml.MarkedYAMLError points at."""
    import yaml

    return yaml.load(text, Loader=_lined_loader())


def yaml_error_line(exc) -> int:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return (mark.line + 1) if mark else 1


def plain(value):
    """The value with its `Lines` mappings turned into plain dicts (what yaml.safe_load returns)."""
    if isinstance(value, dict):
        return {k: plain(x) for k, x in value.items()}
    if isinstance(value, list):
        return [plain(x) for x in value]
    return value
