import sys

import pytest

from fusion_analyze.commands.stack import _SLOTS, _anchor, on_large_stack_chunk


def test_the_call_goes_through_with_its_arguments_and_result():
    assert on_large_stack_chunk(lambda a, b=0: (a, b), 1, b=2) == (1, 2)


def test_exceptions_pass_through():
    def boom():
        raise ValueError("x")

    with pytest.raises(ValueError):
        on_large_stack_chunk(boom)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="frames are heap objects before 3.11")
def test_the_anchor_frame_claims_more_than_one_mib_of_value_stack():
    # a chunk is sized to the frame that opens it, rounded up to a power of two: just over 1 MiB gives 2 MiB
    assert _anchor.__code__.co_stacksize == _SLOTS
    assert 1 << 20 < _SLOTS * 8 < (1 << 20) + 4096


def test_deep_recursion_below_the_anchor_still_works():
    def down(n):
        return 0 if n == 0 else 1 + down(n - 1)

    assert on_large_stack_chunk(down, 800) == 800
