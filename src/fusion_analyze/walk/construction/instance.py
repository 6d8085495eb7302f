"""What the construction knows of one built module (an Instance): its class, the call that built it, what its
`self.<name>` are built as, its layer list's elements. Below the constructor and its mixins, which all make them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from ...index.modules import Definition
from ...ir.conditions import Condition
from ...semantics.scope import Scope
from .alternatives import OtherChoice


@dataclass
class Instance:
    cls: Definition | None  # None for a value that is not a module (None, a tensor, ...)
    call: cst.Call | None = None
    scope: Scope | None = None  # where `call` was evaluated (to bind the class's __init__ params)
    condition: Condition | None = None  # when this alternative is built (code until rendered)
    alternatives: list["Instance"] = field(default_factory=list)
    element: "Instance | None" = None  # for layer lists
    repeat: str | None = None  # config name that sets the list length
    factory: str | None = None  # qualified name of the factory that returned it
    fused_by: str | None = None  # the Transformers backend's load-time rewrite that built it (hf_fusers.py)
    # what another configuration value builds here (the choice was decided):
    # [(class, condition, file, line, [(key, value that selects it)])]
    decided: list[OtherChoice] = field(default_factory=list)
    # what the construction learned of this instance, kept on it for the walk:
    built: dict[str, "Instance | None"] = field(default_factory=dict)  # self.<name> -> what builds it (None: unknown)
    outside: dict[str, str] = field(default_factory=dict)  # self.<name> -> the class outside the trees that builds it
    why: dict[str, str] = field(default_factory=dict)  # self.<name> -> why no class is known to build it
    skip_parts: tuple[str, ...] = ()  # composite parts its builder takes out (walk/hf/fusers.py)
    # for a layer list: i -> the element built for layer i (the layer list's factory with the index bound: its
    # `prefix` "model.layers.i" or the comprehension's index i), or None where the list is not built per index
    per_layer: Callable[[int], Instance | None] | None = None
    count: int | None = None  # a layer list's length where the configuration gives it
    # a layer list's element: (its call, {name: carrier | decoded}, {}): how the call's arguments carry the index
    index_binding: tuple | None = None
    init_chain: list | None = None  # (class, __init__, scope) down its super().__init__ calls, bound once
    attr_name: str | None = None  # the `self.<name>` of its builder it was first built as (q_b_proj)
    # several modules of one class held under complementary conditions (default_choice.pick): each one's
    # attr_name and condition (`self.q_proj = kwargs["q_proj"] if self.q_lora_rank is None else kwargs["q_b_proj"]`)
    holds: tuple = ()
    value_chain: list | None = None  # its own copy of that chain, read for the values of self.<name>
    # (module, call, TypeError) of a call on the way that builds it which Python refuses before it runs (a wrapper's
    # `f(*args, num_experts=n)` where args holds the caller's positionals: scope.bind_params)
    raises: tuple | None = None

    @property
    def name(self) -> str:
        return self.cls.name if self.cls else "None"


def _layer_list(element: Instance, repeat: str | None, per_layer=None) -> Instance:
    return Instance(element.cls, None, None, element.condition, element=element, repeat=repeat, per_layer=per_layer)
