"""Find the data folders (patterns/, templates/) both in a wheel and in a source checkout."""

from __future__ import annotations

from pathlib import Path

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
