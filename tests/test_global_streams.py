"""A module global one function alone rebinds (`global _aux_stream`; vLLM's `aux_stream()`, utils/torch_utils.py):
where none of that function's assignments runs, it returns the module's binding. vLLM creates its side stream
only on CUDA-like platforms, so on Ascend `aux_stream()` is None, and a helper handed `stream if n <= limit else
None` runs both functions in sequence on the current stream (multi_stream_utils.py), with no event or stream op.
A global another function also rebinds stays unknown, and so does a lazily created one."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import analyze

from .test_walk_maybe_none import _model

STREAM_MODEL = '''\
import torch
from torch import nn

from .qwen2 import Qwen2ForCausalLM

ON_GPU = False
_side = None
_shared = None
_lazy = None


def side_stream():
    global _side
    if _side is None and ON_GPU:
        _side = torch.cuda.Stream()
    return _side


def shared_stream():
    global _shared
    if _shared is None and ON_GPU:
        _shared = torch.cuda.Stream()
    return _shared


def reset_shared():
    global _shared
    _shared = torch.cuda.Stream()


def lazy_stream():
    global _lazy
    if _lazy is None:
        _lazy = torch.cuda.Stream()
    return _lazy


def in_parallel(fn0, fn1, event, stream=None):
    if stream is not None:
        event.record()
        a = fn0()
        with torch.cuda.stream(stream):
            b = fn1()
        event.wait()
    else:
        a = fn0()
        b = fn1()
    return a, b


class StreamForCausalLM(Qwen2ForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self.stream = STREAM()
        self.event = torch.cuda.Event()

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        hidden_states = self.model(input_ids, positions, intermediate_tensors, inputs_embeds)
        n = hidden_states.shape[0]
        return in_parallel(lambda: torch.relu(hidden_states), lambda: torch.tanh(hidden_states), self.event,
                           self.stream if n <= 128 else None)
'''


def _lines(mini, stream: str) -> set:
    _model(mini, "streams", "StreamForCausalLM", STREAM_MODEL.replace("STREAM", stream))
    a = analyze("StreamForCausalLM", str(mini), str(mini), "ascend", cache=False)
    return {(op.name, op.line) for op in a.walk.ops if op.file.endswith("streams.py") and op.scope.endswith("in_parallel")}


RECORD, SEQUENTIAL = ("event.record", 40), {("fn0", 46), ("fn1", 47)}  # the event of the `if`; the `else`


def test_a_global_its_one_function_does_not_rebind_keeps_the_modules_none(mini):
    assert _lines(mini, "side_stream") == SEQUENTIAL  # no event record or wait: the stream is None


def test_a_global_two_functions_rebind_or_a_lazy_one_stays_open(mini):
    for stream in ("shared_stream", "lazy_stream"):
        lines = _lines(mini, stream)
        assert RECORD in lines and SEQUENTIAL <= lines, stream  # both branches: the test is not decided


def test_inklings_sink_experts_run_in_sequence_on_ascend(session):
    """0.30 pair: InklingMoE keeps `self._sink_stream = aux_stream()` (inkling/nvidia/moe.py:478), None off
    CUDA (torch_utils.py:868); `maybe_execute_in_parallel` then runs fn0 and fn1 in sequence
    (multi_stream_utils.py:60-61), no event record or wait (:52-58)."""
    from fusion_analyze.analysis.pipeline import analyze_in

    a = analyze_in(session, "InklingForCausalLM")
    lines = {op.line for op in a.walk.ops if op.file == "vllm/utils/multi_stream_utils.py"}
    assert lines and lines <= {60, 61}
