"""Sizes padded to buckets, so a serving process runs few distinct program shapes."""


def bucket(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << (max(n, 1) - 1).bit_length()
