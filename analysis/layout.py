"""The inventory of one transformer layer: which matrices and norms it holds.

Parameters, FLOPs and memory are all computed from this one inventory, so the three
can never disagree about what a layer contains. Keys are the stable breakdown paths
(``attention/q``, ``mlp/up``, ``moe/experts``, ``norm/attention``) that the reference
modules of ``analysis.verify`` use as their submodule names.

Block structure (``x`` is the residual stream; ``n_a``/``n_m`` the attention/MLP norms):

- sequential, ``pre``:      ``x += attn(n_a(x)); x += mlp(n_m(x))``
- sequential, ``post``:     ``x = n_a(x + attn(x)); x = n_m(x + mlp(x))``
- sequential, ``sandwich``: ``x += n_a_post(attn(n_a(x))); x += n_m_post(mlp(n_m(x)))``
- parallel, ``pre``:        ``x += attn(n_a(x)) + mlp(n_m(x))``, with ``n_m = n_a`` when
  ``parallel_norms`` is 1 (GPT-J, PaLM) and a separate norm when it is 2 (GPT-NeoX)
- parallel, ``sandwich``:   as parallel ``pre`` with a post norm on each branch output
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig


@dataclass(frozen=True)
class Linear:
    """A matrix ``d_in -> d_out`` held ``copies`` times, of which a token uses ``active``."""

    key: str
    d_in: int
    d_out: int
    bias: bool
    copies: int = 1
    active: int = 1

    @property
    def params(self) -> int:
        return self.copies * (self.d_in * self.d_out + (self.d_out if self.bias else 0))

    @property
    def active_params(self) -> int:
        return self.active * (self.d_in * self.d_out + (self.d_out if self.bias else 0))


@dataclass(frozen=True)
class Norm:
    key: str
    size: int
    bias: bool

    @property
    def params(self) -> int:
        return self.size * (2 if self.bias else 1)


def _mlp(cfg: ModelConfig, keys: tuple[str, str, str], width: int, copies: int = 1,
         active: int = 1) -> list[Linear]:
    """up (and gate, for gated activations) d -> width, then down width -> d."""
    d, b = cfg.d_model, cfg.mlp_bias
    up, gate, down = keys
    mats = [Linear(up, d, width, b, copies, active)]
    if cfg.gated:
        mats.append(Linear(gate, d, width, b, copies, active))
    return mats + [Linear(down, width, d, b, copies, active)]


def attention_linears(cfg: ModelConfig) -> list[Linear]:
    d, qb = cfg.d_model, cfg.qkv_bias
    return [
        Linear("attention/q", d, cfg.q_width, qb),
        Linear("attention/k", d, cfg.kv_width, qb),
        Linear("attention/v", d, cfg.kv_width, qb),
        Linear("attention/o", cfg.q_width, d, cfg.out_bias),
    ]


def ffn_linears(cfg: ModelConfig) -> list[Linear]:
    """The feed-forward part: a dense MLP, or a router plus routed and shared experts."""
    moe = cfg.moe
    if moe is None:
        return _mlp(cfg, ("mlp/up", "mlp/gate", "mlp/down"), cfg.d_ff)
    mats = [Linear("moe/router", cfg.d_model, moe.num_experts, False)]
    mats += _mlp(cfg, ("moe/experts",) * 3, cfg.expert_width, moe.num_experts, moe.experts_per_token)
    if moe.shared_experts:
        mats += _mlp(cfg, ("moe/shared_experts",) * 3, cfg.expert_width,
                     moe.shared_experts, moe.shared_experts)
    return mats


def layer_linears(cfg: ModelConfig) -> list[Linear]:
    return attention_linears(cfg) + ffn_linears(cfg)


def layer_norms(cfg: ModelConfig) -> list[Norm]:
    d, b = cfg.d_model, cfg.norm_has_bias
    keys = ["norm/attention"]
    if not (cfg.parallel_block and cfg.parallel_norms == 1):
        keys.append("norm/mlp")
    if cfg.norm_placement == "sandwich":
        keys += ["norm/attention_post", "norm/mlp_post"]
    norms = [Norm(k, d, b) for k in keys]
    if cfg.qk_norm:
        norms += [Norm("attention/q_norm", cfg.head_size, b), Norm("attention/k_norm", cfg.head_size, b)]
    return norms
