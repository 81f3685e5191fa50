"""torch.compile with dynamic shapes: KV-cache decoding whose cache grows by one position per token.

A small decoder (d256, 2 layers, 4 heads, vocabulary 512) generates --tokens tokens greedily after an
8-token prompt; its forward is compiled with dynamic=True, so every call has a new cache length. Rows:
CPU eager, tpu strict eager, tpu compiled with size buckets (the default: one program per power-of-two
bucket of the cache length) and tpu compiled at exact sizes (TORCH_TPU_COMPILE_BUCKETS=0: one program
per length). Each row runs in a fresh process with an empty compile cache. Columns: programs traced
(compiled-graph calls that were not replays), wall time of the whole generation (compiles included),
ratio to CPU eager, and the median time per token over the last quarter of the tokens (steady state).

    python benchmarks/compile_dynamic.py [--tokens 256]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

D, LAYERS, HEADS, VOCAB = 256, 2, 4, 512


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.pos = torch.nn.Embedding(VOCAB, D), torch.nn.Embedding(4096, D)
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict(
            {"ln": torch.nn.LayerNorm(D), "qkv": torch.nn.Linear(D, 3 * D), "out": torch.nn.Linear(D, D),
             "ln2": torch.nn.LayerNorm(D), "mlp": torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(),
                                                                       torch.nn.Linear(4 * D, D))})
            for _ in range(LAYERS))
        self.head = torch.nn.Linear(D, VOCAB)

    def forward(self, ids, cache, causal):
        start, n = cache[0].shape[2], ids.shape[1]
        h = self.emb(ids) + self.pos(torch.arange(start, start + n, device=ids.device))
        new_cache = []
        for i, block in enumerate(self.blocks):
            q, k, v = block["qkv"](block["ln"](h)).view(1, n, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
            k, v = torch.cat([cache[2 * i], k], 2), torch.cat([cache[2 * i + 1], v], 2)
            new_cache += [k, v]
            attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            h = h + block["out"](attn.transpose(1, 2).reshape(1, n, D))
            h = h + block["mlp"](block["ln2"](h))
        return self.head(h[:, -1]), new_cache


def generate(device, tokens, compiled):
    from torch_tpu import _C  # noqa: F401 (loads torch_tpu)
    model = Decoder().eval().to(device)
    forward = torch.compile(model, backend="tpu", dynamic=True) if compiled else model
    ids = torch.arange(8, device=device).view(1, 8)
    cache = [torch.zeros(1, HEADS, 0, D // HEADS, device=device) for _ in range(2 * LAYERS)]
    graphs = _C._executor_stats()["compiled_graphs"] - _C._fused_stats()["replays"]
    times, out = [], []
    t_start = time.perf_counter()
    with torch.no_grad():
        for step in range(tokens):
            t0 = time.perf_counter()
            logits, cache = forward(ids, cache, step == 0)
            ids = logits.argmax(-1, keepdim=True)
            out.append(int(ids))  # read every token, as generation does
            times.append(time.perf_counter() - t0)
    total = time.perf_counter() - t_start
    tail = sorted(times[-max(tokens // 4, 1):])
    traced = _C._executor_stats()["compiled_graphs"] - _C._fused_stats()["replays"] - graphs
    return {"traced": traced, "total": total, "per_token": tail[len(tail) // 2], "tokens": out}


ROWS = [("cpu eager", "cpu", False, {}), ("tpu strict", "tpu", False, {}),
        ("tpu compiled, buckets", "tpu", True, {}), ("tpu compiled, exact sizes", "tpu", True,
                                                     {"TORCH_TPU_COMPILE_BUCKETS": "0"})]


def run_row(device, compiled, env, tokens):
    with tempfile.TemporaryDirectory() as cache:
        full_env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache, **env)
        cmd = [sys.executable, __file__, "--row", json.dumps([device, compiled]), "--tokens", str(tokens)]
        out = subprocess.run(cmd, env=full_env, capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--row", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        device, compiled = json.loads(args.row)
        print(json.dumps(generate(device, args.tokens, compiled)))
        return
    results = [(name, run_row(device, compiled, env, args.tokens)) for name, device, compiled, env in ROWS]
    base = results[0][1]
    print(f"KV-cache decoding, {args.tokens} tokens (d{D}, {LAYERS} layers), fresh process and compile cache per row")
    print("| run | programs traced | total s | vs cpu eager | ms/token (steady) | vs cpu eager | tokens = cpu |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, r in results:
        print(f"| {name} | {r['traced']} | {r['total']:.2f} | {base['total'] / r['total']:.2f}x | "
              f"{r['per_token'] * 1e3:.2f} | {base['per_token'] / r['per_token']:.2f}x | {r['tokens'] == base['tokens']} |")


if __name__ == "__main__":
    main()
