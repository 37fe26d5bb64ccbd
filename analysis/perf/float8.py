"""FP8 compute (``--dtype fp8``): the layers' matmuls in fp8, everything else in bf16, as torchao's
float8 training (``torchao.float8.Float8Linear``, which torchtitan's ``--model.converters float8``
swaps in) and TransformerEngine run it.

- which matmuls: every linear of the layers, at the hardware's fp8 dense peak. The LM head stays in
  bf16 (torchtitan converts every ``nn.Linear`` but ``output``), and so do the routers (a width of
  experts, which its filter of dimensions divisible by 16 mostly leaves out), the attention core
  (flash attention in bf16) and every elementwise op;
- scaling (``run.fp8_scaling``, torchao's recipes): ``tensorwise`` (one scale a tensor, cuBLAS's
  fp8 GEMM) or ``rowwise`` (a scale per row of each operand, along the axis its GEMM reduces over:
  CUTLASS's rowwise GEMM, whose expected rate is the calibration's ``fp8_rowwise`` fraction of the
  tensorwise one);
- the casts (:func:`casts`), torchao's own roofline of dynamic scaling under torch.compile
  (``torchao/testing/training/roofline_utils.py``, ``get_float8_mem_sympy`` with its fusion
  modeling). Tensorwise: each linear's input and, in backward, its output gradient are cast with
  their amax fused into the kernel that produced them: read once in bf16, written in fp8 (training
  writes two layouts, row- and column-major, for backward's transposed GEMMs); the weight's amax
  and cast are kernels of their own: read twice, written in fp8. Rowwise: each input and output
  gradient is scaled along both axes, which no kernel fuses: written in fp8 and as a transposed bf16
  copy, which a second kernel reads and writes in fp8 (6 bytes a value, training); a weight is read,
  cast, transposed and cast again (``4 x`` its bytes ``+ 2``). Inference casts each input once
  (read, written in fp8), once however many linears read it (q, k and v; gate and up; MLA's q_a and kv_a and
  DSA's indexer's wk and weights_proj; q_b and the indexer's wq_b;
  a MoE layer's experts cast each token's input once, before it is routed, then each of their own
  activations), and each weight once. Weights already in fp8 (``--weights-dtype fp8`` or an
  fp8 format) are not cast. Full recomputation casts the forward's again, and so does per-op
  checkpointing, which keeps no fp8 matmul's output (:mod:`analysis.count.recompute`). Each value cast costs 3
  elementwise FLOPs (absolute value and maximum for the amax, the multiply by the scale), rowwise
  twice (two axes);
- tensor parallelism with sequence parallelism (``shard`` = tp; tensorwise only, as torchtitan
  applies torchao's ``Float8ColwiseParallel``, ``Float8RowwiseParallel`` and
  ``PrepareFloat8ModuleInput``): a region's input is cast once, on the ``1/tp`` of the tokens a GPU
  holds, before it is all-gathered in fp8 (q, k and v share it, so do gate and up), and the
  row-parallel linears' (o, down) output gradients are cast on that shard before backward's
  all-gather; the all-gathers move fp8 (:mod:`analysis.cluster.comm`). Rowwise keeps bf16's plans;
- memory is the bf16 run's: torchao saves the bf16 input and weight for backward
  (``matmul_with_hp_or_float8_args.forward``: ``ctx.save_for_backward(input_hp, weight_hp_t)``) and
  casts them again there; the fp8 copies live for one matmul.

Inference on fp8 weights (:func:`serving`): serving engines run such a checkpoint W8A8 where the GPU has
fp8 tensor cores (vLLM's and SGLang's fp8 linear methods quantize each input on the fly: per tensor for
``fp8-tensor``, per token for ``fp8-channel``, per token group of 128 for ``fp8-block``), and weight-only
(Marlin's W8A16, at the compute dtype's peak) where it has none; so does llmcalc unless ``dtype`` is given.
Per-channel and block scales are priced at the rowwise rate (a scale per row of each operand, as CUTLASS's
rowwise GEMM, which vLLM runs for per-token, per-channel fp8): no named calibration source measures
block-scaled GEMMs.

Not modeled: FSDP's fp8 all-gather of the weights (torchtitan's ``enable_fsdp_float8_all_gather``,
off by default; the published torchtitan rows do not say they turned it on): the weights are
gathered in bf16, as in a bf16 run.
"""

from ..count.flops import copies_read, linear_rows
from ..model.architecture import Block, build
from ..model.config import ModelConfig
from ..model.formats import ROUTERS, fp8_weights
from ..model.sizes import bytes_per
from ..spec import RunSpec
from .hardware import Hardware

