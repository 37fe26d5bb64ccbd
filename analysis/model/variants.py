"""One record per activation, per position type and per norm: everything llmcalc needs to
know about each, in one place. Attention kinds and FFN kinds have richer descriptors
(:mod:`analysis.attention`, :mod:`analysis.ffn`); these are the small leaf variants.

Elementwise costs are forward FLOPs per element (README "Elementwise FLOPs"); they are
documented conventions, not measurements (FlopCounterMode counts only matmuls).
"""

from typing import NamedTuple


class Activation(NamedTuple):
    """An FFN activation: its name in configs, whether it is gated, its cost and what it saves."""

    name: str
    gated: bool  # act(gate(x)) * up(x): three matrices of width d_ff
    cost: int  # FLOPs per hidden element, gated ones including the multiply by the up branch
    # hidden-width tensors kept for backward besides the down projection's input ("out"):
    # "pre" the activation's input, "act" its output, "up" the up branch, "relu" relu's output
    saves: tuple[str, ...]
    # learned scalars the MLP holds for it, each its own one-element tensor (xIELU: alpha_p, alpha_n
    # and the buffers beta, eps, all stored in the checkpoint), under ``mlp/act``
    scalars: int = 0


ACTIVATIONS = {a.name: a for a in (
    Activation("relu", False, 1, ("out",)),  # relu keeps its output, the down projection's input
    Activation("gelu", False, 8, ("pre",)),  # tanh approximation: 8 ops
    Activation("silu", False, 4, ("pre",)),  # x * sigmoid(x)
    Activation("sqrelu", False, 2, ("relu",)),  # square keeps relu's output, relu the same tensor
    Activation("swiglu", True, 5, ("pre", "act", "up")),
    Activation("geglu", True, 9, ("pre", "act", "up")),
    Activation("reglu", True, 2, ("act", "up")),  # relu keeps its output; the product both factors
    # relu(gate)**2 * up (BitNet's relu2 MLP): relu 1, square 1, product 1; square keeps relu's output
    # (relu the same tensor), the product both factors
    Activation("sqreglu", True, 3, ("relu", "act", "up")),
    # xIELU (Apertus): x > 0 (1), alpha_p*x*x + beta*x (4), (expm1(min(x, eps)) - x)*alpha_n + beta*x (6),
    # the select (1): transformers' formula, both branches; one fused function that keeps its input
    Activation("xielu", False, 12, ("pre",), scalars=4),
)}


class Position(NamedTuple):
    """A position type: where it acts (embeddings, q and k, the scores) and what it learns."""

    name: str
    embedding: bool  # added to the token embeddings (one add per element)
    rotary: bool  # rotates q and k inside attention (RoPE)
    score_bias: bool  # adds a per-head bias to every score (ALiBi, T5)
    # the score bias is learned: it needs a gradient no fused attention kernel gives, so
    # attention runs eager (its backward and saved tensors) even when flash is asked for
    learned_bias: bool = False


POSITIONS = {p.name: p for p in (
    Position("learned", True, False, False),  # context_length x d_model parameters
    Position("sinusoidal", True, False, False),
    Position("rope", False, True, False),
    Position("alibi", False, False, True),
    Position("relative", False, False, True, learned_bias=True),  # T5: one (buckets, heads) table
    Position("none", False, False, False),
)}

# LayerNorm: mean, variance, normalize (+ scale, + shift); RMSNorm: mean of squares, normalize (+ scale)
NORMS = ("layernorm", "rmsnorm")


def norm_cost(norm: str, weight: bool, bias: bool) -> int:
    """Forward FLOPs per normalized element."""
    return (5 if norm == "layernorm" else 3) + int(weight) + int(bias and norm == "layernorm")


def norm_stat_values(norm: str) -> int:
    """fp32 statistics a norm keeps per row for backward: LayerNorm mean and rstd, RMSNorm rstd."""
    return 2 if norm == "layernorm" else 1


SOFTMAX_COST = 5  # max, subtract, exp, sum, divide
ROPE_COST = 3  # x*cos + rotate(x)*sin per rotated element of q and k
# attention temperature tuning (Llama 4's NoPE layers): the scale log1p(floor((p + 1) / floor_scale))
# * attn_scale + 1 of each token's position p (6), then 1 per query element (the multiply)
TEMPERATURE_COST = 6
SCORE_SCALE_COST = 1  # scores / sqrt(score head size)
POSITION_BIAS_COST = 1  # ALiBi or T5 relative bias added to each score
SOFTCAP_COST = 3  # cap * tanh(x / cap): divide, tanh, multiply


class Op(NamedTuple):
    """An elementwise op: ``cost`` FLOPs on each of ``elements`` elements, reading and writing
    ``io`` values per element (its memory traffic, :mod:`analysis.traffic`; 0: fused into the
    kernel it follows, as a bias into its matmul). ``scores``: it runs over the score matrix,
    which flash attention keeps on chip (fused into the attention kernel)."""

    key: str
    elements: int
    cost: int
    io: int
    scores: bool = False
