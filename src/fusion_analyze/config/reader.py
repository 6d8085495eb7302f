"""The one reader of a model's configuration: a config.json path or a preset name (patterns/catalog/presets.yaml),
read once per analysis; the walk's facts (config.model_config) and the estimate's shapes both take its result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..errors import UserError

if TYPE_CHECKING:
    from ..catalog.schema import Preset


class ConfigRead(NamedTuple):
    values: dict  # the configuration's fields
    source: str  # where it came from, as a report says it
    complete: bool  # a checkpoint's whole config.json (a preset holds only the published fields the estimate reads)


def presets() -> Mapping[str, Preset]:
    from ..catalog import catalog

    return catalog().typed.presets.presets


def read_config(spec: str) -> ConfigRead:
    """(config, where it came from, complete?) of a config.json path or a preset name. A preset holds only the
    published fields the estimate reads (not complete); a config.json is the checkpoint's whole configuration."""
    if spec in presets():
        p = presets()[spec]
        return ConfigRead(dict(p.config), f"preset {spec} ({p.source})", False)
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
