"""The short terminal summary (rich): model, versions, counts by status, top open opportunities, in the
report's language (templates/labels.yaml). Only ever printed to a terminal; the report itself is written with
plain file I/O."""

from __future__ import annotations

import sys
from collections import Counter

from rich.console import Console


def print_summary(a, output: str, stubs: str | None, to_stdout: bool, lang: str = "zh") -> None:
    from .markdown import labels

    L = labels(lang)
    console = Console(file=sys.stdout if to_stdout else sys.stderr, highlight=False)
    src = a.location.sources
    versions = f"vLLM {src['vllm']['version']}" + (f" · vllm-ascend {src['vllm_ascend']['version']}" if src.get("vllm_ascend") else "")
    console.print(f"[bold]{a.location.architecture}[/bold]  {a.location.file}:{a.location.line}", soft_wrap=True)
    console.print(f"  {versions}, {L['summary_backend']} {a.session.backend}", soft_wrap=True)
    rejected = {o.id for o in a.opportunities if o.status == "open" and a.benefits[o.id].rejected}
    counts = Counter(o.status for o in a.opportunities)
    apart = Counter(o.status for o in a.opportunities if o.conditional)  # counted apart: they rest on a test

    def said(k, v) -> str:
        notes = [L["summary_conditional"].format(n=apart[k])] if apart[k] else []
        if k == "open" and rejected:  # listed below are the costed ones: say how many are not
            notes.append(L["summary_not_costed"].format(n=len(rejected)))
        return f"{L['status'].get(str(k), k)}: {v}" + (f" ({', '.join(notes)})" if notes else "")

    for k, v in sorted(counts.items()):  # a line each: a count and its notes never wrap apart
        console.print("  " + said(k, v), soft_wrap=True)
    opens = [o for o in a.opportunities if o.status == "open" and o.id not in rejected]

    def share(o) -> float:  # the larger share of a step fusing it saves (the report's first section); -1: not costed
        numbers = a.benefits[o.id].numbers
        return max((n["share_of_step"] for n in numbers.values()), default=-1.0)

    opens.sort(key=lambda o: (-share(o), -a.benefits[o.id].priority, o.conditional, not o.cuda_only, o.id))
    if opens:
        # one opportunity on two lines, so that 80 columns hold it: the id whole on the first (never cut), where
        # it is on the second
        shown = opens[:5]
        console.print(L["summary_top"].format(n=len(shown), total=len(opens)))
        for i, o in enumerate(shown, 1):
            saving = f"{share(o) * 100:.1f}%" if share(o) >= 0 else "-"
            console.print(f"{i:>2}. {a.benefits[o.id].stars or '-':<3} {saving:>6}  {o.id}", soft_wrap=True)
            cuda = f"  ({L['summary_fused_by_vllm']})" if o.cuda_only else ""
            console.print(f"      {o.file}:{o.line}{cuda}", soft_wrap=True)
    console.print(f"{L['summary_report']}: {output}" + (f"   {L['summary_stubs']}: {stubs}" if stubs else ""))
