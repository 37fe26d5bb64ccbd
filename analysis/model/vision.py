"""A multimodal checkpoint's vision tower and projector, part by part (keys ``vision/...`` and
``projector/...``; the config is :class:`~analysis.model.config.VisionConfig`).

Tower: the patch embedding (the patch convolution, whose stride is its kernel, is one linear
``channels * temporal_patch * patch_size^2 -> d`` over each patch), a learned class token (CLIP) and
learned positions (a row per patch, and one for the class token; 2-D RoPE holds none), an optional
norm before the first layer, ``n_layers`` encoder layers (q, k, v, o; the MLP as the language model's
of the same activation; two norms), an optional final norm. Projector: an optional norm over the
tower's width, the outputs of ``features`` layers concatenated, the merge of ``merge x merge``
patches (concatenation; with ``merge_linear``, a linear back to the tower's width), then one linear
to the language model's width or two around an activation (three with ``hidden_linear``: Llama 4's
adapter, ``hidden -> hidden`` between them). Norms here are the tower's own kind
(SigLIP and CLIP: LayerNorm with bias; Qwen-VL and Pixtral: RMSNorm), the projector's as its
config says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .parts import Linear, Norm, Table, Vector
from .variants import ACTIVATIONS

if TYPE_CHECKING:
    from .config import ModelConfig, VisionConfig


class Vision(NamedTuple):
    """The tower's parts before its layers, one layer's parts (the same in every layer), the final norm
    (if any), and the projector's parts."""

    config: VisionConfig
    stem: list[Linear | Norm | Table | Vector]
    layer: list[Linear | Norm]
    final: list[Norm]
    projector: list[Linear | Norm]

    def parts(self) -> list[tuple[Linear | Norm | Table | Vector, int]]:
        """Every part, in order, with the number of copies the model holds (a layer's, one per layer)."""
        n = self.config.n_layers
        return ([(p, 1) for p in self.stem] + [(p, n) for p in self.layer]
                + [(p, 1) for p in [*self.final, *self.projector]])


def _norm(v: VisionConfig, key: str) -> Norm:
    """A norm of the tower over its width (a LayerNorm's bias unless ``norm_bias`` is false)."""
    return Norm(key, v.d_model, True, v.norm == "layernorm" and v.norm_bias)


def build_vision(cfg: ModelConfig) -> Vision | None:
    v = cfg.vision
    if v is None:
        return None
    d = v.d_model
    stem: list[Linear | Norm | Table | Vector] = [
        Linear("vision/patch", v.channels * v.temporal_patch * v.patch_size ** 2, d, v.patch_bias)]
    if v.class_token:
        stem.append(Vector("vision/class_token", d))
    if v.position == "learned":
        stem.append(Table("vision/position", v.patches + int(v.class_token), d))
    if v.pre_norm:
        stem.append(_norm(v, "vision/norm/pre"))
    mlp = [Linear("vision/mlp/up", d, v.d_ff, v.mlp_bias), Linear("vision/mlp/down", v.d_ff, d, v.mlp_bias)]
    if ACTIVATIONS[v.activation].gated:
        mlp.insert(1, Linear("vision/mlp/gate", d, v.d_ff, v.mlp_bias))
    layer: list[Linear | Norm] = [
        Linear("vision/attention/q", d, d, v.qkv_bias), Linear("vision/attention/k", d, d, v.qkv_bias),
        Linear("vision/attention/v", d, d, v.qkv_bias), Linear("vision/attention/o", d, d, v.out_bias),
        *mlp, _norm(v, "vision/norm/attention"), _norm(v, "vision/norm/mlp")]
    p = v.projector
    projector: list[Linear | Norm] = [] if p.norm == "none" else [
        Norm("projector/norm", d, True, p.norm == "layernorm")]
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
    final = [_norm(v, "vision/norm/final")] if v.final_norm else []
    return Vision(v, stem, layer, final, projector)
