"""JAX functions and Pallas kernels as torch ops on tpu (see _op.jax_op). JAX is optional:
`pip install 'torch_tpu[jax]'`; importing this module does not import JAX."""
from ._op import custom_jax_kernel, jax_op

__all__ = ["jax_op", "custom_jax_kernel"]
