"""The reference vision tower and projector of a multimodal checkpoint, built from its
``VisionConfig`` alone. Module paths are the breakdown keys: ``vision.patch`` (the patch
convolution, whose stride is its kernel, as a linear over flattened patches), ``vision.class_token``,
``vision.position``, ``vision.norm.{pre,final}``, ``vision.layers.<i>.attention.{q,k,v,o}``,
``vision.layers.<i>.attention.{q,k,v}_norm``, ``vision.layers.<i>.mlp.{up,gate,down}``,
``vision.layers.<i>.norm.{attention,mlp,attention_post,mlp_post}``, ``vision.pool``,
``vision.standardize``, ``projector.{norm,merge,in,hidden,out}`` and ``projector.deepstack.{norm,in,out}``
(Qwen3-VL's DeepStack mergers, stacked).

The forward (:meth:`VisionTower.forward`, :meth:`Projector.forward`, :func:`image_features`) takes
pixels ``(images, channels * temporal_patch, size, size)`` to the language model's image tokens,
one image at a time as one sequence: patches (a reshape), the patch linear, the class token and
positions (Gemma 4's 2-D table: the column's row plus the row's), every layer (bidirectional eager
attention over the image's patches, or over each window of ``window`` patches a side on a windowed
layer; per-head q, k and v norms; 2-D RoPE over rows and columns; norms after attention and MLP too when
``sandwich``), the final norm (over the class token alone when there is one: CLIP's pooled output),
Gemma 4's pooling (``vision.pool``, the averaging matrix times the patches, times ``sqrt(d)``) and
standardization (``vision.standardize.{bias,scale}``), then the projector: the
features (the last ``features`` layers' outputs, concatenated; the class token dropped unless the
projector keeps it), its pooling, norm, merge of ``merge x merge`` neighbouring patches, linears.
The scores and values matmuls run in ``attention.scores`` and ``attention.values`` (modules without
parameters), so FlopCounterMode attributes them to ``vision/attention/{scores,values}``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import ModelConfig
from ..model.variants import ACTIVATIONS
from ..model.vision import VisionConfig
from .norms import LayerNorm, RMSNorm, _RMSNormFunction


def _norm(kind: str, size: int, bias: bool = True) -> nn.Module:
    return RMSNorm(size) if kind == "rmsnorm" else LayerNorm(size, bias=bias)


class VisionLayer(nn.Module):
    def __init__(self, v: VisionConfig):
        super().__init__()
        d = v.d_model
        self.attention = nn.Module()  # q, k, v, o, and the scores and values matmuls
        for p in "qkvo":
            self.attention.add_module(p, nn.Linear(d, d, bias=v.out_bias if p == "o" else v.qkv_bias))
        self.attention.add_module("scores", _Matmul())
        self.attention.add_module("values", _Matmul())
        head = d // v.n_heads
        if v.qk_norm:  # per head, the tower's norm with a weight
            self.attention.add_module("q_norm", _norm(v.norm, head, v.norm_bias))
            self.attention.add_module("k_norm", _norm(v.norm, head, v.norm_bias))
        if v.v_norm:  # per head, without weight
            self.attention.add_module("v_norm", RMSNorm(head, weight=False) if v.norm == "rmsnorm"
                                      else LayerNorm(head, weight=False, bias=False))
        self.heads, self.activation = v.n_heads, v.activation
        mlp = {"up": nn.Linear(d, v.d_ff, bias=v.mlp_bias), "down": nn.Linear(v.d_ff, d, bias=v.mlp_bias)}
        if ACTIVATIONS[v.activation].gated:
            mlp["gate"] = nn.Linear(d, v.d_ff, bias=v.mlp_bias)
        self.mlp = nn.ModuleDict(mlp)
        post = ("attention_post", "mlp_post") if v.norm_placement == "sandwich" else ()
        self.norm = nn.ModuleDict({k: _norm(v.norm, d, v.norm_bias) for k in ("attention", "mlp", *post)})

    def forward(self, x: torch.Tensor, groups: list[torch.Tensor] | None,
                rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        """``x``: (images, rows, d); ``groups``: the row indices of each attention window (None: the
        whole image); ``rope``: cos and sin per row and head dimension."""
        a, norm = self.attention.get_submodule, self.norm
        h = norm["attention"](x)
        n, rows, d = h.shape
        q, k, v = (a(p)(h).view(n, rows, self.heads, d // self.heads).transpose(1, 2) for p in "qkv")
        q, k, v = (a(f"{p}_norm")(t) if hasattr(self.attention, f"{p}_norm") else t for p, t in zip("qkv", (q, k, v)))
        if rope is not None:
            q, k = (t * rope[0] + _rotate(t) * rope[1] for t in (q, k))
        if groups is None:
            out = a("values")(torch.softmax(a("scores")(q * (q.shape[-1] ** -0.5), k.transpose(-1, -2)), -1), v)
        else:
            out = torch.empty_like(q)
            for idx in groups:
                qw, kw, vw = q[:, :, idx], k[:, :, idx], v[:, :, idx]
                probs = torch.softmax(a("scores")(qw * (qw.shape[-1] ** -0.5), kw.transpose(-1, -2)), -1)
                out[:, :, idx] = a("values")(probs, vw)
        y = a("o")(out.transpose(1, 2).reshape(n, rows, d))
        x = x + (norm["attention_post"](y) if "attention_post" in norm else y)
        h, m = norm["mlp"](x), self.mlp
        act = ACTIVATIONS[self.activation]
        base = {"geglu": "gelu", "swiglu": "silu", "reglu": "relu", "sqreglu": "sqrelu"}.get(act.name, act.name)
        f = {"gelu": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu, "relu": F.relu,
             "sqrelu": lambda t: F.relu(t).square()}[base]
        hidden = f(m["gate"](h)) * m["up"](h) if act.gated else f(m["up"](h))
        y = m["down"](hidden)
        return x + (norm["mlp_post"](y) if "mlp_post" in norm else y)


class _Matmul(nn.Module):
    """``a @ b``, in a module of its own: its FLOPs are attributed to its path."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def _rotate(t: torch.Tensor) -> torch.Tensor:
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), -1)


