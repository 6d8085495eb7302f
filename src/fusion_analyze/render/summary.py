"""The short terminal summary (rich): model, versions, counts by status, top open opportunities, in the
report's language (templates/labels.yaml). Only ever printed to a terminal; the report itself is written with
plain file I/O."""

from __future__ import annotations

import sys
from collections import Counter

from rich.console import Console
from rich.table import Table


def print_summary(a, output: str, stubs: str | None, to_stdout: bool, lang: str = "zh") -> None:
    from .markdown import labels

    L = labels(lang)
    console = Console(file=sys.stdout if to_stdout else sys.stderr, highlight=False)
    src = a.location.sources
    versions = f"vLLM {src['vllm']['version']}" + (f" · vllm-ascend {src['vllm_ascend']['version']}" if src.get("vllm_ascend") else "")
    console.print(f"[bold]{a.location.architecture}[/bold]  {a.location.file}:{a.location.line}  ({versions}, "
                  f"{L['summary_backend']} {a.session.backend})")
    counts = Counter(o.status for o in a.opportunities)
    apart = Counter(o.status for o in a.opportunities if o.conditional)  # counted apart: they rest on a test
    console.print("  " + "  ".join(f"{L['status'].get(str(k), k)}: {v}"
                                   + (f" ({L['summary_conditional'].format(n=apart[k])})" if apart[k] else "")
                                   for k, v in sorted(counts.items())))
    opens = [o for o in a.opportunities if o.status == "open" and not a.benefits[o.id].rejected]

    def share(o) -> float:  # the larger share of a step fusing it saves (the report's first section); -1: not costed
        numbers = a.benefits[o.id].numbers
        return max((n["share_of_step"] for n in numbers.values()), default=-1.0)

    opens.sort(key=lambda o: (-share(o), -a.benefits[o.id].priority, o.conditional, not o.cuda_only, o.id))
    if opens:
        t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col in ("priority", "open", "saving", "where", "cuda"):
            t.add_column(L["summary_columns"][col])
        for o in opens[:5]:
            t.add_row(a.benefits[o.id].stars, o.id, f"{share(o) * 100:.1f}%" if share(o) >= 0 else "-",
                      f"{o.file}:{o.line}", L["summary_fused_by_vllm"] if o.cuda_only else "")
        console.print(t)
    console.print(f"{L['summary_report']}: {output}" + (f"   {L['summary_stubs']}: {stubs}" if stubs else ""))
