"""The benchmarks' GPT training step written in JAX: XLA's own floor for that model on this host.

Same model and weights as examples/gpt.py (built by torch from the same seed and copied over), same batch,
AdamW with PyTorch's defaults, the loss read back every step; the whole step is one `jax.jit` program.
`--platform cpu` runs it on jaxlib's built-in XLA:CPU client, `--platform plugin` on the PJRT plugin
torch_tpu uses (loaded into JAX), so a torch_tpu number next to it says how close our programs come to
what XLA makes of a hand-written step. The benchmarks run this file in a subprocess per platform
(`steps_per_second`); it prints `jax-steps-per-second X`.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_weights(d_model, n_layers, seq):
    """examples/gpt.py's GPT as built by the benchmarks (seed 0), its parameters as numpy arrays, and a batch."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    from gpt import GPT, batches, load_text
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, d_model=d_model, n_layers=n_layers, max_len=seq)
    return model, {k: v.detach().numpy() for k, v in model.state_dict().items()}, data


def build_step(jax, jnp, n_layers, n_heads):
    def layer_norm(p, name, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def linear(p, name, x, bias=True):
        y = x @ p[name + ".weight"].T
        return y + p[name + ".bias"] if bias else y

    def loss_fn(p, idx, targets):
        b, t = idx.shape
        x = p["tok.weight"][idx] + p["pos.weight"][:t]
        causal = jnp.tril(jnp.ones((t, t), bool))
        for i in range(n_layers):
            pre = f"blocks.{i}."
            c = x.shape[-1]
            q, k, v = jnp.split(linear(p, pre + "qkv", layer_norm(p, pre + "ln1", x)), 3, axis=-1)
            heads = lambda z: z.reshape(b, t, n_heads, c // n_heads).transpose(0, 2, 1, 3)
            q, k, v = heads(q), heads(k), heads(v)
            scores = jnp.where(causal, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(c // n_heads), -jnp.inf)
            y = (jax.nn.softmax(scores, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
            x = x + linear(p, pre + "proj", y)
            h = jax.nn.gelu(linear(p, pre + "mlp.0", layer_norm(p, pre + "ln2", x)), approximate=False)
            x = x + linear(p, pre + "mlp.2", h)
        logits = linear(p, "head", layer_norm(p, "ln_f", x), bias=False)
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, targets[..., None], -1).mean()

    def step(p, m, v, count, idx, targets, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
        loss, g = jax.value_and_grad(loss_fn)(p, idx, targets)
        count = count + 1
        c1, c2 = 1 - b1 ** count, 1 - b2 ** count
        m = {k: b1 * m[k] + (1 - b1) * g[k] for k in p}
        v = {k: b2 * v[k] + (1 - b2) * g[k] * g[k] for k in p}
        p = {k: p[k] * (1 - lr * wd) - lr * (m[k] / c1) / (jnp.sqrt(v[k] / c2) + eps) for k in p}
        return p, m, v, count, loss

    return jax.jit(step, donate_argnums=(0, 1, 2))


def setup(d_model, n_layers, seq, batch, platform, plugin_path=None):
    """A `step()` that runs one jitted training step and returns the loss as a float (a read-back).
    platform "plugin" loads `plugin_path` (default: the xla-cpu-pjrt plugin torch_tpu uses) into JAX."""
    if platform == "plugin":
        import jax._src.xla_bridge as xla_bridge
        if plugin_path is None:
            import xla_plugins.xla_cpu_pjrt as plugin
            plugin_path = os.path.join(os.path.dirname(plugin.__file__), "xla_cpu_pjrt.so")
        xla_bridge.register_plugin("torch_tpu_plugin", library_path=plugin_path)
        os.environ["JAX_PLATFORMS"] = "torch_tpu_plugin"
    else:
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import jax.numpy as jnp
    import numpy as np
    model, weights, data = torch_weights(d_model, n_layers, seq)
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    from gpt import batches
    x, y = next(batches(data, 1, batch, seq))
    device = jax.devices()[0]
    state = {"p": {k: jax.device_put(w, device) for k, w in weights.items()}}
    state["m"] = {k: jnp.zeros_like(w) for k, w in state["p"].items()}
    state["v"] = {k: jnp.zeros_like(w) for k, w in state["p"].items()}
    state["count"] = jax.device_put(np.float32(0), device)
    idx = jax.device_put(x.numpy().astype(np.int32), device)
    targets = jax.device_put(y.numpy().astype(np.int32), device)
    jitted = build_step(jax, jnp, n_layers, model.blocks[0].n_heads)

    def step():
        s = state
        s["p"], s["m"], s["v"], s["count"], loss = jitted(s["p"], s["m"], s["v"], s["count"], idx, targets)
        return float(loss)

    return step


def run(d_model, n_layers, seq, batch, platform, warmup, steps, plugin_path=None):
    step = setup(d_model, n_layers, seq, batch, platform, plugin_path)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return 1.0 / statistics.median(times)


def steps_per_second(d_model, n_layers, seq, batch, platform, warmup=3, steps=5):
    """Runs this file in a fresh process (JAX's platform is fixed per process); None if JAX is missing."""
    cmd = [sys.executable, os.path.abspath(__file__), "--platform", platform, "--d-model", str(d_model),
           "--layers", str(n_layers), "--seq", str(seq), "--batch", str(batch), "--warmup", str(warmup),
           "--steps", str(steps)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [x for x in out.stdout.splitlines() if x.startswith("jax-steps-per-second")]
    if out.returncode != 0 or not lines:
        print(f"(jax.jit on {platform} did not run: {out.stderr.strip().splitlines()[-1:]})")
        return None
    return float(lines[-1].split()[1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--platform", choices=["cpu", "plugin"], default="cpu")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--plugin-path", help="with --platform plugin: this PJRT plugin instead of xla-cpu-pjrt's")
    a = parser.parse_args()
    sps = run(a.d_model, a.layers, a.seq, a.batch, a.platform, a.warmup, a.steps, a.plugin_path)
    print(f"jax-steps-per-second {sps:.4f}")


if __name__ == "__main__":
    main()
