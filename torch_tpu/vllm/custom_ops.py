"""Torch implementations put in place of vLLM's compiled custom ops (vllm._C, vllm._moe_C are CUDA builds,
never loaded on tpu)."""
import torch

_libraries = []  # a Library's ops live as long as the object


def define(namespace: str, ops: dict) -> None:
    """Defines each op of `ops` (name -> (function, schema)) in `namespace`, implemented by the function."""
    lib = torch.library.Library(namespace, "FRAGMENT")
    for name, (fn, schema) in ops.items():
        lib.define(schema)
        lib.impl(name, fn, "CompositeImplicitAutograd")
    _libraries.append(lib)
