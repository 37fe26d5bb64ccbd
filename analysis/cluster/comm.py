"""Communication: the collectives one GPU takes part in per training step or inference pass
(DESIGN.md section 9; the layouts' conventions are in :mod:`analysis.cluster.sharding`).

Each :class:`Collective` is one kind of call over one group, with its payload: the tensor an
all-reduce reduces, the tensor an all-gather assembles or a reduce-scatter scatters (FSDP2's
padded shards times the group), the token slots an all-to-all exchanges, the tensor a pipeline
stage sends. Ring algorithms: over ``n`` GPUs each GPU sends ``2 (n - 1) / n`` of an all-reduce's
payload and ``(n - 1) / n`` of the others'; a point-to-point send sends its payload.

Per micro-batch (``T`` tokens of the micro-batch, ``d`` the model width, compute dtype):

- tensor parallel: each TP region (a layer's attention, its FFN or MoE block) all-reduces its
  output in forward and its input's gradient in backward, ``T x d`` each (MLA: the gradients of
  the latents q_b and kv_b read, ``T x q_lora_rank`` or ``T x d``, and ``T x kv_lora_rank``, and
  of the shared RoPE key, ``T x qk_rope_head_dim``); the
  vocab-parallel embedding all-reduces its output, the LM head its input's gradient, and the
  vocab-parallel cross-entropy three fp32 values per token (max logit, sum of exponentials,
  target logit). With ``sp`` each all-reduce is a reduce-scatter and an all-gather of the same
  payload (the embedding's a reduce-scatter; the LM head all-gathers its input and
  reduce-scatters its gradient); with fp8 matmuls scaled tensorwise the regions' all-gathers move
  fp8, one byte a value (torchao's float8 TP plans cast before gathering:
  :mod:`analysis.perf.float8`). A parallel block's two branches are two regions. Inference ends
  with an all-gather of the logits;
- expert parallel: each MoE layer dispatches and combines its ``T x k`` token slots with an
  all-to-all in forward and again in backward, ``T x k x d``;
- context parallel (ring attention): each layer passes its K and V (the values its KV cache
  holds per token: MLA's latent and rope key) around the ring of ``cp`` GPUs, ``cp - 1`` sends of
  the local ``T/cp`` tokens' in forward (a layer with window W only ``ceil(W / (S/cp))``, the
  chunks its window reaches), and in backward again with their gradients (twice the
  forward); every other figure is of the ``T/cp`` tokens a GPU holds;
- pipeline parallel: a stage sends its output, ``T x d`` (``/ tp`` with ``sp``), to the next
  stage, and in backward the gradient of its input to the previous one (each of its ``vpp``
  model chunks does, interleaved);
- full recomputation repeats each layer's forward collectives in backward; per-op checkpointing
  (:mod:`analysis.count.recompute`) those but the reduce-scatters, whose outputs it keeps: a region's
  all-gather under ``sp`` (its all-reduce without), the MoE all-to-alls; not ring attention's sends,
  inside the attention kernel whose output it keeps;
- ZeRO-3 (FSDP2): each layer is a unit; per micro-batch every unit's weights are all-gathered
  for forward and, except the root unit's (the stage's embedding, final norm and LM head, which
  FSDP2 keeps gathered between forward and backward), again for backward, and its gradients
  reduce-scattered.

Per step: data parallel all-reduces the gradients (ZeRO-0), or reduce-scatters them and
all-gathers the updated weights (ZeRO-1; ZeRO-2 keeps only its gradient shard, so it
reduce-scatters every micro-batch's), over the ``dp x cp`` GPUs that hold the same
parameters (group ``dp``); routed experts over the ``dp x cp / ep`` that hold the same
experts. Under LoRA only the adapters are reduced and their updates gathered (the base is
frozen); ZeRO-3 gathers the base's shards with theirs, its weights in their stored dtype. A tied
embedding split over pipeline stages all-reduces its gradient between the first and last stage.
Gradients are reduced in the run's gradient dtype (``grad_dtype``, the dtype they are held in: fp32
for Megatron-LM's ``--bf16`` default and torchtitan's FSDP), weights gathered in their own.
"""

