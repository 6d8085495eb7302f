"""Which alternative of a conditional construction the walk takes when the evaluator cannot decide it: a
preference read from patterns/catalog/walk.yaml; the others stay listed as alternatives with their conditions."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dataclasses import replace

from ...catalog import catalog
from ...ir.conditions import Condition, either

if TYPE_CHECKING:
    from .instance import Instance


def pick(options: list[Instance]) -> Instance | None:
    """Default of conditional constructions (patterns/catalog/walk.yaml `default_choice`): the first preference
    that names a real option, else the first real module; the others stay listed as alternatives."""
    policy = catalog()
    real = [o for o in options if o.cls is not None and o.cls.name not in policy.placeholders]
    if not real:
        return options[0] if options else None
    held = _one_class(real)
    if held is not None:  # whichever is built, a module of that class is: one choice, its condition the union
        held.alternatives = [o for o in _dedupe(options) if o not in real]
        return held
    chosen = None
    for pref in policy.default_choice:
        if pref["unless_all"] is not None and all(pref["unless_all"].search(o.cls.name) for o in real):
            continue
        named = [o for o in real if pref["name"].search(o.cls.name)]
        if named:
            chosen = named[0]
            break
    chosen = chosen or _prefer_plain(real)[0]
    chosen.alternatives = [o for o in _dedupe(options) if o is not chosen and (o.cls is None or o.cls.qualname != chosen.cls.qualname)]
    return chosen


def _one_class(real: list[Instance]) -> Instance | None:
    """Modules a builder built under other names, of one class, handed on under conditions whose union is a
    conjunction (`kwargs["q_proj"] if self.q_lora_rank is None else kwargs["q_b_proj"]`, both
    ColumnParallelLinear): one instance held under that union (None: always), each module it may be kept in
    `holds` with its own condition; None where the options are of several classes, one module, built here (a
    call each: what they are built with may differ), or their conditions do not join."""
    distinct = _dedupe(real)
    if len(distinct) < 2 or len({o.cls.qualname if o.cls else None for o in distinct}) != 1 \
            or any(o.attr_name is None for o in distinct) or len({o.attr_name for o in distinct}) < 2:
        return None
    union = distinct[0].condition
    for o in distinct[1:]:
        joined, union = either(union, o.condition)
        if not joined:
            return None
    holds = tuple((o.attr_name, o.condition) for o in distinct)
    return replace(distinct[0], condition=union, holds=holds, alternatives=[])


def _explain(cond: Condition | None, local_text: dict[str, str]) -> Condition | None:
    """`is_moe_layer` says little: show what the local flag was computed from (a note for the report)."""
    if not cond:
        return cond
    notes = [f"{name} = {' '.join(local_text[name].split())}" for name in re.findall(r"[A-Za-z_]\w*", str(cond))
             if name in local_text and len(local_text[name]) < 300]
    return cond.with_suffix(f" [{'; '.join(dict.fromkeys(notes))}]") if notes else cond


def _prefer_plain(options: list[Instance]) -> list[Instance]:
    """A factory's plain product first: the class the taxonomy names (RotaryEmbedding), then the rest."""
    from ...catalog.taxonomy import taxonomy

    leaves = taxonomy()["classes"]
    plain = [o for o in options if o.cls is not None and o.cls.name in leaves]
    return plain[:1] + [o for o in options if o not in plain[:1]]


def _dedupe(items: list[Instance]) -> list[Instance]:
    seen, out = set(), []
    for i in items:
        key = (i.cls.qualname if i.cls else None, i.condition)
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out