def _windows(side: int, window: int) -> list[torch.Tensor]:
    """The patch indices of each ``window x window`` square of a ``side x side`` grid (row-major),
    the squares at the right and bottom edges cut by the grid."""
    rows = torch.arange(side).repeat_interleave(side) // window
    cols = torch.arange(side).repeat(side) // window
    cell = rows * (-(-side // window)) + cols
    return [torch.nonzero(cell == c).flatten() for c in torch.unique(cell)]


class VisionTower(nn.Module):
    def __init__(self, v: VisionConfig):
        super().__init__()
        d = v.d_model
        self.patch = nn.Linear(v.channels * v.temporal_patch * v.patch_size ** 2, d, bias=v.patch_bias)
        if v.class_token:
            self.class_token = nn.Parameter(torch.zeros(d))
        if v.position == "learned":
            side = (v.image_size or 0) // v.patch_size
            self.position = nn.Embedding(side * side + int(v.class_token), d)
        if v.position_table is not None:  # a row per column, then a row per row of patches
            self.position = nn.Embedding(2 * v.position_table, d)
        if v.position_grid is not None:  # a square grid, resampled to each image
            self.position = nn.Embedding(v.position_grid, d)
        if v.pool is not None and v.pool > 1:  # the averaging matrix times the patches, in a module of its own
            self.pool = _Matmul()
        if v.standardize:
            self.standardize = nn.Module()
            self.standardize.bias = nn.Parameter(torch.zeros(d))
            self.standardize.scale = nn.Parameter(torch.ones(d))
        self.norm = nn.ModuleDict({k: _norm(v.norm, d, v.norm_bias)
                                   for k, on in (("pre", v.pre_norm), ("final", v.final_norm)) if on})
        self.layers = nn.ModuleList(VisionLayer(v) for _ in range(v.n_layers))
        self.v = v

    def _resampled(self, side: int, device) -> torch.Tensor:
        """Qwen3-VL's positions of a ``side x side`` image: four rows of the grid, weighted and summed."""
        rows, weights = _bilinear(side, math.isqrt(self.v.position_grid), device)
        return (self.position(rows) * weights[..., None].to(self.position.weight.dtype)).sum(0)

    def forward(self, pixels: torch.Tensor) -> list[torch.Tensor]:
        """Pixels ``(images, channels * temporal_patch, size, size)`` -> the hidden states after the
        each layer, the last through the final norm (with a class token, the final norm takes it alone:
        CLIP's pooled output, which the projector does not read)."""
        v, p = self.v, self.v.patch_size
        n, c, size, _ = pixels.shape
        side = size // p
        patches = pixels[:, :, :side * p, :side * p].reshape(n, c, side, p, side, p)
        x = self.patch(patches.permute(0, 2, 4, 1, 3, 5).reshape(n, side * side, c * p * p))
        if v.class_token:
            x = torch.cat([self.class_token.expand(n, 1, -1), x], 1)
        if v.position == "learned":
            x = x + self.position.weight
        if v.position_table is not None:  # the patch's column's row plus its row's (a class token: none)
            cols = torch.arange(side, device=x.device).repeat(side)
            rows = torch.arange(side, device=x.device).repeat_interleave(side) + v.position_table
            table = self.position(cols) + self.position(rows)
            x = x + (torch.cat([table.new_zeros(1, v.d_model), table]) if v.class_token else table)
        if v.position_grid is not None:
            table = self._resampled(side, x.device)
            x = x + (torch.cat([table.new_zeros(1, v.d_model), table]) if v.class_token else table)
        rope = _rope(side, v.d_model // v.n_heads, x.device, v.class_token) if v.position == "rope" else None
        if "pre" in self.norm:
            x = self.norm["pre"](x)
        cells = None if v.window is None else _windows(side, v.window)
        full = set(v.full_layers or ())
        states = []
        for i, layer in enumerate(self.layers):
            x = layer(x, None if cells is None or i in full else cells, rope)
            states.append(x)
        if "final" in self.norm and v.class_token:  # CLIP's pooled output, which no projector reads
            self.pooled = self.norm["final"](x[:, :1])
        elif "final" in self.norm:
            states[-1] = self.norm["final"](x)
        if v.pool is not None:  # Gemma 4's pooler: the pooled tokens, times sqrt(d), standardized
            k, d = v.pool, v.d_model
            if k > 1:
                cell = (torch.arange(side, device=x.device).repeat_interleave(side) // k * (side // k)
                        + torch.arange(side, device=x.device).repeat(side) // k)  # each patch's pooled token
                average = (cell == torch.arange((side // k) ** 2, device=x.device)[:, None]).to(x.dtype) / (k * k)
                states[-1] = self.pool(average, states[-1])
            states[-1] = states[-1] * d ** 0.5
        if v.standardize:
            states[-1] = (states[-1] - self.standardize.bias) * self.standardize.scale
        return states


def _bilinear(side: int, grid: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The grid rows (4, side^2) and weights (4, side^2) of a ``side x side`` image's patches, resampled
    bilinearly from a ``grid x grid`` table (corners aligned), row-major."""
    t = torch.linspace(0, grid - 1, side, device=device)
    lo = t.floor().long().clamp(max=grid - 1)
    hi, w = (lo + 1).clamp(max=grid - 1), t - lo
    r_lo, r_hi, wr = (a.repeat_interleave(side) for a in (lo, hi, w))
    c_lo, c_hi, wc = (a.repeat(side) for a in (lo, hi, w))
    rows = torch.stack([r_lo * grid + c_lo, r_lo * grid + c_hi, r_hi * grid + c_lo, r_hi * grid + c_hi])
    weights = torch.stack([(1 - wr) * (1 - wc), (1 - wr) * wc, wr * (1 - wc), wr * wc])
    return rows, weights


def _rope(side: int, head: int, device, class_token: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """2-D RoPE: the first half of each head's dimensions rotated by the patch's row, the second by
    its column; (rows, head) tables whatever the head size (dimensions past the last whole quarter, or
    of a head under 4, turn by the first frequencies again); a class token first, not turned."""
    quarter = max(head // 4, 1)
    freq = 1.0 / (10000 ** (torch.arange(quarter, device=device) / quarter))
    rows = torch.arange(side, device=device).repeat_interleave(side)[:, None] * freq
    cols = torch.arange(side, device=device).repeat(side)[:, None] * freq
    angles = torch.cat([rows, cols], -1)
    angles = torch.cat([angles] * (head // angles.shape[-1] + 1), -1)[:, :head]
    if class_token:
        angles = torch.cat([angles.new_zeros(1, head), angles])
    return angles.cos(), angles.sin()


class Projector(nn.Module):
    """Tower width -> ``d_model``: norm, merged patches (their concatenation, or a linear back to the
    tower's width), then one linear or two."""

    def __init__(self, v: VisionConfig, d_model: int):
        super().__init__()
        p, d = v.projector, v.d_model
        if p.norm != "none":
            self.norm = _norm(p.norm, d) if p.norm_weight else (
                RMSNorm(d, weight=False) if p.norm == "rmsnorm" else LayerNorm(d, weight=False, bias=False))
            self.norm_width = d  # each feature layer's slice normed alone
        width = d * p.features * p.merge * p.merge
        if p.merge_linear:
            self.merge = nn.Linear(width, d, bias=False)
            width = d
        if p.hidden is not None:
            self.add_module("in", nn.Linear(width, p.hidden, bias=p.bias))
            width = p.hidden
        if p.hidden_linear and p.hidden is not None:  # Llama 4's vision adapter: hidden -> hidden
            self.hidden = nn.Linear(p.hidden, p.hidden, bias=p.bias)
        self.out = nn.Linear(width, d_model, bias=p.bias)
        self.p, self.class_token = p, v.class_token
        if p.deepstack:  # its mergers: the norm over the merged width, the linears
            k, merged = len(p.deepstack), d * p.merge * p.merge
            self.deepstack = nn.Module()
            if p.norm != "none":
                self.deepstack.norm = _Stacked(k, merged, merged, p.norm == "layernorm" and p.norm_weight, p.norm,
                                               p.norm_weight)
            if p.hidden is not None:
                self.deepstack.add_module("in", _Stacked(k, merged, p.hidden, p.bias))
            self.deepstack.out = _Stacked(k, merged if p.hidden is None else p.hidden, d_model, p.bias)

    def forward(self, states: list[torch.Tensor]) -> torch.Tensor:
        """The tower's hidden states -> the language model's image tokens, (images, tokens, d_model)."""
        p = self.p
        last = len(states) - p.unread_layers  # the layers after it run, but no gradient reaches them
        x = torch.cat(states[last - p.features:last], -1)
        if self.class_token and not p.class_token:
            x = x[:, 1:]
        n, rows, width = x.shape
        side = int(round(rows ** 0.5))
        if p.pool > 1:  # an average over pool x pool patches (no matmul)
            grid = x.transpose(1, 2).reshape(n, width, side, side)
            x = F.avg_pool2d(grid, p.pool).flatten(2).transpose(1, 2)
            side //= p.pool
        if hasattr(self, "norm"):
            x = torch.cat([self.norm(x[..., i:i + self.norm_width]) for i in range(0, width, self.norm_width)], -1)
        m = p.merge
        x = _merge(x, side, m)
        if p.merge_linear:
            x = self.merge(x)
        if p.hidden is not None:
            x = F.gelu(getattr(self, "in")(x), approximate="tanh")
        x = self.out(x)
        for i, layer in enumerate(p.deepstack or ()):  # DeepStack: each listed layer's merger
            h, ds = _merge(states[layer], side, m), self.deepstack
            if hasattr(ds, "norm"):
                h = ds.norm(h, i)
            if p.hidden is not None:
                h = F.gelu(getattr(ds, "in")(h, i), approximate="tanh")
            x = x + ds.out(h, i)  # the language model adds it at the image's tokens: here, to them
        return x


def _merge(x: torch.Tensor, side: int, m: int) -> torch.Tensor:
    """``m x m`` neighbouring patches of a ``side x side`` grid side by side: (n, side^2 / m^2, m^2 * width)."""
    if m == 1:
        return x
    n, _, width = x.shape
    x = x.reshape(n, side // m, m, side // m, m, width).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(n, (side // m) ** 2, m * m * width)


class _Stacked(nn.Module):
    """``k`` linears (``norm``: norms of the projector's kind) of one shape, stacked; ``forward(x, i)`` runs
    the ``i``-th (Qwen3-VL's DeepStack mergers, one key for all of them)."""

    def __init__(self, k: int, d_in: int, d_out: int, bias: bool, norm: str | None = None, weight: bool = True):
        super().__init__()
        self.norm = norm
        shape = (k, d_out) if norm is not None else (k, d_out, d_in)
        self.weight = nn.Parameter(torch.ones(shape)) if weight else None
        self.bias = nn.Parameter(torch.zeros(k, d_out)) if bias else None

    def forward(self, x: torch.Tensor, i: int) -> torch.Tensor:
        w = None if self.weight is None else self.weight[i]
        b = None if self.bias is None else self.bias[i]
        if self.norm == "rmsnorm":
            return _RMSNormFunction.apply(x, w, 1e-5)
        if self.norm == "layernorm":
            return F.layer_norm(x, x.shape[-1:], w, b)
        return F.linear(x, w, b)


def image_features(model: nn.Module, pixels: torch.Tensor) -> torch.Tensor:
    """A model's ``vision`` then ``projector`` over ``pixels``: the image tokens."""
    return model.projector(model.vision(pixels))


def add_vision(model: nn.Module, cfg: ModelConfig) -> None:
    """``model.vision`` and ``model.projector``, when ``cfg`` has a vision tower."""
    if cfg.vision is not None:
        model.vision = VisionTower(cfg.vision)
        model.projector = Projector(cfg.vision, cfg.d_model)
