"""Activation recomputation (``run.recompute``): what backward runs again of a layer's forward, and
what a layer keeps for it instead of what autograd would save (the docs' Conventions).

- ``none``: nothing runs again;
- ``selective`` (Korthikanti et al. 2022): eager attention's core (scores, the ops on them, values)
  is checkpointed; flash attention keeps no score matrix, so nothing changes there;
- ``op``: per-op selective checkpointing, torchtitan's ``selective_ac_option = "op"``: each layer is
  checkpointed under a policy (``torch.utils.checkpoint.create_selective_checkpoint_contexts``) that
  keeps the outputs of the ops on its list and recomputes every other op in backward. torchtitan's
  list (``_save_list`` in ``parallelize_llama.py`` at 9dec370, Dec 2024, and 820504e, June 2025):
  ``aten.mm``, the SDPA flash and memory-efficient kernels, ``reduce_scatter_tensor`` and, for fp8
  scaling, ``aten.max`` (and ``aten.abs`` at 9dec370); of the ``mm`` only every other one of a layer,
  the 1st, 3rd, ... (``mm_count % 2``). So a layer keeps its input (the checkpoint's), the outputs of
  every other linear (:func:`kept_linears`, in the order the layer runs them: its mixer's, then its
  FFN's), the flash kernel's output and fp32 log-sum-exp, and under sequence parallelism the
  reduce-scatters' outputs; backward runs again the other linears, every elementwise op (norms,
  activations, RoPE, residual adds), eager attention's core (batched matmuls, off the list), a
  mixture's experts, routed and shared (grouped GEMMs, off the list), every linear with fp8 matmuls
  (torchao's ``aten._scaled_mm`` is off the list) and its casts, and the collectives other than
  reduce-scatters (all-gathers, all-reduces, all-to-alls). What it keeps of fp8 scaling is left out:
  the amaxes (a scalar a cast) and, at 9dec370, ``abs`` of each cast tensor (a bf16 copy of it).
  Recurrent mixers, DSA's indexer, hyper-connections and LoRA adapters have no such policy here: refused
  (:func:`analysis.spec.recompute_refusal`);
- ``full``: every layer checkpointed whole: it keeps its input, and backward runs its forward again.
"""

from collections.abc import Sequence

from ..model.architecture import Block
from ..model.config import ModelConfig
from ..model.parts import Linear
from ..model.tape import STAT
from ..model.variants import POSITIONS, Op
from ..spec import RunSpec

GROUPED = ("moe/experts", "moe/shared_experts")  # a mixture's experts: grouped GEMMs, off op's list


def eager_core(cfg: ModelConfig, run: RunSpec) -> bool:
    """Whether the layers run eager attention's core: asked for, or a learned T5 bias (no fused kernel)."""
    return run.attention == "eager" or POSITIONS[cfg.position].learned_bias


def kept_linears(layer: Block, run: RunSpec) -> list[Linear]:
    """The linears whose outputs ``op`` keeps (``run`` resolved): every other of the layer's linears from
    the first, the experts' GEMMs not counted; none when the matmuls are fp8."""
    if run.recompute != "op" or run.matmul_dtype == "fp8":
        return []
    return [m for m in layer.linears() if not m.key.startswith(GROUPED)][::2]


def rerun_linears(layer: Block, run: RunSpec) -> list[Linear]:
    """The linears backward runs again (``run`` resolved): all under ``full``, all but the kept under ``op``."""
    if run.recompute not in ("op", "full"):
        return []
    kept = {m.key for m in kept_linears(layer, run)}
    return [m for m in layer.linears() if m.key not in kept]


def rerun_core(cfg: ModelConfig, run: RunSpec) -> bool:
    """Whether backward runs eager attention's core again: under ``full``, and under ``selective`` or
    ``op`` where the layers run it eager (flash keeps no score matrix; op keeps the kernel's output)."""
    return run.recompute == "full" or (run.recompute in ("selective", "op") and eager_core(cfg, run))


def rerun_ops(layer: Block, run: RunSpec, ops: Sequence[Op]) -> list[Op]:
    """Of one layer's forward elementwise ops ``ops`` (``run`` resolved), those ``op`` runs again: all but
    the ops on the scores inside a flash kernel whose output it keeps and the bias adds of the linears it
    keeps (fused into their matmuls)."""
    core = rerun_core(layer.cfg, run)
    out = [o for o in ops if core or not o.scores]
    for m in kept_linears(layer, run):
        if m.bias:  # one of the bias adds of its size (alike, whichever)
            out.remove(next(o for o in out if o.key == "bias" and o.elements == run.tokens * m.active * m.d_out))
    return out


def kept_bytes(layer: Block, run: RunSpec, b: int) -> dict[str, int]:
    """What one layer keeps under ``op`` (``run`` resolved, training), by component: its input
    (``layer``), each kept linear's output (``<key>/output``) and the flash kernel's output and fp32
    log-sum-exp (``attention/sdpa``); ``b`` bytes a value."""
    T = run.tokens
    out = {"layer": T * layer.cfg.d_model * b}
    for m in kept_linears(layer, run):
        out[m.key + "/output"] = T * m.active * m.d_out * b
    if not eager_core(layer.cfg, run):
        attn = layer.attention
        out["attention/sdpa"] = T * attn.heads * (attn.value_dim * b + STAT)
    return out
