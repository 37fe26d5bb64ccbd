"""Attention kinds: one descriptor each, everything the analytic families need to know.

A descriptor lists the kind's matrices, norms and learned vectors, and gives its head count,
the per-head sizes of the scores (q.k) and of the values, the values its KV cache holds per
token, and the q/k elements RoPE rotates per token. Masking, windows, soft-capping, sinks
and position biases act on the score matrix and are the same for every kind
(:mod:`analysis.count.flops`). ``saves`` records on a :class:`~analysis.model.tape.Tape` the tensors
the kind keeps for backward (conventions in :mod:`analysis.count.activations`).

``mha``: multi-head attention with ``g = n_kv_heads`` K/V heads (GQA; 1 is MQA); with
``attention_gate`` (AFMoE) a linear ``attention/gate`` (d -> h*hd, no bias) of the layer's input,
whose sigmoid multiplies the merged heads before ``o``.
``mla``: multi-head latent attention (DeepSeek-V2/V3): the query optionally through a
low-rank ``q_a -> norm -> q_b``; K and V compressed into one latent of ``kv_lora_rank`` per
token plus one RoPE key of ``qk_rope_head_dim`` shared by all heads (``kv_a``), decompressed
per head by ``kv_b``. The cache holds the normed latent and the rotated shared key, so a forward
decompresses all the keys it attends to (``kv_b`` runs over keys, not new tokens), as transformers runs it.
A decode step under flash attention runs **absorbed** instead (:class:`AbsorbedMLA`), as serving engines
run it; which layers of a run do is :func:`analysis.count.flops.absorbed`'s rule.
With ``dsa`` (DeepSeek Sparse Attention: DeepSeek-V3.2, GLM-5) a lightning indexer joins MLA:
``attention/indexer/wq_b`` (q_lora_rank -> n*D) of the normed low-rank query,
``attention/indexer/wk`` (d -> D, one key per token, LayerNorm ``attention/indexer/k_norm`` with
weight and bias, cached beside the latent), ``attention/indexer/weights_proj`` (d -> n); RoPE on the
first ``qk_rope_head_dim`` of its query heads and key. It scores every key (``attention/indexer``:
``2*n*D`` for q.k plus ``2*n`` for the weighted sum over its heads, per query-key pair) and each
query attends to its ``topk`` best keys. It runs without gradient (transformers' ``torch.no_grad``):
no backward FLOPs, nothing saved for backward. A layer reusing another's top-k (``dsa.shared``) has no
indexer: its layer config has no ``dsa`` (:func:`.layers.layer_config`), its spec a ``topk``. With
``attention_gate`` (Hy4) ``attention/gate`` is ``d -> h*v_head_dim``, as MHA's before o.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

from .parts import Linear, Norm, Vector, make_norm
from .tape import INDEX, STAT, Tape, eager_core, merge_copies
from .variants import TEMPERATURE_COST, Op

if TYPE_CHECKING:  # the config's schema names the kinds (this registry's keys)
    from .config import ModelConfig
    from .layers import LayerSpec


class AttentionKind(Protocol):
    """What every attention descriptor gives (per layer, per token where it says so)."""

    @property
    def heads(self) -> int: ...  # query heads

    @property
    def kv_heads(self) -> int: ...  # K/V heads the score and value matmuls read

    @property
    def score_dim(self) -> int: ...  # per-head size of q.k

    @property
    def value_dim(self) -> int: ...  # per-head size of the values

    @property
    def kv_values_per_token(self) -> int: ...  # values its KV cache holds per token

    @property
    def rope_elements_per_token(self) -> int: ...  # q and k elements RoPE rotates per token

    @property
    def rope_dims(self) -> int: ...  # per-head width of the RoPE tables

    @property
    def values_in_keys(self) -> bool: ...  # the values are the keys' first value_dim columns, read with them

    def linears(self) -> list[Linear]: ...

    def norms(self) -> list[Norm]: ...

    def vectors(self) -> list[Vector]: ...

    def saves(self, tape: Tape, spec: LayerSpec, B: int, S: int, kind: str, x: str) -> None: ...


class _Attention:
    """What every kind shares: ``n_heads`` query heads, and optional sinks. A descriptor holds its
    config and computes everything from it."""

    __slots__ = ("cfg",)

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg

    @property
    def heads(self) -> int:
        return self.cfg.n_heads

    values_in_keys = False

    def vectors(self) -> list[Vector]:
        """Attention sinks (GPT-OSS): one learned logit per head joins each softmax."""
        return [Vector("attention/sinks", self.cfg.n_heads)] if self.cfg.attention_sinks else []


class MHA(_Attention):
    """Multi-head attention, with grouped (GQA) and multi-query K/V heads."""

    own_kv = True  # the layer projects its own K and V (kv_sharing.Reuser reads an earlier layer's)

    @property
    def kv_heads(self) -> int:
        return self.cfg.kv_heads

    @property
    def score_dim(self) -> int:
        return self.cfg.head_size

    @property
    def value_dim(self) -> int:
        return self.cfg.head_size

    @property
    def kv_values_per_token(self) -> int:
        return 2 * self.cfg.kv_width  # K and V

    @property
    def rope_elements_per_token(self) -> int:
        return (self.cfg.n_heads + self.cfg.kv_heads) * self.cfg.rotary_dims

    def linears(self) -> list[Linear]:
        c, d, qb = self.cfg, self.cfg.d_model, self.cfg.qkv_bias
        gate = [Linear("attention/gate", d, c.q_width, False)] if c.attention_gate else []
        v = [] if c.k_eq_v else [Linear("attention/v", d, c.kv_width, qb)]  # k_eq_v: the values are k's output
        return [Linear("attention/q", d, c.q_width, qb), Linear("attention/k", d, c.kv_width, qb),
                *v, *gate, Linear("attention/o", c.q_width, d, c.out_bias)]

    def norms(self) -> list[Norm]:
        c = self.cfg
        # v_norm (Gemma 4): a weightless norm over each value head
        v = [Norm("attention/v_norm", c.head_size, False, False, c.kv_heads)] if c.v_norm else []
        if c.qk_norm == "head":  # one norm of head_size applied to every head
            return [make_norm(c, "attention/q_norm", c.head_size, c.n_heads),
                    make_norm(c, "attention/k_norm", c.head_size, c.kv_heads), *v]
        if c.qk_norm == "full":  # over the whole projection output
            return [make_norm(c, "attention/q_norm", c.q_width), make_norm(c, "attention/k_norm", c.kv_width), *v]
        return v

    @property
    def rope_dims(self) -> int:
        """Dimensions of each head the RoPE tables cover."""
        return self.cfg.rotary_dims

    def saves(self, tape: Tape, spec: LayerSpec, B: int, S: int, kind: str, x: str) -> None:
        """What the layer keeps for backward with ``kind`` (eager or flash) attention; ``x`` names
        the input. q is laid out (B, h, S, hd) when partial RoPE concatenates it, else as a
        transposed view of its projection; flash lays its output out like q. A layer without its own
        K and V keeps q's side only: the source's attention saved the K and V it reads."""
        cfg = self.cfg
        T, h, g, b, hd = B * S, cfg.n_heads, cfg.kv_heads, tape.b, cfg.head_size
        qw, kw = cfg.q_width, cfg.kv_width if self.own_kv else 0
        for p in "q" if not self.own_kv else "qk" if cfg.k_eq_v else "qkv":
            tape.linear(f"attention/{p}", T * cfg.d_model * b, T, x)
        if cfg.attention_gate:
            tape.linear("attention/gate", T * cfg.d_model * b, T, x)
        k_out = "attention/k output" if cfg.k_eq_v else None  # k_eq_v: v_norm reads the same storage
        if cfg.qk_norm == "full":
            tape.norm("attention/q_norm", None, T, qw)
            if kw:
                tape.norm("attention/k_norm", k_out, T, kw)
        elif cfg.qk_norm == "head" or rope_norms(cfg, spec):
            tape.norm("attention/q_norm", None, T * h, hd)
            if kw:
                tape.norm("attention/k_norm", k_out, T * g, hd)
        if cfg.v_norm and kw:
            tape.norm("attention/v_norm", k_out, T * g, hd)
        if temperature(cfg, spec):  # q times a scale per position: the multiply keeps the scale
            tape.save("attention", S * b)
        if kind == "flash":
            tape.save("attention/sdpa", T * (qw + 2 * kw) * b)  # q, k, v
            tape.save("attention/sdpa", T * qw * b, "attention output")
            tape.save("attention/sdpa", B * h * S * STAT)  # log-sum-exp
            # laid out (B, S, h, hd), the output reaches the o projection as a view, else as a copy
            heads_first = (B, S, h, hd) if spec.rope and cfg.rotary_dims < cfg.head_size else None
            _output(tape, cfg, T, "attention output", heads_first=heads_first)
            return
        if kind == "selective":  # the checkpointed core keeps q, k and v (a view of its projection)
            tape.save("attention", T * (qw + 2 * kw) * b)
            _output(tape, cfg, T)
            return
        # the batched matmuls save K and V: a copy (heads expanded, or B and g merged), else a view of the
        # projection, which a layer without its own K and V does not hold (the source's storage, counted there)
        copies = eager_kv_copies(B, S, h, g, spec.rope and cfg.rotary_dims < hd)
        k, v = (T * (qw if copy else kw) for copy in copies)
        eager_core(tape, cfg, B, S, hd, k, v)
        _output(tape, cfg, T)  # heads merged back: a copy


def eager_kv_copies(B: int, S: int, h: int, g: int, contiguous_k: bool) -> tuple[bool, bool]:
    """Whether the batched matmuls of eager attention read copies of K and of V rather than their projections'
    storages: K/V heads expanded to ``h`` are copied unless one head of one sequence; not expanded, a tensor
    laid out (B, S, g, hd) and read (B, g, S, hd) is copied to merge B and g when all three exceed 1. K is so
    laid out unless partial RoPE concatenated it (``contiguous_k``), V always."""
    if h != g:
        return (not (B == 1 and g == 1),) * 2
    merge = B > 1 and g > 1 and S > 1
    return merge and not contiguous_k, merge


def rope_norms(cfg: ModelConfig, spec: LayerSpec) -> list[Norm]:
    """``qk_norm: l2`` (Llama 4): a weightless RMSNorm over each q and k head of a RoPE layer (the
    norm commutes with the rotation, which keeps each head's length), no parameters."""
    if cfg.qk_norm != "l2" or not spec.rope or spec.attention != "mha":
        return []
    return [Norm("attention/q_norm", cfg.head_size, False, False, cfg.n_heads),
            Norm("attention/k_norm", cfg.head_size, False, False, cfg.kv_heads)]


def temperature(cfg: ModelConfig, spec: LayerSpec) -> bool:
    """Attention temperature tuning (Llama 4) on a layer without RoPE: q scaled per position."""
    return cfg.attn_temperature_tuning and not spec.rope and spec.attention == "mha"


def temperature_ops(cfg: ModelConfig, spec: LayerSpec, T: int) -> list[Op]:
    """Temperature tuning's elementwise ops over ``T`` tokens: the scale of each token's position,
    and the multiply of every query element (reads q and writes it)."""
    if not temperature(cfg, spec):
        return []
    return [Op("attention/temperature", T, TEMPERATURE_COST, 1),
            Op("attention/temperature", T * cfg.q_width, 1, 2)]


def _output(tape: Tape, cfg: ModelConfig, T: int, y: str | None = None, width: int | None = None,
            heads_first: tuple[int, int, int, int] | None = None) -> None:
    """The o projection's input: the merged heads ``y`` (``T*width`` values, ``h*hd`` by default; named
    when a view of the attention output). ``heads_first``: (B, S, h, d) of an output ``y`` laid out
    (B, h, S, d), read as a view only where its strides allow (:func:`.tape.merge_copies`). With the output
    gate (AFMoE, Hy4), ``y * sigmoid(gate)``: the sigmoid keeps its output, the multiply both factors (``y``,
    as (B, S, h*d), and that output), o the product. With ``sub_norms`` (BitNet) a norm keeps that input and
    its statistics, and o the norm's output."""
    n = T * (cfg.q_width if width is None else width) * tape.b
    if cfg.attention_gate:
        tape.save("attention", n)  # sigmoid's output
        copy = heads_first is not None and merge_copies(*heads_first, rows=False)
        tape.save("attention", n, None if copy else y)  # the multiply's other factor
        y = None  # the product
    elif heads_first is not None and merge_copies(*heads_first):
        y = None  # o reads a copy
    if cfg.sub_norms:  # BitNet: a norm over the merged heads (or the product); o keeps its output
        y = tape.norm("attention/sub_norm", y, T, cfg.q_width)
    tape.linear("attention/o", n, T, y)


class MLA(_Attention):
    """Multi-head latent attention: K and V from a compressed latent, one shared RoPE key."""

    @property
    def kv_heads(self) -> int:
        """kv_b decompresses K and V for every query head."""
        return self.cfg.n_heads

    @property
    def score_dim(self) -> int:
        m = self.cfg.mla
        return m.qk_nope_head_dim + m.qk_rope_head_dim

    @property
    def value_dim(self) -> int:
        return self.cfg.mla.v_head_dim

    @property
    def kv_values_per_token(self) -> int:
        dsa = 0 if self.cfg.dsa is None else self.cfg.dsa.head_dim  # the indexer's key
        return self.cfg.mla.kv_lora_rank + self.cfg.mla.qk_rope_head_dim + dsa  # latent + shared rope key

    @property
    def rope_elements_per_token(self) -> int:
        dsa = 0 if self.cfg.dsa is None else self.cfg.dsa.n_heads + 1  # the indexer's heads and key
        return (self.cfg.n_heads + 1 + dsa) * self.cfg.mla.qk_rope_head_dim  # every query head, one key

    def linears(self) -> list[Linear]:
        c, m, d, h = self.cfg, self.cfg.mla, self.cfg.d_model, self.cfg.n_heads
        q_out = h * self.score_dim
        if m.q_lora_rank is None:
            q = [Linear("attention/q", d, q_out, c.qkv_bias)]
        else:
            q = [Linear("attention/q_a", d, m.q_lora_rank, c.qkv_bias),
                 Linear("attention/q_b", m.q_lora_rank, q_out, False)]
        gate = [Linear("attention/gate", d, h * m.v_head_dim, False)] if c.attention_gate else []
        return q + [
            Linear("attention/kv_a", d, m.kv_lora_rank + m.qk_rope_head_dim, c.qkv_bias),
            Linear("attention/kv_b", m.kv_lora_rank, h * (m.qk_nope_head_dim + m.v_head_dim), False,
                   over_keys=True),
            *gate, Linear("attention/o", h * m.v_head_dim, d, c.out_bias),
        ] + indexer_linears(c)

    def norms(self) -> list[Norm]:
        c, m = self.cfg, self.cfg.mla
        q = [] if m.q_lora_rank is None else [make_norm(c, "attention/q_a_norm", m.q_lora_rank)]
        dsa = [] if c.dsa is None else [Norm("attention/indexer/k_norm", c.dsa.head_dim, True, True)]
        return q + [make_norm(c, "attention/kv_a_norm", m.kv_lora_rank)] + dsa

    @property
    def rope_dims(self) -> int:
        return self.cfg.mla.qk_rope_head_dim

    def saves(self, tape: Tape, spec: LayerSpec, B: int, S: int, kind: str, x: str) -> None:
        """As :meth:`MHA.saves`; q and k are concatenated from their nope and rope parts."""
        cfg = self.cfg
        m, T, h, b = cfg.mla, B * S, cfg.n_heads, tape.b
        nope, d_v = m.qk_nope_head_dim, m.v_head_dim
        d_qk = nope + m.qk_rope_head_dim
        if m.q_lora_rank is not None:
            tape.linear("attention/q_a", T * cfg.d_model * b, T, x)
            tape.norm("attention/q_a_norm", None, T, m.q_lora_rank)
            tape.linear("attention/q_b", T * m.q_lora_rank * b, T, "attention/q_a_norm output")
        else:
            tape.linear("attention/q", T * cfg.d_model * b, T, x)
        tape.linear("attention/kv_a", T * cfg.d_model * b, T, x)
        if cfg.attention_gate:
            tape.linear("attention/gate", T * cfg.d_model * b, T, x)
        # the norm reads the latent half of kv_a's output: a view, whose whole storage counts
        tape.norm("attention/kv_a_norm", None, T, m.kv_lora_rank, T * (m.kv_lora_rank + m.qk_rope_head_dim))
        tape.linear("attention/kv_b", T * m.kv_lora_rank * b, T, "attention/kv_a_norm output")
        kv_b_out = T * h * (nope + d_v)  # v is a view of it
        if spec.topk is not None:  # the sparse core (the indexer keeps nothing: no gradient)
            _sparse_core(tape, cfg, spec, B, S, kind, 2 * T * h * d_qk + kv_b_out)
            return
        if kind == "flash":
            # q and k concatenated from their nope and rope parts, v (kv_b's output); the output
            tape.save("attention/sdpa", (T * h * 2 * d_qk + kv_b_out) * b)
            tape.save("attention/sdpa", T * h * d_v * b, "attention output")
            tape.save("attention/sdpa", B * h * S * STAT)  # log-sum-exp
            # laid out like q, (B, h, S, d_v), the output reaches the o projection as a copy
            _output(tape, cfg, T, "attention output", h * d_v, (B, S, h, d_v))
            return
        if kind == "selective":  # the checkpointed core keeps q, k and v (a view of kv_b's output)
            tape.save("attention", (2 * T * h * d_qk + kv_b_out) * b)
            _output(tape, cfg, T, None, h * d_v)
            return
        # the values matmul reads v in place when (B, h) merge into one batch dim, else a copy
        v = kv_b_out if B == 1 or S == 1 or h == 1 else T * h * d_v
        eager_core(tape, cfg, B, S, d_qk, T * h * d_qk, v)
        _output(tape, cfg, T, None, h * d_v)  # heads merged back: a copy


class AbsorbedMLA(MLA):
    """MLA's decode step with weight absorption, as serving engines run it (vLLM's MLA backend, its
    "data-movement friendly approach", ``vllm/v1/attention/backends/mla/common.py``; SGLang; FlashMLA; the
    DeepSeek-V2 paper, arXiv:2405.04434, section 2.1.2): ``kv_b``'s key half W_UK turns each head's ``q_nope``
    into a query over the latent (``nope -> kv_lora_rank``), the scores are taken against the cached latent and rope key
    (``kv_lora_rank + qk_rope_head_dim`` wide, one K/V head for all query heads: MQA), the values are the
    latents themselves (``kv_lora_rank`` wide, the keys' first columns, read with them), and ``kv_b``'s value
    half W_UV turns each head's output back into ``v_head_dim``. ``kv_b`` runs on the new tokens, not on
    the keys: two batched matmuls, ``2*T*h*kv_lora_rank*(nope + v)`` FLOPs together, as the linear over
    ``T`` rows. Parameters, the cache and the elementwise ops are MLA's."""

    @property
    def kv_heads(self) -> int:
        return 1

    @property
    def score_dim(self) -> int:
        m = self.cfg.mla
        return m.kv_lora_rank + m.qk_rope_head_dim

    @property
    def value_dim(self) -> int:
        return self.cfg.mla.kv_lora_rank

    values_in_keys = True

    @property
    def kv_b_io(self) -> int:
        """Values ``kv_b``'s two absorbed matmuls read and write per token: ``q_nope`` in, the latent
        query out (W_UK); the latent output in, the heads' values out (W_UV)."""
        m, h = self.cfg.mla, self.cfg.n_heads
        return h * (m.qk_nope_head_dim + 2 * m.kv_lora_rank + m.v_head_dim)


def indexer_linears(cfg: ModelConfig) -> list[Linear]:
    """DSA's lightning indexer: its query from the normed low-rank query, one key, per-head weights."""
    if cfg.dsa is None or cfg.mla is None or cfg.mla.q_lora_rank is None:
        return []
    n, D = cfg.dsa.n_heads, cfg.dsa.head_dim
    return [Linear("attention/indexer/wq_b", cfg.mla.q_lora_rank, n * D, False),
            Linear("attention/indexer/wk", cfg.d_model, D, False),
            Linear("attention/indexer/weights_proj", cfg.d_model, n, False)]


def _sparse_core(tape: Tape, cfg: ModelConfig, spec: LayerSpec, B: int, S: int, kind: str, qkv: int) -> None:
    """DSA's core over each query's ``K = min(S, topk)`` selected keys: it keeps q, k (both
    concatenated) and v (a view of kv_b's output), ``qkv`` values, and the int64 indices (a layer reusing
    another's top-k shares them); eager the
    ``B*h*S*K`` probabilities, flash its output and fp32 log-sum-exp (it recomputes the scores);
    selective recomputation keeps the core's inputs only. The o projection reads a copy of the
    merged heads (or a view of flash's output)."""
    T, h, b, d_v = B * S, cfg.n_heads, tape.b, cfg.mla.v_head_dim
    K = min(S, spec.topk or S)
    key = "attention" if kind == "selective" else "attention/sdpa"
    tape.save(key, qkv * b)
    if not spec.shared_topk:  # a shared layer's are its indexed layer's, kept there
        tape.save(key, T * K * INDEX)
        if kind == "selective":  # the checkpoint also keeps the bool mask of the selected keys a query may see
            tape.save(key, T * K)
    if kind == "eager":
        tape.save(key, B * h * S * K * b)  # probabilities
    if kind == "flash":
        tape.save(key, T * h * d_v * b, "attention output")
        tape.save(key, B * h * S * STAT)
    _output(tape, cfg, T, "attention output" if kind == "flash" else None, h * d_v, (B, S, h, d_v))


ATTENTION: dict[str, Callable[[ModelConfig], AttentionKind]] = {"mha": MHA, "mla": MLA}
