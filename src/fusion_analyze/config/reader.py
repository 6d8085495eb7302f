"""The one reader of a model's configuration: a config.json path or a preset name (patterns/catalog/presets.yaml),
read once per analysis; the walk's facts (config.model_config) and the estimate's shapes both take its result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..errors import UserError
from ..ir.texts import say

if TYPE_CHECKING:
    from ..catalog.schema import Preset


class ConfigRead(NamedTuple):
    values: dict  # the configuration's fields
    source: str  # where it came from, as a report says it
    complete: bool  # a checkpoint's whole config.json: a field it lacks is absent (getattr's default)
    left_out: tuple = ()  # fields of the published file a preset leaves out: unknown, never absent


def presets() -> Mapping[str, Preset]:
    from ..catalog import catalog

    return catalog().typed.presets.presets


def preset_named(name: str) -> str | None:
    """The preset a name names: the exact key, else the one key equal to it but for case (GLM-4.7, glm-4.7)."""
    if name in presets():
        return name
    found = [k for k in presets() if k.lower() == name.strip().lower()]
    return found[0] if len(found) == 1 else None


def preset_for(query: str, architecture: str) -> str | None:
    """The preset a model query names (its marketing name, `fusion-analyze Qwen3-8B`), where the preset is a
    checkpoint of the architecture the query resolved to; None otherwise (a preset of another architecture is
    never applied by name: `--config` says which configuration to read)."""
    name = preset_named(query)
    if name is None:
        return None
    archs = presets()[name].config.get("architectures") or []
    return name if architecture in archs else None


def read_config(spec: str) -> ConfigRead:
    """(config, where it came from, complete?, left out) of a config.json path or a preset name. A config.json is
    the checkpoint's whole configuration; a preset is complete where it says so (its published config.json but for
    the fields it names as left out), else it holds only some published fields."""
    name = spec if spec in presets() else None
    if name is None and not Path(spec).is_file():
        name = preset_named(spec)
    if name is not None:
        p = presets()[name]
        return ConfigRead(dict(p.config), say("preset", name=name, source=p.source), p.complete, tuple(p.left_out))
    path = Path(spec)
    if not path.is_file():
        raise UserError(f"--config {spec}: not a file or a preset; use a config.json path or one of {', '.join(sorted(presets()))}")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"--config {spec}: not valid JSON ({exc}); give an HF config.json")
    if not isinstance(cfg, dict):
        raise UserError(f"--config {spec}: not a JSON object; give an HF config.json")
    return ConfigRead(cfg, path.name, True)


def stated_dtype(values: dict | None) -> str | None:
    """The checkpoint's dtype as its configuration states it (`dtype`, else `torch_dtype`; the top level, else a
    multimodal configuration's `text_config`), without the `torch.` prefix; None when it states none. The one
    reading of it: the estimate's element size and the graph passes' dtype guards both take it."""
    stated = None
    for sub in (values, values.get("text_config")) if values is not None else ():
        if isinstance(sub, dict):
            stated = stated or sub.get("dtype") or sub.get("torch_dtype")
    return stated.removeprefix("torch.") if isinstance(stated, str) else None
