"""FP8 compute (``--dtype fp8``): the layers' matmuls in fp8, everything else in bf16, as torchao's
float8 training (``torchao.float8.Float8Linear``, which torchtitan's ``--model.converters float8``
swaps in) and TransformerEngine run it.

- which matmuls: every linear of the layers, at the hardware's fp8 dense peak. The LM head stays in
  bf16 (torchtitan converts every ``nn.Linear`` but ``output``), and so do the routers (a width of
  experts, which its filter of dimensions divisible by 16 mostly leaves out), the attention core
  (flash attention in bf16) and every elementwise op;
- the casts (:func:`casts`), torchao's own roofline of tensorwise dynamic scaling under
  torch.compile (``torchao/float8/roofline_utils.py``, ``get_float8_mem_sympy``): each linear's
  input and, in backward, its output gradient are cast with their amax fused into the kernel that
  produced them: read once in bf16, written in fp8 (training writes two layouts, row- and
  column-major, for backward's transposed GEMMs); the weight's amax and cast are kernels of their
  own: read twice, written in fp8. Weights already in fp8 (``--weights-dtype fp8`` or an fp8 format)
  are not cast. Full recomputation casts the forward's again. Each value cast costs 3 elementwise
  FLOPs (absolute value and maximum for the amax, the multiply by the scale);
- memory is the bf16 run's: torchao saves the bf16 input and weight for backward
  (``matmul_with_hp_or_float8_args.forward``: ``ctx.save_for_backward(input_hp, weight_hp_t)``) and
  casts them again there; the fp8 copies live for one matmul.

Not modeled: rowwise scaling (torchao's ``ROWWISE`` recipe: per-row scales, each tensor cast along
each axis, CUTLASS's rowwise GEMM: slower than tensorwise) and FSDP's fp8 all-gather of the weights
(torchtitan's ``enable_fsdp_float8_all_gather``, off by default; the published torchtitan rows do not
say they turned it on): the weights are gathered in bf16, as in a bf16 run.
"""

from ..count.flops import linear_rows
from ..model.architecture import build
from ..model.config import ModelConfig
from ..model.formats import ROUTERS
from ..model.sizes import bytes_per
from ..spec import RunSpec

CASTS = "float8/casts"  # the casts' component
CAST_FLOPS = 3  # per value: abs, max (the amax), the multiply by the scale


def fp8_keys(cfg: ModelConfig) -> set[str]:
    """The components whose matmuls run in fp8 (module docstring)."""
    return {m.key for _, block in build(cfg).blocks for m in block.linears() if m.key not in ROUTERS}


def casts(cfg: ModelConfig, run: RunSpec) -> tuple[int, int]:
    """(elementwise FLOPs, bytes) of a pass's casts to fp8 (``run`` resolved, its matmuls in fp8)."""
    train = run.mode == "train"
    hp, layouts = bytes_per(run.dtype), 2 if train else 1
    forwards = 1 + (train and run.recompute == "full")
    stored = None if run.weights_dtype == "fp8" or run.weights_dtype.startswith("fp8-") else run.weights_dtype
    values = nbytes = 0
    for group, block in build(cfg).blocks:
        for m in block.linears():
            if m.key in ROUTERS:
                continue
            rows = linear_rows(m, block, run)
            read = m.copies if m.active == m.copies else min(m.copies, rows * m.active)  # as traffic reads them
            x, g = rows * m.active * m.d_in, rows * m.active * m.d_out if train else 0
            w = 0 if stored is None else read * m.d_in * m.d_out
            values += group.count * (forwards * (x + w) + g)
            nbytes += group.count * (forwards * (x * (hp + layouts) + (0 if stored is None else w * (
                2 * bytes_per(stored) + layouts))) + g * (hp + layouts))
    return CAST_FLOPS * values, nbytes