from collections.abc import Sequence
from typing import NamedTuple

from ..model.architecture import Block
from ..model.config import ModelConfig
from ..model.formats import FORMATS
from ..model.layers import layer_specs
from ..model.sizes import FP32, bytes_per, ceil_div, weight_bytes
from ..spec import Layout, RunSpec
from .sharding import cp_local, stage_keys, stages, tp_local, unit_sizes, workload
from .stored import held_units

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send")


class Collective(NamedTuple):
    what: str  # why it runs: "tp attention", "dp gradients", ...
    kind: str  # one of KINDS
    group: str  # tp | cp | dp (the dp x cp replicas) | ep | pp | dp/ep (holding the same experts) | pp ends
    ranks: int  # GPUs in the group
    calls: int  # per step (training) or pass (inference)
    payload: int  # bytes, summed over the calls (module docstring)
    per_micro_batch: bool = True  # False: once per step, after the pipeline drains

    @property
    def sent(self) -> int:
        """Bytes one GPU sends over the step (ring algorithms)."""
        if self.kind == "send":
            return self.payload
        share = self.payload * (self.ranks - 1)
        return (2 * share if self.kind == "all-reduce" else share) // self.ranks


# sp, training: a GPU saves its sequence shard of each region's input (and of the LM head's), and backward
# gathers it again for the weight gradients, issued before the input gradient's GEMM it runs beside
# (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication; Korthikanti et al. 2022, section 4.2.2)
REGATHERED = "tp inputs, gathered again for weight gradients"


def _tp(cfg: ModelConfig, run: RunSpec, layout: Layout, stage: int, passes: int, rerun: bool) -> list[Collective]:
    """Tensor-parallel collectives of one GPU of ``stage`` over the step (``run``: the GPU's share
    of the run, without its layout; so for each dimension)."""
    tp, m, train = layout.tp, layout.steps, run.mode == "train"
    T, b = run.tokens, bytes_per(run.dtype)
    act = T * cfg.d_model * b
    specs = layer_specs(cfg)
    layers = [specs[i] for i in stages(cfg, layout)[stage]]
    out: list[Collective] = []

    # torchao's float8 TP plans (tensorwise) cast a region's input, and backward's gradient of its
    # output, to fp8 on the sequence shard before all-gathering it (analysis/perf/float8.py)
    gathered = T * cfg.d_model if run.fp8_scaling == "tensorwise" else act

    def reduce(what: str, payload: int, calls: int, fp8: int | None = None) -> None:
        """``calls`` all-reduces, or reduce-scatter plus all-gather pairs under sp (the all-gather of
        ``fp8`` bytes when given)."""
        if calls:
            if layout.sp:
                out.extend((Collective(what, "reduce-scatter", "tp", tp, calls * m, calls * m * payload),
                            Collective(what, "all-gather", "tp", tp, calls * m, calls * m * (fp8 or payload))))
            else:
                out.append(Collective(what, "all-reduce", "tp", tp, calls * m, calls * m * payload))

    n = len(layers)
    reduce("tp region outputs", act, 2 * n * passes, gathered)
    if rerun and n:  # per-op checkpointing keeps the reduce-scatters' outputs: backward reruns the rest
        kind, payload = ("all-gather", gathered) if layout.sp else ("all-reduce", act)
        out.append(Collective("tp region outputs, rerun", kind, "tp", tp, 2 * n * m, 2 * n * m * payload))
    # per-op checkpointing runs each region's all-gather again in backward, which the weight gradients read
    if train and layout.sp and not rerun and n:
        out.append(Collective(REGATHERED, "all-gather", "tp", tp, 2 * n * m, 2 * n * m * gathered))
    if train:
        mla = [s for s in layers if s.attention == "mla"]
        mha = n - len(mla)
        reduce("tp region input gradients", act, n + mha, gathered)
        if mla:
            q_in = cfg.mla.q_lora_rank or cfg.d_model  # and the shared RoPE key, summed over local heads
            reduce("tp latent gradients", T * (q_in + cfg.mla.kv_lora_rank + cfg.mla.qk_rope_head_dim) * b,
                   len(mla))
    if stage == 0:
        kind = "reduce-scatter" if layout.sp else "all-reduce"
        out.append(Collective("tp embedding", kind, "tp", tp, m, m * act))
    if stage == layout.pp - 1:
        if train:
            if layout.sp:
                out += [Collective("tp lm_head input", "all-gather", "tp", tp, m, m * act),
                        Collective(REGATHERED, "all-gather", "tp", tp, m, m * act),
                        Collective("tp lm_head gradient", "reduce-scatter", "tp", tp, m, m * act)]
            else:
                out.append(Collective("tp lm_head gradient", "all-reduce", "tp", tp, m, m * act))
            out.append(Collective("tp cross-entropy", "all-reduce", "tp", tp, 3 * m, 3 * m * T * FP32))
        elif run.logit_tokens:  # cfg is the TP rank's: its vocabulary is the padded 1/tp
            logits = run.logit_tokens * cfg.vocab_size * tp * b
            out.append(Collective("tp logits", "all-gather", "tp", tp, m, m * logits))
    return out


