"""Run the whole command on one large interpreter data stack chunk.

CPython 3.11+ keeps Python frames on a per-thread stack of chunks (16 KiB each by default): a call that does
not fit maps a new chunk, and the return that empties it unmaps it at once. A walk whose recursion goes up and
down across a chunk's edge maps and unmaps a chunk each time: 200 000 mmap/munmap pairs and 390 000 page
faults in one `fusion-analyze all` (an eighth of its time, all of it in the kernel). A chunk is sized to the
first frame it holds, rounded up to a power of two, so calling through one frame that claims just over 1 MiB
of value stack gets a 2 MiB chunk with about 1 MiB left for every frame below it, several thousand deep:
the walk's recursion stays in that chunk and nothing is mapped again. The claimed slots are never written,
so the untouched pages cost nothing.
"""

from __future__ import annotations

import sys

_SLOTS = (1 << 17) + 64  # value-stack slots of the anchor frame: 8 bytes each, just over 1 MiB


def _anchor(fn, args, kwargs):
    return fn(*args, **kwargs)


if sys.version_info >= (3, 11):  # before 3.11 frames are heap objects: nothing to anchor
    _anchor.__code__ = _anchor.__code__.replace(co_stacksize=_SLOTS)


def on_large_stack_chunk(fn, *args, **kwargs):
    """fn(*args, **kwargs), with its frames and those of everything it calls in one 2 MiB stack chunk."""
    return _anchor(fn, args, kwargs)
