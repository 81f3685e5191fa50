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