def _ep(cfg: ModelConfig, run: RunSpec, layout: Layout, stage: int, passes: int) -> list[Collective]:
    specs = layer_specs(cfg)
    moe = sum(1 for i in stages(cfg, layout)[stage] if specs[i].ffn == "moe")
    if layout.ep == 1 or not moe:
        return []
    slots = ceil_div(run.tokens, layout.tp) if layout.sp else run.tokens
    payload = slots * cfg.moe.experts_per_token * cfg.d_model * bytes_per(run.dtype)
    calls = 2 * moe * (passes + (run.mode == "train")) * layout.steps
    return [Collective("ep dispatch and combine", "all-to-all", "ep", layout.ep, calls, calls * payload)]


def _cp(cfg: ModelConfig, run: RunSpec, layout: Layout, stage: int, passes: int) -> list[Collective]:
    """Ring attention's K/V sends (``run``: one GPU's ``S/cp`` tokens)."""
    if layout.cp == 1:
        return []
    specs = layer_specs(cfg)
    chunk = run.seq  # tokens of a sequence on one GPU (run is the GPU's share)

    def hops(i: int) -> int:  # a window reaches back over ceil(W / chunk) chunks at most
        w = specs[i].window if specs[i].chunk is None else specs[i].chunk  # a chunk reaches back less than C
        return layout.cp - 1 if w is None else min(layout.cp - 1, ceil_div(w, chunk))

    layers = stages(cfg, layout)[stage]
    rounds = (passes + 2 * (run.mode == "train")) * layout.steps  # forward(s); backward's K/V and gradients
    sends = sum(hops(i) for i in layers) * rounds
    kv = sum(hops(i) * Block(cfg, specs[i]).attention.kv_values_per_token for i in layers)
    return [Collective("cp ring K/V", "send", "cp", layout.cp, sends, rounds * run.tokens * kv * bytes_per(run.dtype))]


def _pp(cfg: ModelConfig, run: RunSpec, layout: Layout, stage: int) -> list[Collective]:
    if layout.pp == 1:
        return []
    act = run.tokens * cfg.d_model * bytes_per(run.dtype)
    act = ceil_div(act, layout.tp) if layout.sp else act
    # each model chunk sends its output on and (training) its input's gradient back, but the model's last
    # chunk (the last stage's last) has no output to send, nor its first (the first stage's first) a gradient;
    # interleaved, the last stage's other chunks send on to the first stage (Narayanan et al. 2021)
    v = layout.vpp
    sends = v - (stage == layout.pp - 1) + (run.mode == "train") * (v - (stage == 0))
    if not sends:  # an inference pass's last stage sends nothing on
        return []
    calls = sends * layout.steps
    out = [Collective("pp activations", "send", "pp", 2, calls, calls * act)]
    if run.mode == "train" and cfg.tie_embeddings and stage in (0, layout.pp - 1):
        out.append(Collective("tied embedding gradient", "all-reduce", "pp ends", 2, 1,
                              cfg.vocab_size * cfg.d_model * bytes_per(run.grad_dtype), per_micro_batch=False))
    return out


