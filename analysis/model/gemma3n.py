"""Gemma 3n's layers (``gemma3n``): AltUp's residual streams, Laurel, per-layer inputs and activation sparsity,
as transformers' Gemma3nTextModel runs them. Imported when a config has the key (:func:`.keys.nested`).

``N`` streams (``streams``) of ``d`` values per token. The model embeds the tokens once (``x0``, scaled by
``embedding_scale``), then the other N-1 streams are ``altup/embed``'s linears of it (``d -> d`` each), each
rescaled to ``x0``'s root mean square. Per-layer inputs: a table of ``per_layer_vocab`` rows of ``L*p``
(``embedding/per_layer``, scaled by sqrt p; a token id past the table reads row 0) plus
``per_layer/model_projection`` (``d -> L*p``, times ``d^-1/2``) of ``x0`` normed over each ``p``
(``norm/per_layer_projection``), the sum times ``2^-1/2``: layer ``i`` reads slice ``i``.

A layer (streams ``X``; ``n_*`` the model's norms; attention and FFN as a ``sandwich`` layer's):

- predict: ``m = tanh(altup/router(altup/router_norm(X_0) / d))`` (N values), ``C = altup/prediction(m)``
  (N x N), ``P = C @ X + X`` (``altup/predict_mix``: an N x N by N x d matmul per token);
- ``h = n_attention(P_0)``; ``l = h + n_laurel(laurel/right(laurel/left(h)))`` (rank ``laurel_rank``);
  ``x = (P_0 + n_attention_post(attn(h)) + l) / sqrt 2``; ``y = x + n_mlp_post(mlp(n_mlp(x)))``, where on
  a sparse layer (``sparse_layers``) the gate's output ``g`` becomes ``relu(g - mean(g) - std(g) * z)``
  (``z`` the normal quantile of ``sparsity``: elementwise only);
- correct: ``c = altup/correction(tanh(altup/router(altup/router_norm(y) / d))) + 1``,
  ``Z_j = P_j + c_j * (y - P_0)``; ``f = Z_0 * altup/scale`` (with ``correct_scale``; else ``f = Z_0``, the
  vector a parameter still);
- ``Z_j += n_per_layer(per_layer/projection(gelu(per_layer/gate(f)) * input_i))`` for the streams j >= 1.

After the last layer, streams 1..N-1 go through ``altup/unembed`` (rescaled to stream 0's root mean square
again) and the N are averaged before the final norm (over the tokens the LM head reads).

Elementwise costs (forward FLOPs per element): tanh 1, the router's scale 1, the predictions' and
corrections' adds and multiplies 1 each, a root mean square 2 per element (square, sum), a rescale 1, gelu
:data:`.variants.ACTIVATIONS`' (the tanh approximation), the sparsity's mean 1, standard deviation 3, subtraction 1
and relu 1. Saved for backward: see :func:`layer_saves` and :func:`model_saves`, what the reference
(:mod:`analysis.verify.gemma3n`) keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .keys import boolean, checked, integer, number, optional, pattern
from .parts import Linear, Norm, Table, Vector, make_norm
from .tape import INDEX, STAT, Tape
from .variants import ACTIVATIONS, Op, norm_cost

if TYPE_CHECKING:
    from .config import ModelConfig

SPARSITY_COST = 6  # mean 1, standard deviation 3, subtract 1, relu 1


@dataclass(frozen=True)
class Gemma3nConfig:
    """AltUp's streams, Laurel's rank, the per-layer inputs and the sparse FFN layers (module docstring)."""

    streams: int = checked(integer(2))  # N: altup_num_inputs
    laurel_rank: int = checked(integer())
    per_layer_width: int = checked(integer())  # p: hidden_size_per_layer_input
    per_layer_vocab: int = checked(integer())  # vocab_size_per_layer_input
    # altup_correct_scale: stream 0 times the learned vector altup/scale (a parameter either way, as transformers
    # builds it)
    correct_scale: bool = checked(boolean, True)
    # layers whose gate output is cut at its mean + z * std (cyclic, as ffn_layers); None: none
    sparse_layers: tuple[bool, ...] | None = checked(optional(pattern(boolean)), None)
    sparsity: float = checked(number(0.999999), 0.95)  # the target share of zeros: z its normal quantile

    def sparse(self, i: int) -> bool:
        s = self.sparse_layers
        return s is not None and s[i % len(s)]


def _g(cfg: ModelConfig) -> Gemma3nConfig:
    assert cfg.gemma3n is not None, "no gemma3n mapping"
    return cfg.gemma3n


# -- parts --------------------------------------------------------------------------------

def layer_linears(cfg: ModelConfig) -> list[Linear]:
    """Laurel's and the per-layer input's matrices: each runs once over every token."""
    g, d = _g(cfg), cfg.d_model
    return [Linear("laurel/left", d, g.laurel_rank, False), Linear("laurel/right", g.laurel_rank, d, False),
            Linear("per_layer/gate", d, g.per_layer_width, False),
            Linear("per_layer/projection", g.per_layer_width, d, False)]


def layer_norms(cfg: ModelConfig) -> list[Norm]:
    """The router's norm (twice a token: predict and correct), Laurel's and the per-layer input's."""
    d = cfg.d_model
    return [make_norm(cfg, "altup/router_norm", d, rows=2), make_norm(cfg, "norm/laurel", d),
            make_norm(cfg, "norm/per_layer", d)]


