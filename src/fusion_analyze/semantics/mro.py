"""Python's method resolution order (C3 linearisation), over classes read statically."""

from __future__ import annotations

from typing import Callable, TypeVar

C = TypeVar("C")


def c3_linearization(cls: C, bases: Callable[[C], list[C]], memo: dict | None = None, limit: int = 64) -> list[C]:
    """The MRO of `cls` as Python computes it: for `class D(B, C)`, `class B(A)`, `class C(A)` it is
    D, B, C, A (a depth-first walk would put A before C and take A's methods over C's).

    Classes are compared by identity of their `qualname` when they have one. A hierarchy C3 rejects (Python
    raises TypeError at class creation) or a cycle falls back to depth-first order, duplicates dropped, so
    a walk over broken source still sees every base. `memo` (qualname -> MRO) may be shared between calls."""
    memo = {} if memo is None else memo
    try:
        return _c3(cls, bases, memo, (), limit)
    except _Inconsistent:
        return _depth_first(cls, bases, limit)


class _Inconsistent(Exception):
    pass


def _key(c) -> object:
    return getattr(c, "qualname", None) or id(c)


def _c3(cls, bases, memo: dict, stack: tuple, limit: int) -> list:
    k = _key(cls)
    if k in memo:
        return memo[k]
    if k in stack or len(stack) > limit:
        raise _Inconsistent()
    direct = _unique(bases(cls))
    seqs = [list(_c3(b, bases, memo, stack + (k,), limit)) for b in direct] + [list(direct)]
    out = [cls]
    while True:
        seqs = [s for s in seqs if s]
        if not seqs:
            break
        for seq in seqs:
            head = seq[0]
            hk = _key(head)
            if not any(hk in (_key(x) for x in s[1:]) for s in seqs):
                break
        else:
            raise _Inconsistent()
        out.append(head)
        for s in seqs:
            if _key(s[0]) == hk:
                del s[0]
    memo[k] = out
    return out


def _unique(items: list) -> list:
    seen, out = set(), []
    for c in items:
        if _key(c) not in seen:
            seen.add(_key(c))
            out.append(c)
    return out


def _depth_first(cls, bases, limit: int) -> list:
    out, seen = [], set()

    def visit(c, depth):
        if _key(c) in seen or depth > limit:
            return
        seen.add(_key(c))
        out.append(c)
        for b in bases(c):
            visit(b, depth + 1)

    visit(cls, 0)
    return out