def _dp_group(run: RunSpec, trained: Sequence[tuple[int, int]], frozen: Sequence[tuple[int, int]], group: str,
              ranks: int) -> list[Collective]:
    """Data-parallel collectives over ``ranks`` GPUs of the FSDP units whose (elements, ZeRO shard)
    are ``trained`` (what the optimizer steps) and ``frozen`` (LoRA's base: all-gathered by ZeRO-3
    as any weight, never reduced)."""
    layout, train = run.layout, run.mode == "train"
    tag = "expert " if group == "dp/ep" else ""
    padded = [s * ranks for _, s in trained]
    if layout.zero == 3:
        m = layout.steps
        base = [s * ranks for _, s in frozen] or [0] * len(padded)
        units = [n + b for n, b in zip(padded, base)]
        gathered = [u for u in units if u]
        regathered = [u for u in units[1:] if u] if train else []  # the root unit stays gathered
        weights = [(n, b) for n, b in zip(padded, base) if n + b]
        weights += [(n, b) for n, b in zip(padded[1:], base[1:]) if n + b] if train else []
        reduced = [n for n in padded if n]
        out = []
        if gathered:  # one call per unit and micro-batch, of that unit's size
            trained_dtype = run.dtype if run.lora is not None else run.weights_dtype
            stored = sum(b for _, b in weights)  # a quantized format's: bytes of its codes (_frozen)
            nbytes = (weight_bytes(sum(n for n, _ in weights), trained_dtype)
                      + (stored if run.weights_dtype in FORMATS else weight_bytes(stored, run.weights_dtype)))
            out.append(Collective(f"zero-3 {tag}weights", "all-gather", group, ranks, len(gathered + regathered) * m,
                                  nbytes * m))
        if train and reduced:
            out.append(Collective(f"zero-3 {tag}gradients", "reduce-scatter", group, ranks, len(reduced) * m,
                                  weight_bytes(sum(reduced), run.grad_dtype) * m))
        return out
    total = sum(padded) if layout.zero else sum(n for n, _ in trained)
    if not train or not total:
        return []
    grads = weight_bytes(total, run.grad_dtype)
    if layout.zero == 0:
        return [Collective(f"dp {tag}gradients", "all-reduce", group, ranks, 1, grads, False)]
    # ZeRO-2 keeps only its gradient shard: every micro-batch's gradients are reduce-scattered
    m = layout.steps if layout.zero == 2 else 1
    return [Collective(f"zero-{layout.zero} {tag}gradients", "reduce-scatter", group, ranks, m, m * grads,
                       layout.zero == 2),
            Collective(f"zero-{layout.zero} {tag}weights", "all-gather", group, ranks, 1,
                       weight_bytes(total, run.dtype if run.lora is not None else run.weights_dtype), False)]


