"""Test helpers for walks whose decoder layers are of several kinds.

Where the layer loop hands its first layer other values than the rest (`residual = None` before the loop), the
first layer is walked apart and is a kind of its own (walk/statements.py `_for`); its ops carry `entry`. A test
about what every later layer runs reads the ops outside it.
"""

from __future__ import annotations


def after_first(ops):
    """The ops outside the first layer walked apart (`Op.entry`)."""
    return [op for op in ops if not op.entry]


def first_layer(ops):
    """The ops of the first layer walked apart."""
    return [op for op in ops if op.entry]