def layer_vectors(cfg: ModelConfig) -> list[Vector]:
    """AltUp's small matrices (their matmuls are :func:`layer_matmul`'s) and stream 0's scale (built whether or not
    ``correct_scale`` multiplies by it)."""
    N, d = _g(cfg).streams, cfg.d_model
    return [Vector("altup/router", d * N), Vector("altup/prediction", N * N * N), Vector("altup/correction", N * N),
            Vector("altup/scale", d)]


def model_parts(cfg: ModelConfig) -> tuple[Table | Linear | Norm, ...]:
    """The per-layer inputs' table, projection and norm, and the streams' (un)embedding linears."""
    g, d, L = _g(cfg), cfg.d_model, cfg.n_layers
    N, p = g.streams, g.per_layer_width
    return (Table("embedding/per_layer", g.per_layer_vocab, L * p),
            Linear("per_layer/model_projection", d, L * p, False),
            make_norm(cfg, "norm/per_layer_projection", p), Linear("altup/embed", d, d, False, N - 1, N - 1),
            Linear("altup/unembed", d, d, False, N - 1, N - 1))


# -- FLOPs --------------------------------------------------------------------------------

def layer_matmul(cfg: ModelConfig, tokens: int) -> dict[str, int]:
    """A layer's AltUp matmuls over ``tokens``: the router twice, the two coefficient linears, the predictions."""
    N, d, T = _g(cfg).streams, cfg.d_model, tokens
    return {"altup/router": 2 * 2 * T * d * N, "altup/prediction": 2 * T * N * N * N, "altup/correction": 2 * T * N * N,
            "altup/predict_mix": 2 * T * N * N * d}


def model_matmul(cfg: ModelConfig, tokens: int, logit_tokens: int) -> dict[str, int]:
    """The per-layer inputs' projection and the streams' embedding (every token) and unembedding (the
    tokens the LM head reads)."""
    N, p, d, L = _g(cfg).streams, _g(cfg).per_layer_width, cfg.d_model, cfg.n_layers
    return {"per_layer/model_projection": 2 * tokens * d * L * p, "altup/embed": 2 * (N - 1) * tokens * d * d,
            "altup/unembed": 2 * (N - 1) * logit_tokens * d * d}


def layer_ops(cfg: ModelConfig, tokens: int, sparse: bool) -> list[Op]:
    """A layer's elementwise ops beyond its norms and its sandwich layer's residual adds (module docstring)."""
    g, d, T = _g(cfg), cfg.d_model, tokens
    N, p = g.streams, g.per_layer_width
    ops = [Op("altup", 2 * T * d, 1, 2), Op("altup", 2 * T * N, 1, 2),  # the router's scale and tanh, twice
           Op("altup", T * N * d, 1, 3),  # the predictions plus the streams
           Op("altup", T * N, 1, 2), Op("altup", T * d, 1, 3), Op("altup", T * N * d, 2, 3),  # +1, innovation, Z
           Op("laurel", T * d, 1, 3), Op("residual", T * d, 1, 3), Op("residual", T * d, 1, 2),  # l, + l, / sqrt 2
           Op("per_layer", T * p, ACTIVATIONS["gelu"].cost, 2), Op("per_layer", T * p, 1, 3),
           Op("per_layer", (N - 1) * T * d, 1, 3)]  # added to streams 1..N-1
    if g.correct_scale:
        ops.append(Op("altup/scale", T * d, 1, 2))
    if sparse:
        ops.append(Op("mlp/sparsity", T * cfg.d_ff, SPARSITY_COST, 2))
    return ops


