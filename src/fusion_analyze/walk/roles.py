"""Code locations a user looks for (model, backbone, decoder layer, attention, MLP / MoE), recorded as the walk
meets the modules that play them."""

from __future__ import annotations

from ..catalog import catalog
from .construction.constructor import Instance
from .frame import WalkerState, _Frame
from ..ir.ops import RoleLocation
from ..semantics.values import selecting
from ..ir.conditions import as_text


class Roles(WalkerState):
    """Mixin of Walker: role locations."""

    def _role(self, role: str, inst: Instance, method: str = "forward") -> None:
        if inst.cls is None:
            return
        if role in self.locations:
            kind = getattr(self, "layer_kind", None)
            if kind is not None and (role, kind) not in self._role_kinds and inst.cls.name != self.locations[role].cls:
                # another kind of decoder layer plays the role with another class (DeepSeek's dense MLP in layers
                # 0-2, its MoE block in the others): kept, for the role its ops show it plays
                saved, self.locations = self.locations, dict(self.locations)
                self.locations.pop(role)
                self._role(role, inst, method)
                self._role_kinds[(role, kind)] = self.locations[role]
                self.locations = saved
            return
        self.locations[role] = self._location(inst, method)
        kind = getattr(self, "layer_kind", None)
        if kind is not None:
            self._role_kinds.setdefault((role, kind), self.locations[role])

    def _location(self, inst: Instance, method: str = "forward") -> RoleLocation:
        """Where `inst`'s class and the method that runs for it on this backend (a patch first) are."""
        assert inst.cls is not None
        fwd = self._forward_of(inst.cls, method)
        f_file = f_line = None
        patched = None
        if fwd is not None:
            owner, fn, module, patch = fwd
            f_file, f_line = module.rel, module.line_of(fn)
            patched = f"{patch.file}:{patch.line}" if patch else None
        return RoleLocation(inst.cls.name, inst.cls.module.rel, inst.cls.line, f_file, f_line, patched)

    def _layer_role(self, element: Instance, path: str = "layers") -> None:
        self._role("decoder_layer", element)
        if element.alternatives and element.cls is not None and not any(a["path"] == path for a in self.alternatives):
            self.alternatives.append({  # get_layer() picks the class per layer index
                "path": path, "chosen": element.cls.name, "condition": as_text(element.condition),
                "others": sorted({(a.name, as_text(selecting(a.condition)[0]) or "") for a in element.alternatives}), "decided": False,
            })

    def _role_for_submodule(self, frame: _Frame, name: str, sub: Instance, kind: str | None = None) -> None:
        model = self.locations.get("model")
        if model is not None and frame.inst.cls is not None and frame.inst.cls.name == model.cls and "backbone" not in self.locations and kind is None:
            self._role("backbone", sub)
            return
        layer = self.locations.get("decoder_layer")
        if layer is None or frame.inst.cls is None or frame.inst.cls.name != layer.cls or kind is not None:
            return
        assert sub.cls is not None  # a module the walk calls (layers.py) or walks a method of (calls.py): its class known
        lname = sub.cls.name.lower()
        for role, attr, cls in catalog().roles:  # patterns/catalog/walk.yaml
            if attr.search(name) or cls.search(lname):
                if role not in self.locations:
                    self._role_paths[role] = f"{frame.path}.{name}" if frame.path else name
                self._role(role, sub)
                return

    def _moe_block_role(self) -> None:
        """The MoE block is the module whose forward calls the MoE layer (the FusedMoE) on the walked path, named
        once the walk has seen what it runs: not a feed-forward block a name or class pattern took for it
        (LFM2-MoE's dense `Lfm2MoeMlp` of its first layers: its class name holds "Moe"). Where kinds of decoder
        layer differ (DeepSeek's and GLM's dense first layers), the other kind's feed-forward block is the MLP. A
        block named as an MLP (GPT-OSS's `self.mlp = MLPBlock(...)`) whose forward runs a MoE layer is the MoE
        block too."""
        moe_ops = [op for op in self.ops if op.kind == "moe"]
        on_path = [op for op in moe_ops if op.steady and not op.attrs.get("other_branch")
                   and all(side == 0 for _test, side in op.branches)]
        holder = next((self._moe_holders[op.id] for op in on_path + moe_ops if op.id in self._moe_holders), None)
        layer = self.locations.get("decoder_layer")
        if holder is not None and holder.cls is not None and (layer is None or holder.cls.name != layer.cls) \
                and holder.cls.name not in {loc.cls for role, loc in self.locations.items() if role in ("model", "backbone")}:
            found = self._location(holder)
            before = self.locations.get("moe")
            if before is None or before.cls != found.cls:
                self.locations["moe"] = found
                if before is not None and "mlp" not in self.locations:
                    self.locations["mlp"] = before  # the feed-forward block a pattern took for the MoE block
                elif before is None and "mlp" in self.locations and self.locations["mlp"].cls == found.cls:
                    self.locations.pop("mlp")
            return
        kind = moe_ops[0].attrs.get("layer_kind") if moe_ops else None
        if kind is not None:
            for role in ("moe", "mlp"):
                in_kind = self._role_kinds.get((role, kind))
                here = self.locations.get(role)
                if in_kind is not None and here is not None and in_kind.cls != here.cls:
                    self.locations["moe"] = in_kind
                    if "mlp" not in self.locations or role == "mlp":
                        self.locations["mlp"] = here  # the dense kind's block
                    return
        path = self._role_paths.get("mlp")
        if "moe" in self.locations or "mlp" not in self.locations or path is None:
            return
        if any(op.id.startswith(path + ".") for op in moe_ops):
            self.locations["moe"] = self.locations.pop("mlp")