CASTS = "float8/casts"  # the casts' component
CAST_FLOPS = 3  # per value: abs, max (the amax), the multiply by the scale


def serving(cfg: ModelConfig, run: RunSpec, hw: Hardware) -> RunSpec:
    """``run`` with fp8 matmuls where an engine would run them on ``hw`` (module docstring: inference on fp8
    weights, no ``dtype`` given, an fp8 peak; their scales those of the weights' format,
    :data:`~analysis.model.formats.FP8_SCALES`, as ``RunSpec.resolve`` gives them), else ``run`` unchanged."""
    if run.mode == "train" or run.dtype is not None or "fp8" not in hw.peak_flops:
        return run
    weights = run.replace(fp8_scaling=None).resolve(cfg).weights_dtype  # a checkpoint's own format, or the option's
    return run.replace(dtype="fp8") if fp8_weights(weights) else run


def fp8_keys(cfg: ModelConfig) -> set[str]:
    """The components whose matmuls run in fp8 (module docstring)."""
    return {m.key for _, block in build(cfg).blocks for m in block.linears() if m.key not in ROUTERS}


SHARED_INPUTS = (("attention/q", "attention/k", "attention/v"), ("mlp/gate", "mlp/up"))  # a region's input
# inference casts each tensor once, however many linears read it: engines fuse those linears (qkv_proj,
# gate_up_proj, MLA's fused_qkv_a_proj, a MoE's w13) and quantize their input once, as torch.compile's CSE does
INFERENCE_SHARED = (*SHARED_INPUTS, ("attention/q_a", "attention/kv_a", "attention/indexer/wk",
                                      "attention/indexer/weights_proj"),  # the layer's normed input
                    ("attention/q_b", "attention/indexer/wq_b"))  # MLA's normed low-rank query (DSA's indexer)
ROW_PARALLEL = ("attention/o", "mlp/down")  # their output gradients are sequence-sharded


def casts(cfg: ModelConfig, run: RunSpec, shard: int = 1) -> tuple[int, int]:
    """(elementwise FLOPs, bytes) of a pass's casts to fp8 (``run`` resolved, its matmuls in fp8);
    ``shard``: the tensor-parallel GPUs of torchao's float8 TP plans under sequence parallelism
    (module docstring)."""
    per_layer = [(group.count, layer_casts(block, run, shard)) for group, block in build(cfg).blocks]
    return sum(n * flops for n, (flops, _) in per_layer), sum(n * nbytes for n, (_, nbytes) in per_layer)


def layer_casts(block: Block, run: RunSpec, shard: int = 1) -> tuple[int, int]:
    """(elementwise FLOPs, bytes) of one layer's casts to fp8 (:func:`casts`)."""
    train, rowwise = run.mode == "train", run.fp8_scaling == "rowwise"
    hp, layouts = bytes_per(run.dtype), 2 if train else 1
    forwards = 1 + (train and run.recompute in ("op", "full"))  # op keeps no fp8 matmul's output
    stored = None if fp8_weights(run.weights_dtype) else run.weights_dtype
    axes = 2 if rowwise and train else 1  # values cast per value
    act = 6 if rowwise and train else hp + layouts  # bytes per activation or gradient value
    wbytes = 0 if stored is None else (4 * bytes_per(stored) + 2 if rowwise and train else
                                       bytes_per(stored) + 1 if rowwise else 2 * bytes_per(stored) + layouts)
    values = nbytes = 0
    shared: set = set()
    linears = block.linears()
    last = {m.key: i for i, m in enumerate(linears)}  # an FFN's down: the last linear of its key
    for i, m in enumerate(linears):
        if m.key in ROUTERS:
            continue
        rows = linear_rows(m, block, run)
        read = copies_read(m, rows, run)  # as traffic reads them
        x, g = rows * m.active * m.d_in, rows * m.active * m.d_out if train else 0
        if shard > 1 or not train:
            region: tuple[str, ...] | str | None = next(
                (keys for keys in (SHARED_INPUTS if train else INFERENCE_SHARED) if m.key in keys), None)
            if region is None and not train and i < last[m.key]:  # experts' gate and up: each token's input,
                region = m.key  # before it is routed to its experts
            if region is not None:  # torchao's TP plans cast a region's input on the GPU's sequence shard
                x = 0 if region in shared else rows // (shard if region in SHARED_INPUTS else 1) * m.d_in
                shared.add(region)
            if m.key in ROW_PARALLEL and train:
                g = rows // shard * m.d_out
        w = 0 if stored is None else read * m.d_in * m.d_out
        values += axes * (forwards * (x + w) + g)
        nbytes += forwards * (x * act + w * wbytes) + g * act
    return CAST_FLOPS * values, nbytes
