"""Sizes: the widths of the dtypes values are stored in, and whole-number arithmetic on sizes.

Every figure llmcalc computes is an exact integer, and every integer a config or option may hold
is at most :data:`MAX_INT` = 2^53, so each one is also exactly a float.
"""

from __future__ import annotations

MAX_INT = 2**53
MAX_LAYERS = 100_000  # the layer plan is built layer by layer (the deepest real models have ~130)
DTYPE_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
FLOAT_DTYPES = ("fp32", "bf16", "fp16")  # what activations, caches and compute can be in
COMPUTE_DTYPES = (*FLOAT_DTYPES, "fp8")  # fp8: the layers' matmuls in fp8, everything else in bf16 (RunSpec.resolve)
FP32, FP16, INT32 = 4, 2, 4  # bytes of the fixed-width values scales, statistics and indices use


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def bytes_per(dtype: str) -> int:
    """Bytes of one value (int4: two values per byte, so counts go through ``weight_bytes``)."""
    return max(1, DTYPE_BITS[dtype] // 8)


def weight_bytes(values: int, dtype: str) -> int:
    """Bytes to store ``values`` values of ``dtype`` (int4 packs two per byte, rounded up)."""
    return (values * DTYPE_BITS[dtype] + 7) // 8