def _dp(cfg: ModelConfig, run: RunSpec, stage: int) -> list[Collective]:
    """LoRA: the adapters' gradients and updated weights alone (the base is frozen), and under
    ZeRO-3 the base's weights too."""
    layout, lora = run.layout, run.lora
    replicas = layout.replicas
    if layout.ep == 1:  # routed experts are ZeRO-sharded with the rest
        return (_dp_group(run, unit_sizes(cfg, layout, stage, lora), _frozen(cfg, run, stage, None), "dp", replicas)
                if replicas > 1 else [])
    out = []
    for expert, group, ranks in ((False, "dp", replicas), (True, "dp/ep", replicas // layout.ep)):
        if ranks > 1:
            out += _dp_group(run, unit_sizes(cfg, layout, stage, lora, False, expert),
                             _frozen(cfg, run, stage, expert), group, ranks)
    return out


def _frozen(cfg: ModelConfig, run: RunSpec, stage: int, expert: bool | None) -> Sequence[tuple[int, int]]:
    """(size, ZeRO shard) of each FSDP unit of LoRA's frozen base: elements of a plain dtype; bytes of a
    quantized format, its shard the codes' alone (the scales stay whole and are never gathered: stored.py)."""
    if run.lora is None or run.weights_dtype not in FORMATS:
        return unit_sizes(cfg, run.layout, stage, run.lora, True, expert)
    return [(u.whole, u.shard) for u in held_units(cfg, run.layout, stage, run.weights_dtype, run.dtype, expert)]


def collectives(cfg: ModelConfig, run: RunSpec, stage: int) -> list[Collective]:
    """The collectives one GPU of pipeline stage ``stage`` takes part in over one training step
    (``run.layout.steps`` micro-batches of ``run.batch`` sequences) or one inference pass."""
    run.no_images()
    return stage_collectives(cfg, run.resolve(cfg), stage)


def stage_collectives(cfg: ModelConfig, run: RunSpec, stage: int) -> list[Collective]:
    """:func:`collectives` of a resolved run."""
    return [c for _, group in collective_groups(cfg, run, stage) for c in group]


DIMENSIONS = ("tp", "cp", "ep", "pp", "dp")  # :func:`collective_groups`' in its order


def collective_groups(cfg: ModelConfig, run: RunSpec, stage: int, shared: dict | None = None,
                      dims: tuple[str, ...] = DIMENSIONS) -> list[tuple[tuple, tuple[Collective, ...]]]:
    """:func:`collectives` of a resolved run by parallel dimension (tp, cp, ep, pp, dp), each with
    the key of what it depends on; ``shared`` keeps each dimension's between calls on one ``cfg``
    (`plan`: a layout's tensor-parallel collectives are those of its ZeRO and expert variants).
    ``dims``: the dimensions asked for (:data:`DIMENSIONS`)."""
    layout = run.layout
    shared = {} if shared is None else shared
    sig = stage_keys(cfg, layout.pp, layout.vpp)[stage]  # stages of one key hold the same layers and ends
    base = (layout.tp, layout.cp, layout.steps, sig)
    work = workload(run)
    every: tuple[tuple, ...] = (
        ("tp", work, *base, layout.sp), ("cp", work, *base), ("ep", work, *base, layout.sp, layout.ep),
        ("pp", work, *base, layout.sp, layout.pp, layout.vpp),  # the state's, not the tokens':
        ("dp", run.mode, run.dtype, run.weights_dtype, run.lora, *base, layout.pp, layout.vpp, layout.ep, layout.zero,
         layout.dp))
    keys = [key for key in every if key[0] in dims]
    missing = [key for key in keys if key not in shared]
    if missing:
        share_key = ("share", work, layout.cp)  # one GPU's share of the run, the same under every layout of its cp
        if share_key not in shared:
            shared[share_key] = cp_local(run).replace(layout=Layout())
        local, mine = tp_local(cfg, layout.tp), shared[share_key]
        passes = 2 if run.mode == "train" and run.recompute == "full" else 1  # forward collectives per micro-batch
        # per-op checkpointing reruns the all-gathers, all-reduces and all-to-alls (not the attention kernel's ring)
        op = run.mode == "train" and run.recompute == "op"
        for key in missing:
            dim = key[0]
            group = ((_tp(local, mine, layout, stage, passes, op) if layout.tp > 1 else []) if dim == "tp"
                     else _cp(local, mine, layout, stage, passes) if dim == "cp"
                     else _ep(local, mine, layout, stage, passes + op) if dim == "ep"
                     else _pp(local, mine, layout, stage) if dim == "pp" else _dp(cfg, run, stage))
            shared[key] = tuple(group)
    return [(key, shared[key]) for key in keys]
