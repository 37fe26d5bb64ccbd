"""A multimodal checkpoint's vision tower and projector, part by part (keys ``vision/...`` and
``projector/...``), and their config's schema (:class:`VisionConfig`, the ``vision:`` key).

Tower: the patch embedding (the patch convolution, whose stride is its kernel, is one linear
``channels * temporal_patch * patch_size^2 -> d`` over each patch), a learned class token (CLIP) and
learned positions (a row per patch, and one for the class token; 2-D RoPE holds none; Gemma 4's 2-D
table, ``position_table`` rows per axis), an optional norm before the first layer, ``n_layers`` encoder
layers (q, k, v, o, with per-head norms over q and k and a weightless one over v with ``qk_norm`` and
``v_norm``; the MLP as the language model's of the same activation; two norms, four ``sandwich``), an
optional final norm, Gemma 4's pooler (``pool``: a matmul with the averaging matrix, as transformers
runs it, then a scale) and its standardization (``standardize``, two vectors); Qwen3-VL's learned grid of
positions (``position_grid``), resampled to each image. Projector: an optional norm over the
tower's width, the outputs of ``features`` layers concatenated, the merge of ``merge x merge``
patches (concatenation; with ``merge_linear``, a linear back to the tower's width), then one linear
to the language model's width or two around an activation (three with ``hidden_linear``: Llama 4's
adapter, ``hidden -> hidden`` between them); and Qwen3-VL's DeepStack mergers (``deepstack``: per listed
layer, the projector's norm after the merge and its linears, whose features the language model adds to
its first layers at the image's tokens). Norms here are the tower's own kind
(SigLIP and CLIP: LayerNorm with bias; Qwen-VL and Pixtral: RMSNorm), the projector's as its
config says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ..errors import SpecError
from .keys import boolean, checked, choice, integer, mapping, optional, pattern
from .parts import Linear, Norm, Table, Vector
from .sizes import MAX_LAYERS
from .variants import ACTIVATIONS, NORMS, ROPE_COST, SCORE_SCALE_COST, SOFTMAX_COST, norm_cost

if TYPE_CHECKING:
    from .config import ModelConfig


# the tower's choices: not xIELU, whose learned scalars belong to the language model's dense MLPs; rope
# is 2-D (Qwen-VL, Pixtral); sandwich norms after attention and MLP too (Gemma 4)
VISION_ACTIVATIONS = tuple(a for a, r in ACTIVATIONS.items() if not r.scalars)
VISION_POSITIONS = ("learned", "rope")
VISION_NORM_PLACEMENTS = ("pre", "sandwich")


@dataclass(frozen=True)
class ProjectorConfig:
    """The multimodal projector, vision features -> the language model's width: an optional norm over
    the tower's width, ``merge x merge`` neighbouring patches concatenated (and, with ``merge_linear``,
    taken back to the tower's width by a linear: Mistral 3's patch merger), then one linear, or two
    around an activation when ``hidden`` gives the width between them. Its input is ``features`` layers'
    outputs concatenated (LLaVA and Mistral 3 may take several)."""

    norm: str = checked(choice(("none", *NORMS)), "none")  # rmsnorm: Gemma 3, Qwen-VL, Mistral 3
    features: int = checked(integer(), 1)  # the outputs of this many tower layers, concatenated (LLaVA's list)
    merge: int = checked(integer(), 1)  # Qwen-VL and Mistral 3: 2; Idefics3's pixel shuffle: its scale factor
    merge_linear: bool = checked(boolean, False)
    hidden: int | None = checked(optional(integer()), None)  # None: one linear
    bias: bool = checked(boolean, False)
    # a linear hidden -> hidden after the first's activation, followed by the activation again
    # (Llama 4's vision adapter, fc1 and fc2, before its projector); needs hidden
    hidden_linear: bool = checked(boolean, False)
    # Gemma 3: pool x pool patches averaged into one token, before the norm; 0: the checkpoint's pooling
    # cannot take the tower's patches (no image runs)
    pool: int = checked(integer(minimum=0), 1)
    class_token: bool = checked(boolean, False)  # the class token's features join the patches' (LLaVA's "full")
    # the tower's last layers whose output no feature reads (LLaVA's vision_feature_layer -2: 1): they
    # run forward (transformers runs them) but get no gradient
    unread_layers: int = checked(integer(minimum=0), 0)
    norm_weight: bool = checked(boolean, True)  # false: its norm has no weight (nor bias): Gemma 4's
    # Qwen3-VL's DeepStack: these tower layers' outputs each through a merger of their own (the projector's
    # norm after the merge, over its merged width, then its linears) into features the language model adds
    # to its first layers' hidden states at the image's tokens
    deepstack: tuple[int, ...] | None = checked(optional(pattern(integer(minimum=0, maximum=MAX_LAYERS))), None)


@dataclass(frozen=True)
class VisionConfig:
    """A vision tower (ViT: SigLIP, CLIP, Pixtral, the Qwen-VL towers) and its projector. Patches of
    ``patch_size`` (x ``temporal_patch`` frames) are embedded by one linear (the patch convolution,
    stride = kernel), then ``n_layers`` pre-norm encoder layers of full attention."""

    n_layers: int = checked(integer(maximum=MAX_LAYERS))
    d_model: int = checked(integer())
    n_heads: int = checked(integer())
    d_ff: int = checked(integer())
    patch_size: int = checked(integer())
    projector: ProjectorConfig = checked(mapping(ProjectorConfig))
    # the default resolution (square); learned positions have a row per patch of it. None: the
    # tower takes any resolution (Qwen-VL, Pixtral), with 2-D RoPE
    image_size: int | None = checked(optional(integer()), None)
    channels: int = checked(integer(), 3)
    temporal_patch: int = checked(integer(), 1)  # frames per patch (Qwen-VL's Conv3d: 2)
    activation: str = checked(choice(VISION_ACTIVATIONS), "gelu")
    norm: str = checked(choice(NORMS), "layernorm")
    norm_bias: bool = checked(boolean, True)  # layernorm only
    position: str = checked(choice(VISION_POSITIONS), "learned")  # rope (2-D: Qwen-VL, Pixtral) holds no parameters
    class_token: bool = checked(boolean, False)  # CLIP: a learned token before the patches (and its position)
    patch_bias: bool = checked(boolean, True)
    qkv_bias: bool = checked(boolean, True)
    out_bias: bool = checked(boolean, True)
    mlp_bias: bool = checked(boolean, True)
    pre_norm: bool = checked(boolean, False)  # a norm before the first layer (CLIP, Pixtral)
    final_norm: bool = checked(boolean, True)  # a norm after the last (SigLIP, CLIP)
    # Qwen2.5-VL: layers attend within square windows of `window` patches a side (a multiple of the
    # merge), but the `full_layers` (indices; None: none), which attend over the whole image
    window: int | None = checked(optional(integer()), None)
    full_layers: tuple[int, ...] | None = checked(optional(pattern(integer(minimum=0, maximum=MAX_LAYERS))), None)
    # Gemma 4's tower: a 2-D learned position table of this many rows per axis (a patch adds its column's and
    # its row's), beside 2-D RoPE
    position_table: int | None = checked(optional(integer()), None)
    # Qwen3-VL's tower: a learned square grid of this many rows, resampled (bilinear) to each image's patches,
    # beside 2-D RoPE
    position_grid: int | None = checked(optional(integer()), None)
    qk_norm: bool = checked(boolean, False)  # a norm per head over q and over k (the tower's kind, with weight)
    v_norm: bool = checked(boolean, False)  # a weightless norm per head over v
    norm_placement: str = checked(choice(VISION_NORM_PLACEMENTS), "pre")  # sandwich: norms after attention and MLP too
    # Gemma 4's pooler: pool x pool patches averaged by a matmul with the averaging matrix (as transformers
    # runs it; none for 1), then times sqrt(d_model): the tower's output tokens. None: no pooler
    pool: int | None = checked(optional(integer()), None)
    standardize: bool = checked(boolean, False)  # the pooler's learned bias and scale: (x - b) * s

    @property
    def patches(self) -> int:
        """Patches of one image at the default resolution (whole patches: the convolution drops a
        remainder)."""
        assert self.image_size is not None, "a tower without a default resolution"
        return (self.image_size // self.patch_size) ** 2


class Vision(NamedTuple):
    """The tower's parts before its layers, one layer's parts (the same in every layer), the parts after
    them (the final norm, the standardization's vectors), the projector's parts, and one DeepStack merger's
    (the same in each)."""

    config: VisionConfig
    stem: list[Linear | Norm | Table | Vector]
    layer: list[Linear | Norm]
    final: list[Norm | Vector]
    projector: list[Linear | Norm]
    deepstack: list[Linear | Norm]

    def parts(self) -> list[tuple[Linear | Norm | Table | Vector, int]]:
        """Every part, in order, with the number of copies the model holds (a layer's, one per layer)."""
        n, k = self.config.n_layers, len(self.config.projector.deepstack or ())
        return ([(p, 1) for p in self.stem] + [(p, n) for p in self.layer]
                + [(p, 1) for p in [*self.final, *self.projector]] + [(p, k) for p in self.deepstack])


def _norm(v: VisionConfig, key: str) -> Norm:
    """A norm of the tower over its width (a LayerNorm's bias unless ``norm_bias`` is false)."""
    return Norm(key, v.d_model, True, v.norm == "layernorm" and v.norm_bias)


def build_vision(cfg: ModelConfig) -> Vision:
    v = cfg.vision
    assert v is not None, "a model without a vision tower"
    d = v.d_model
    stem: list[Linear | Norm | Table | Vector] = [
        Linear("vision/patch", v.channels * v.temporal_patch * v.patch_size ** 2, d, v.patch_bias)]
    if v.class_token:
        stem.append(Vector("vision/class_token", d))
    if v.position == "learned":
        stem.append(Table("vision/position", v.patches + int(v.class_token), d))
    if v.position_table is not None:  # a row per column, then a row per row of patches
        stem.append(Table("vision/position", 2 * v.position_table, d))
    if v.position_grid is not None:
        stem.append(Table("vision/position", v.position_grid, d))
    if v.pre_norm:
        stem.append(_norm(v, "vision/norm/pre"))
    mlp = [Linear("vision/mlp/up", d, v.d_ff, v.mlp_bias), Linear("vision/mlp/down", v.d_ff, d, v.mlp_bias)]
    if ACTIVATIONS[v.activation].gated:
        mlp.insert(1, Linear("vision/mlp/gate", d, v.d_ff, v.mlp_bias))
    layer: list[Linear | Norm] = [
        Linear("vision/attention/q", d, d, v.qkv_bias), Linear("vision/attention/k", d, d, v.qkv_bias),
        Linear("vision/attention/v", d, d, v.qkv_bias), Linear("vision/attention/o", d, d, v.out_bias),
        *mlp, _norm(v, "vision/norm/attention"), _norm(v, "vision/norm/mlp")]
    if v.norm_placement == "sandwich":
        layer += [_norm(v, "vision/norm/attention_post"), _norm(v, "vision/norm/mlp_post")]
    head, bias = d // v.n_heads, v.norm == "layernorm" and v.norm_bias
    if v.qk_norm:
        layer += [Norm(f"vision/attention/{t}_norm", head, True, bias, v.n_heads) for t in "qk"]
    if v.v_norm:
        layer.append(Norm("vision/attention/v_norm", head, False, False, v.n_heads))
    p = v.projector
    projector: list[Linear | Norm] = [] if p.norm == "none" else [
        Norm("projector/norm", d, p.norm_weight, p.norm == "layernorm" and p.norm_weight)]
    width = d * p.features * p.merge ** 2
    if p.merge_linear:
        projector.append(Linear("projector/merge", width, d, False))
        width = d
    if p.hidden is not None:
        projector.append(Linear("projector/in", width, p.hidden, p.bias))
        width = p.hidden
    # Llama 4's vision adapter: a second linear, hidden -> hidden (after the first's activation)
    if p.hidden_linear and p.hidden is not None:
        projector.append(Linear("projector/hidden", p.hidden, p.hidden, p.bias))
    projector.append(Linear("projector/out", width, cfg.d_model, p.bias))
    final: list[Norm | Vector] = [_norm(v, "vision/norm/final")] if v.final_norm else []
    if v.standardize:  # its bias, then its scale
        final += [Vector("vision/standardize", d)] * 2
    merged = d * p.merge ** 2  # a DeepStack merger: the norm over the merged width, then the projector's linears
    deepstack: list[Linear | Norm] = [] if p.norm == "none" else [
        Norm("projector/deepstack/norm", merged, p.norm_weight, p.norm == "layernorm" and p.norm_weight)]
    if p.hidden is not None:
        deepstack.append(Linear("projector/deepstack/in", merged, p.hidden, p.bias))
    deepstack.append(Linear("projector/deepstack/out", merged if p.hidden is None else p.hidden, cfg.d_model, p.bias))
    return Vision(v, stem, layer, final, projector, deepstack if p.deepstack else [])


# --- images through the tower (``--images``): geometry and FLOPs -----------------------------------

class Image(NamedTuple):
    """One square image of ``size`` pixels through the tower: ``patches`` ((size / patch_size)^2),
    ``rows`` the tower runs over (the patches and the class token, if any), ``features`` rows the
    projector reads (the tower's pooled tokens, with ``pool``), ``tokens`` it gives the language model,
    ``windows`` the patches of each attention window of a windowed layer (empty without windows)."""

    size: int
    patches: int
    rows: int
    features: int
    tokens: int
    windows: tuple[int, ...]


def _windows(side: int, window: int, merge: int) -> tuple[int, ...]:
    """Qwen2.5-VL's windows over a ``side x side`` patch grid: ``window / merge`` merged patches a
    side, the last row and column of windows cut by the grid's edge (transformers'
    ``get_window_index``, whose padding windows hold no patch)."""
    step, grid = window // merge, side // merge
    edges = [min(step, grid - i) for i in range(0, grid, step)]
    return tuple(h * w * merge * merge for h in edges for w in edges)


def image(v: VisionConfig, size: int | None) -> Image:
    """The geometry of one image of ``size`` pixels (None: the tower's default); SpecError naming
    ``image_size`` when the tower cannot take it."""
    if size is None:
        if v.image_size is None:
            raise SpecError("image_size", "is needed: the tower has no default resolution (config key "
                                          "vision.image_size)")
        size = v.image_size
    p = v.projector
    if p.pool == 0:
        raise SpecError("images", "the projector's pooling cannot take the tower's patches (vision.projector.pool "
                                  "is 0): no image runs")
    if p.hidden_linear:  # its class token after the patches, pixel shuffle and 2-D RoPE: not counted yet
        raise SpecError("images", "Llama 4's vision adapter (vision.projector.hidden_linear) is not counted for "
                                  "images yet")
    if v.position == "learned" and size != v.image_size:
        raise SpecError("image_size", f"must be the tower's {v.image_size} pixels: its learned positions have a "
                                      f"row per patch of that size, got {size}")
    if p.unread_layers + p.features > v.n_layers:
        raise SpecError("images", f"the projector reads {p.features} layers before the last {p.unread_layers}: "
                                  f"the tower has {v.n_layers} (vision.projector.features, unread_layers)")
    pool = v.pool or 1
    # whole patches, pooled (the tower's, the projector's), then merged
    factors = [(k, n) for k, n in (("pool", pool), ("projector.pool", p.pool), ("merge", p.merge)) if n > 1]
    step = v.patch_size * math.prod(n for _, n in factors)
    if size % step:
        names = " x ".join(["patch_size", *(k for k, _ in factors)])
        values = " x ".join(str(n) for n in (v.patch_size, *(n for _, n in factors)))
        raise SpecError("image_size", f"must be a multiple of {names} ({values}), got {size}")
    side = size // v.patch_size
    if v.position_table is not None and side > v.position_table:
        raise SpecError("image_size", f"must be at most {v.position_table * v.patch_size} pixels: the tower's "
                                      f"positions have {v.position_table} rows a side, got {size}")
    patches = side * side
    features = patches // (pool * pool) + int(v.class_token and p.class_token)
    tokens = features // (p.pool * p.pool) // (p.merge * p.merge)
    windows = _windows(side, v.window, p.merge) if v.window is not None else ()
    return Image(size, patches, patches + int(v.class_token), features, tokens, windows)


def attended_pairs(v: VisionConfig, img: Image, layer: int) -> int:
    """Query-key pairs of one head of tower layer ``layer`` over one image (bidirectional): the
    whole image, or each window's."""
    if v.window is None or layer in (v.full_layers or ()):
        return img.rows * img.rows
    return sum(w * w for w in img.windows)


def _add(d: dict[str, int], key: str, n: int) -> None:
    if n:
        d[key] = d.get(key, 0) + n


def vision_forward(cfg: ModelConfig, size: int | None, images: int,
                   gradient: bool = False) -> tuple[dict[str, int], dict[str, int]]:
    """(matmul, elementwise) forward FLOPs of ``images`` images of ``size`` pixels through the tower
    and the projector, by key (``vision/...``, ``projector/...``); ``gradient``: only the layers a
    gradient reaches (not the ``unread_layers``), whose backward is twice this."""
    vision = build_vision(cfg)
    v, p = vision.config, vision.config.projector
    img = image(v, size)
    mm: dict[str, int] = {}
    ew: dict[str, int] = {}
    n, d = img.rows, v.d_model

    def linear(m: Linear, rows: int, times: int = 1) -> None:
        _add(mm, m.key, 2 * times * images * rows * m.d_in * m.d_out)
        if m.bias:
            _add(ew, m.key.split("/")[0] + "/bias", times * images * rows * m.d_out)

    def norm(m: Norm, rows: int, times: int = 1) -> None:
        _add(ew, m.key.split("/")[0] + "/norm", times * images * rows * m.rows * m.size * norm_cost(
            v.norm if m.key.startswith("vision/") else p.norm, m.weight, m.bias))

    for part in vision.stem:
        if isinstance(part, Linear):
            linear(part, img.patches)
        elif isinstance(part, Norm):
            norm(part, n)
    if v.position == "learned":
        _add(ew, "vision/position", images * n * d)
    if v.position_table is not None:  # a column's row plus a row's, added to the patch
        _add(ew, "vision/position", 2 * images * n * d)
    if v.position_grid is not None:  # four rows weighted and summed (7), added to the patch (1)
        _add(ew, "vision/position", 8 * images * n * d)
    L = v.n_layers - (p.unread_layers if gradient else 0)
    pairs = sum(attended_pairs(v, img, i) for i in range(L))
    _add(mm, "vision/attention/scores", 2 * images * pairs * d)  # every head: pairs x head size
    _add(mm, "vision/attention/values", 2 * images * pairs * d)
    _add(ew, "vision/attention/scale", images * v.n_heads * pairs * SCORE_SCALE_COST)
    _add(ew, "vision/attention/softmax", images * v.n_heads * pairs * SOFTMAX_COST)
    for part in vision.layer:
        if isinstance(part, Linear):
            linear(part, n, L)
        else:
            norm(part, n, L)
    if v.position == "rope":  # 2-D RoPE rotates every dimension of q and k
        _add(ew, "vision/rope", images * L * n * 2 * d * ROPE_COST)
    _add(ew, "vision/mlp/act", images * L * n * v.d_ff * ACTIVATIONS[v.activation].cost)
    _add(ew, "vision/residual", images * L * 2 * n * d)
    for part in vision.final:  # CLIP's post-LayerNorm normalizes the pooled class token alone
        if isinstance(part, Norm):
            norm(part, 1 if v.class_token else n)
    if v.pool is not None:  # the averaging matrix (pooled x patches) times the patches, then times sqrt(d)
        _add(mm, "vision/pool", 2 * images * img.features * img.patches * d if v.pool > 1 else 0)
        _add(ew, "vision/pool", images * img.features * d)
    if v.standardize:  # minus its bias, times its scale
        _add(ew, "vision/standardize", 2 * images * img.features * d)
    if p.pool > 1:  # an average of pool^2 values: pool^2 - 1 adds and a divide per output element
        _add(ew, "projector/pool", images * img.tokens * d * p.pool * p.pool)
    for part in vision.projector:  # its linears over the pooled, merged rows: the tokens
        if isinstance(part, Norm):
            norm(part, img.features // (p.pool * p.pool))  # Gemma 3 normalizes the pooled tokens
        else:
            linear(part, img.tokens)
    if p.hidden is not None:
        _add(ew, "projector/act", images * img.tokens * p.hidden * ACTIVATIONS["gelu"].cost)
    for _ in p.deepstack or ():  # each DeepStack merger over the image's tokens, its features added to them
        for part in vision.deepstack:
            if isinstance(part, Norm):
                norm(part, img.tokens)
            else:
                linear(part, img.tokens)
        if p.hidden is not None:
            _add(ew, "projector/deepstack", images * img.tokens * p.hidden * ACTIVATIONS["gelu"].cost)
        _add(ew, "projector/deepstack", images * img.tokens * cfg.d_model)
    return mm, ew
