"""torch._assert_async on tpu: asynchronous like CUDA's device-side assert (the failure is raised at the next
synchronization, at the op in debug mode), with CPU's messages and exception type."""
import pytest
import torch


def cpu_error(*args):
    with pytest.raises(RuntimeError) as e:
        torch._assert_async(*args)
    return str(e.value)


@pytest.mark.parametrize("value", [True, 3, -0.5, float("nan"), float("inf")])
def test_nonzero_values_pass(mode, value):
    torch._assert_async(torch.tensor(value).cpu())  # CPU accepts them too
    torch._assert_async(torch.tensor(value, device="tpu"))
    torch._assert_async(torch.tensor([value], device="tpu"), "never raised")
    torch.tpu.synchronize()


@pytest.mark.parametrize("args", [(False,), (0,), (0.0, "my message"), (0, "")], ids=["false", "zero", "msg", "empty msg"])
def test_a_zero_raises_cpu_s_message_by_the_next_synchronization(mode, args):
    value, *msg = args
    expected = cpu_error(torch.tensor(value), *msg)
    with pytest.raises(RuntimeError) as e:
        torch._assert_async(torch.tensor(value, device="tpu"), *msg)
        if mode == "debug":
            pytest.fail("debug mode raises at the op")
        torch.tpu.synchronize()
    assert str(e.value).startswith(expected), (str(e.value), expected)
    # Raised once: the device is usable afterwards.
    assert (torch.ones(2, device="tpu") * 2).cpu().tolist() == [2.0, 2.0]


def test_different_messages_keep_their_own_text(mode):
    torch._assert_async(torch.tensor(1, device="tpu"), "first")
    with pytest.raises(RuntimeError, match="^second"):
        torch._assert_async(torch.tensor(0, device="tpu"), "second")
        torch.tpu.synchronize()
    with pytest.raises(RuntimeError, match="^third"):
        torch._assert_async(torch.tensor(0, device="tpu"), "third")
        torch.tpu.synchronize()


@pytest.mark.parametrize("shape", [(0,), (2,)])
def test_not_one_element_raises_at_the_call_as_cpu(mode, shape):
    expected = cpu_error(torch.ones(shape))
    with pytest.raises(RuntimeError) as e:
        torch._assert_async(torch.ones(shape, device="tpu"))
    assert str(e.value) == expected

