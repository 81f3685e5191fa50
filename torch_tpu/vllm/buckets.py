"""Sizes padded to buckets, so a serving process runs a fixed set of program shapes.

Strict mode compiles one program per op signature, shapes included. The model runner pads every step to
three buckets: tokens (the model's batch dimension), requests (the rows of logits the sampler sees) and
the block-table width the attention reads (blocks covering the batch's longest sequence). Everything
indexed by request inside the model (query starts, sequence lengths, block table) is passed at its full
fixed size, so the programs of a step depend on (tokens, width) and (tokens, requests) only, and
`warm_up_plan` lists steps that together reach every such pair a serving step can produce.

As vLLM's former TPU runner did (`_get_padded_token_len`, `_get_padded_num_reqs_with_upper_limit`), the
buckets are powers of two from a floor of 8, capped at the configured maximum; a small batch pays for
a few padded rows instead of a program of its own.
"""
MIN_TOKENS = 8
MIN_REQS = 8


def bucket(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << (max(n, 1) - 1).bit_length()


def padded(n: int, maximum: int, minimum: int = 1) -> int:
    """n's bucket: bucket(n), at least `minimum`, at most `maximum` (n <= maximum)."""
    return min(max(bucket(n), minimum), maximum)


def sizes(maximum: int, minimum: int = 1) -> list[int]:
    """Every value padded(n, maximum, minimum) takes for 1 <= n <= maximum, ascending."""
    out = {min(minimum, maximum), maximum}
    p = 1
    while p < maximum:
        if p > minimum:
            out.add(p)
        p *= 2
    return sorted(out)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def width(max_seq_len: int, block_size: int, table_width: int) -> int:
    """The block-table width attention reads: a power of two of blocks covering max_seq_len."""
    return min(bucket(cdiv(max_seq_len, block_size)), table_width)


def widths(max_model_len: int, block_size: int, table_width: int) -> list[int]:
    """Every width() of a sequence no longer than max_model_len."""
    return sizes(width(max_model_len, block_size, table_width))


def warm_up_plan(max_tokens: int, max_reqs: int, block_size: int, max_model_len: int,
                 table_width: int, whole_steps: bool = False) -> list[tuple[int, int, int]]:
    """Steps (tokens, requests, sequence length) that together reach every (token bucket, width) and
    (token bucket, request bucket) pair a serving step can produce; with whole_steps, every (token
    bucket, request bucket, width) triple (Fused mode: one graph per step, keyed by all three).

    A step of n tokens over r requests whose longest sequence is L needs r <= n <= r * L (each request
    schedules at least one token and at most its sequence length). Each step runs r requests of sequence
    length L, with the fewest tokens of its bucket, so as many pairs as possible are reachable; pairs no
    step can reach are never produced by serving either. L stays below max_model_len: a request's
    sequence is at most max_model_len - 1 tokens while it still samples one.
    """
    token_sizes = sizes(max_tokens, MIN_TOKENS)
    req_sizes = sizes(max_reqs, MIN_REQS)
    width_sizes = widths(max_model_len, block_size, table_width)

    def step(i, j, k):
        """A (tokens, requests, seq_len) step in token bucket i, request bucket j, width k, or None."""
        lo_n = token_sizes[i - 1] + 1 if i else 1
        lo_r = req_sizes[j - 1] + 1 if j else 1
        seq_len = min(width_sizes[k] * block_size, max_model_len - 1)
        if width(seq_len, block_size, table_width) != width_sizes[k]:
            return None
        r = min(req_sizes[j], token_sizes[i])
        n = max(lo_n, r)
        if r < lo_r or n > token_sizes[i] or n > r * seq_len:
            return None
        return n, r, seq_len

    if whole_steps:
        triples = (step(i, j, k) for i in range(len(token_sizes)) for j in range(len(req_sizes))
                   for k in range(len(width_sizes)))
        return [s for s in triples if s]
    plan = []
    for i in range(len(token_sizes)):
        for j in range(len(req_sizes)):  # every request bucket, at some width
            s = next((s for k in range(len(width_sizes)) if (s := step(i, j, k))), None)
            if s and s not in plan:
                plan.append(s)
        for k in range(len(width_sizes)):  # every width, with some request bucket
            s = next((s for j in reversed(range(len(req_sizes))) if (s := step(i, j, k))), None)
            if s and s not in plan:
                plan.append(s)
    return plan
