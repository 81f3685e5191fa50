"""A torch.optim step on tpu parameters runs as one program in Strict mode.

AdamW's default (foreach) step is eight foreach ops, each one program (an op group), so eight launches a step.
Strict mode traces the whole step into one op group instead (csrc/python/OptimizerStep.cpp): one program,
replayed without tracing from the second step on, and every parameter, gradient and state buffer read once.
It runs the same ops in the same order, but XLA fuses across them (one op's multiply may meet the next op's add
in one fused multiply-add), so a value can differ from the per-op programs' in its last bit, as Fused mode's
do. A host read inside the step runs what is traced so far, as anywhere in an op group. Threads stay
deterministic: another thread's ops never cut the group unless they touch its tensors, and another thread's
step waits for it (Executor::beginOpGroup).

A step qualifies when every parameter is a plain dense tpu tensor (not a tensor subclass such as DTensor, whose
ops may talk to other processes) with a dense gradient or none, and no closure is given (a closure runs the
forward and backward inside the step); the parameters are checked in C++ (csrc/python/OptimizerStep.cpp).
Debug mode keeps its per-op checks; Fused mode and torch.compile fuse the step already.
TORCH_TPU_OPTIMIZER_PROGRAMS=0 (read at import) leaves steps to their per-op programs.
"""
import os

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from . import _C


def _before_step(optimizer, args, kwargs):
    # Dynamo traces the hooks with the step: a compiled step is one graph already (and must not break here).
    if torch.compiler.is_compiling():
        return
    if len(args) > 1 and args[1] is not None or kwargs.get("closure") is not None:
        return
    _C._optimizer_step_begin(optimizer.param_groups)  # opens in Strict mode when every parameter is plain


def _after_step(optimizer, args, kwargs):
    if torch.compiler.is_compiling():
        return
    _C._optimizer_step_end()


def install() -> None:
    """Registers the global step hooks (once, at import)."""
    if os.environ.get("TORCH_TPU_OPTIMIZER_PROGRAMS") == "0" or getattr(install, "done", False):
        return
    register_optimizer_step_pre_hook(_before_step)
    register_optimizer_step_post_hook(_after_step)
    install.done = True
