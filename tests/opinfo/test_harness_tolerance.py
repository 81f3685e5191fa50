"""The harness's float64-referenced acceptance (`_as_accurate_as_cpu`): order-dependent rounding passes,
wrong values do not. Pure CPU computations with a known answer; no device needed."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def _dots_with_cancellation():
    """Rows whose products sum to ~0 from terms of size ~80: rounding depends on the summation order."""
    g = torch.Generator().manual_seed(3)
    x = torch.empty(64, 40).uniform_(-9, 9, generator=g)
    y = torch.empty(40).uniform_(-9, 9, generator=g)
    # Make the last product cancel the rest exactly in float64 arithmetic on the float32 inputs.
    x[:, -1] = (-(x[:, :-1].double() @ y[:-1].double()) / y[-1].double()).float()
    ref = x.double() @ y.double()
    forward = torch.stack([sum((row[k] * y[k] for k in range(40)), torch.zeros(())) for row in x])
    backward = torch.stack([sum((row[k] * y[k] for k in reversed(range(40))), torch.zeros(())) for row in x])
    return forward, backward, ref


def test_another_summation_order_is_accepted():
    cpu, other_order, ref = _dots_with_cancellation()
    rtol, atol = harness.TOLERANCES["float32"]
    # The fixed bound against CPU is crossed: this is what made the gate flaky.
    assert not torch.allclose(other_order, cpu, rtol=rtol, atol=atol)
    assert harness._as_accurate_as_cpu([other_order], [cpu], [ref], rtol, atol, elementwise=False)


def test_a_wrong_value_is_rejected():
    cpu, other_order, ref = _dots_with_cancellation()
    rtol, atol = harness.TOLERANCES["float32"]
    wrong = other_order.clone()
    wrong[5] += 0.01  # far beyond float32 rounding of these sums, far below the values' size
    assert not harness._as_accurate_as_cpu([wrong], [cpu], [ref], rtol, atol, elementwise=False)
    assert not harness._as_accurate_as_cpu([other_order[:-1]], [cpu], [ref], rtol, atol, elementwise=False)


def test_nan_and_integer_outputs():
    rtol, atol = harness.TOLERANCES["float32"]
    a = torch.tensor([float("nan"), 1.0])
    r = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    assert harness._as_accurate_as_cpu([a], [a.clone()], [r], rtol, atol, elementwise=False)
    assert not harness._as_accurate_as_cpu([torch.tensor([1.0, 1.0])], [a], [r], rtol, atol, elementwise=False)
    i = torch.tensor([1, 2])
    assert harness._as_accurate_as_cpu([i], [i.clone()], [i.clone()], rtol, atol, elementwise=False)
    assert not harness._as_accurate_as_cpu([i + 1], [i], [i], rtol, atol, elementwise=False)


def test_a_nan_from_cpu_sets_no_bar_in_low_precision():
    """CPU's bfloat16 result is NaN where float64's is finite (overflowing intermediates): the tpu value must
    then match float64 within the bfloat16 tolerance; anything farther, or a NaN, still fails."""
    rtol, atol = harness.TOLERANCES["bfloat16"]
    ref = torch.tensor([2385.3802, 4119.5657, 1.0], dtype=torch.float64)
    cpu = torch.tensor([float("nan"), float("nan"), 1.0], dtype=torch.bfloat16)
    close = ref.to(torch.bfloat16)
    assert harness._as_accurate_as_cpu([close], [cpu], [ref], rtol, atol, elementwise=True)
    far = close.clone()
    far[0] = 3000.0
    assert not harness._as_accurate_as_cpu([far], [cpu], [ref], rtol, atol, elementwise=True)
    nan = close.clone()
    nan[1] = float("nan")
    assert not harness._as_accurate_as_cpu([nan], [cpu], [ref], rtol, atol, elementwise=True)


def test_an_exact_result_past_the_dtype_range_rounds_to_inf():
    """float64's 93058 is past float16's range: inf (its correct rounding) passes where CPU made NaN; a finite
    float16 value does not."""
    rtol, atol = harness.TOLERANCES["float16"]
    ref = torch.tensor([93058.27, 2.0], dtype=torch.float64)
    cpu = torch.tensor([float("nan"), 2.0], dtype=torch.float16)
    assert harness._as_accurate_as_cpu([ref.to(torch.float16)], [cpu], [ref], rtol, atol, elementwise=True)
    assert not harness._as_accurate_as_cpu([torch.tensor([65504.0, 2.0], dtype=torch.float16)], [cpu], [ref],
                                           rtol, atol, elementwise=True)