def model_ops(cfg: ModelConfig, tokens: int, logit_tokens: int) -> list[Op]:
    """The per-layer inputs' scales, norm and sum; the streams' rescaling at both ends and their average."""
    g, d, L = _g(cfg), cfg.d_model, cfg.n_layers
    N, p = g.streams, g.per_layer_width
    T, n = tokens, logit_tokens
    return [Op("per_layer", 2 * T * L * p, 1, 2), Op("norm", T * L * p, norm_cost(cfg.norm, cfg.norm_weight, False), 2),
            Op("per_layer", T * L * p, 2, 3),  # the sum and its scale
            Op("altup/embed", T * d, 2, 1), Op("altup/embed", (N - 1) * T * d, 3, 2),  # RMS of x0; each rescaled
            Op("altup/unembed", n * d, 2, 1), Op("altup/unembed", (N - 1) * n * d, 3, 2),
            Op("altup/unembed", N * n * d, 1, 2)]  # the average


# -- saved for backward -------------------------------------------------------------------

def layer_saves(tape: Tape, T: int, attn, ffn, sparse: bool) -> None:
    """One layer's saves in the reference's order: ``attn(x)`` and ``ffn(x)`` record the sandwich branches
    (their post norms included) over the storage ``x`` names."""
    cfg, b = tape.cfg, tape.b
    g, d = _g(cfg), cfg.d_model
    N, p, r = g.streams, g.per_layer_width, g.laurel_rank
    tape.norm("altup/router_norm", "streams", T, d, N * T * d)  # stream 0: a view of the layer's input
    tape.save("altup/router", T * d * b)  # the normed stream, scaled
    tape.save("altup", T * N * b)  # tanh's output (the prediction linear's input)
    tape.save("altup/predict_mix", T * N * N * b)  # the coefficients (and the streams, saved above)
    h = tape.norm("norm/attention", "predictions", T, d, N * T * d)  # P_0: a view of the predictions
    attn(h)
    tape.linear("laurel/left", T * d * b, T, h)
    tape.linear("laurel/right", T * r * b, T)
    tape.norm("norm/laurel", None, T, d)
    if sparse:  # the standard deviation keeps the gate's output and its own; relu its output, which gelu reads
        f = cfg.d_ff
        tape.save("mlp/sparsity", T * f * b + T * b)
        tape.save("mlp/sparsity", T * f * b, "mlp pre")
    ffn(tape.norm("norm/mlp", None, T, d))
    tape.norm("altup/router_norm", None, T, d)
    tape.save("altup/router", T * d * b)
    tape.save("altup", T * N * b)  # tanh's output
    tape.save("altup", T * N * b + T * d * b)  # c and the innovation, the factors of their product
    if g.correct_scale:  # stream 0 times the scale: the corrected streams (Z_0 a view)
        tape.save("altup", N * T * d * b)
    tape.linear("per_layer/gate", T * d * b, T)
    tape.save("per_layer", 3 * T * p * b)  # gelu's input; the product's factors: gelu's output, the layer's input
    tape.linear("per_layer/projection", T * p * b, T)
    tape.norm("norm/per_layer", None, T, d)


def model_saves(cfg: ModelConfig, T: int, n: int, b: int) -> dict[str, int]:
    """What the model keeps beyond a layer's: ``T`` tokens, the head's ``n``; ``b`` bytes a value."""
    g, d, L = _g(cfg), cfg.d_model, cfg.n_layers
    N, p = g.streams, g.per_layer_width
    out = {"per_layer/model_projection": T * d * b,  # the scaled embeddings (also the streams' RMS and embed)
           "norm/per_layer_projection": T * L * (p * b + STAT),
           # the RMS of x0: the clamp's input and sqrt's output; per embedded stream its output (squared and
           # multiplied), the clamp's input, sqrt's output and the ratio
           "altup/embed": 2 * T * b + (N - 1) * (T * d * b + 3 * T * b),
           # the unembedding: stream 0 copied (squared) and its RMS's two; per other stream its copy (the linear's
           # input), its output and the three per-token values
           "altup/unembed": n * d * b + 2 * n * b + (N - 1) * (2 * n * d * b + 3 * n * b)}
    if g.per_layer_vocab < cfg.vocab_size:  # the ids past the table read row 0: a tensor of their own
        out["embedding/per_layer"] = T * INDEX
    return out
