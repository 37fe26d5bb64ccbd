"""Measure the reference model: parameters, FLOPs, saved activations, KV-cache bytes.

Every function runs on the ``meta`` device (shapes only) for any model size, and on real
tensors. Results are keyed by breakdown component (:func:`component_key`); ops run outside
any submodule go to ``model`` (``layer`` for a block's own residual adds), the loss to ``loss``.

Attribution is to the *innermost* module: in the forward by a stack of module hooks; in the
backward by the autograd node that is executing, mapped to the module that was innermost
when the forward created it (autograd sequence numbers increase monotonically, so the
module hooks' sequence numbers delimit which nodes each module created).

FLOPs follow ``torch.utils.flop_counter.FlopCounterMode``. In torch 2.13 it has no formula
for the CPU flash kernel ``aten._scaled_dot_product_flash_attention_for_cpu`` (nor for its
backward), so it counts 0 for SDPA on the cpu device; on meta ``F.scaled_dot_product_attention``
would take the math path and count its bmm's. The reference model calls the CPU flash kernel
on both devices, and we register for it the formulas FlopCounterMode applies to the CUDA
flash kernels (``sdpa_flop_count``, ``sdpa_backward_flop_count``): forward the two matmuls,
``2*B*h*S*S_kv*(d_qk + d_v)``; backward the score recomputation plus four gradient matmuls,
``2*B*h*S*S_kv*(3*d_qk + 2*d_v)`` = 2.5x forward when ``d_qk = d_v``, what a flash kernel
executes. ``attention/sdpa`` holds both matmul families in one op; it is reported as
``attention/scores`` (the matmuls over the score head size ``d_qk``: q k^T, its
recomputation, dQ, dK) and ``attention/values`` (over ``d_v``: P V, dV, dP), split from the
kernel's argument shapes (the aten kernel's and :func:`~analysis.verify.attention.reference_flash`'s,
one op each), or, in the latter's backward, by the family it labels each of its matmuls with.
"""

from __future__ import annotations

import bisect
import contextlib
from collections import defaultdict
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count, sdpa_backward_flop_count, sdpa_flop_count

from ..model.config import ModelConfig
from .attention import current_family
from .cache import KVCache, cache_bytes
from .model import Transformer

_aten = torch.ops.aten


def _cpu_flash_flop(q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(q_shape, k_shape, v_shape)


def _cpu_flash_backward_flop(grad_shape, q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_shape, q_shape, k_shape, v_shape)


def _conv_backward_flop(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                        _output_padding, groups, output_mask, out_shape=None, **kwargs) -> int:
    """FlopCounterMode's convolution backward with its weight gradient divided by ``groups``: torch 2.13's
    formula ignores groups there, counting a depthwise conv's (Mamba's conv1d) weight gradient E times
    (each gradient is then what the forward costs, ``2*B*L_out*K*C_out*C_in/groups``)."""
    def t(shape):
        return [shape[1], shape[0], *shape[2:]]

    n = 0
    if output_mask[0]:
        n += conv_flop_count(grad_out_shape, w_shape, out_shape[0], not transposed)
    if output_mask[1]:
        pair = (t(grad_out_shape), t(x_shape)) if transposed else (t(x_shape), t(grad_out_shape))
        n += conv_flop_count(*pair, t(out_shape[1])) // groups
    return n


# the formulas FlopCounterMode uses for the CUDA flash kernels, for the CPU one; a grouped conv's backward
CPU_SDPA_FLOPS = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flop,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward_flop,
    _aten.convolution_backward: _conv_backward_flop,
}


def _flash_split(func_packet, args) -> dict[str, int] | None:
    """A CPU flash kernel's (or :func:`~analysis.verify.attention.reference_flash`'s) call's FLOPs as
    ``scores`` and ``values``, from q, k, v's shapes (B, h, S, d_qk), (B, g, S_kv, d_qk), (B, g, S_kv, d_v);
    None for any other op."""
    if func_packet in (_aten._scaled_dot_product_flash_attention_for_cpu, torch.ops.llmcalc.reference_flash):
        q, k, v = args[:3]
        factors = (1, 1)  # q k^T; P V
    elif func_packet is _aten._scaled_dot_product_flash_attention_for_cpu_backward:
        q, k, v = args[1:4]
        factors = (3, 2)  # recomputed q k^T, dQ, dK; dV, dP
    else:
        return None
    B, h, S, d_qk = q.shape
    pairs = 2 * B * h * S * k.shape[-2]
    return {"scores": factors[0] * pairs * d_qk, "values": factors[1] * pairs * v.shape[-1]}


def build(cfg: ModelConfig, attention: str = "eager", device="meta", dtype=torch.float32,
          routing: str = "auto", recompute: str = "none") -> Transformer:
    """The reference model on ``device`` (meta: no memory) in ``dtype``."""
    with torch.device(device):
        model = Transformer(cfg, attention, routing, recompute)
    return model.to(dtype)


def component_key(path: str) -> str:
    """``layers.3.attention.q`` -> ``attention/q``; ``norm.final`` -> ``norm/final``;
    ``vision.layers.3.mlp.up`` -> ``vision/mlp/up``."""
    parts = path.split(".") if path else []
    if parts[:1] == ["layers"]:
        parts = parts[2:] or ["layer"]
    elif parts[:2] == ["vision", "layers"]:
        parts = ["vision", *parts[3:]] if len(parts) > 3 else ["vision", "layer"]
    return "/".join(parts) or "model"


class ModuleScope:
    """Which module path is innermost now, in the forward and (after it) in the backward.
    Use as a context manager around the forward; ``current()`` stays valid for the backward.
    ``key`` turns a module path into a component (llmcalc's names by default)."""

    def __init__(self, model: torch.nn.Module, key: Callable[[str], str] = component_key):
        self.model, self.key = model, key
        self.stack: list[str] = []
        self.seqs: list[int] = []  # autograd sequence number at each hook event
        self.names: list[str] = []  # innermost module from that event on
        self.handles = []

    def _event(self):
        self.seqs.append(torch._C._autograd._get_sequence_nr())
        self.names.append(self.stack[-1] if self.stack else "")

    def __enter__(self):
        for name, module in self.model.named_modules():
            def pre(mod, args, name=name):
                self.stack.append(name)
                self._event()

            def post(mod, args, out):
                self.stack.pop()
                self._event()

            self.handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()

    def current(self) -> str:
        """Component of the running op; ``loss`` for anything after the model returned."""
        if torch._C._current_graph_task_id() == -1:  # forward
            return self.key(self.stack[-1]) if self.stack else "loss"
        node = torch._C._current_autograd_node()
        if node is None:  # the engine seeding the loss gradient
            return "loss"
        i = bisect.bisect_right(self.seqs, node._sequence_nr()) - 1
        if i == len(self.seqs) - 1:  # created after the model returned (or AccumulateGrad)
            return "loss"
        return self.key(self.names[i]) if i >= 0 else "model"


class _Counter(FlopCounterMode):
    """FlopCounterMode keyed by innermost component instead of every enclosing module."""

    def __init__(self, scope: ModuleScope):
        super().__init__(display=False, custom_mapping=CPU_SDPA_FLOPS)
        # FlopCounterMode tracks the enclosing modules of every op for its own per-module table;
        # attribution here is ``scope``'s, so the tracker (module hooks and a Python object on
        # every autograd node) would only cost time: about half the forward under counting.
        self.mod_tracker = contextlib.nullcontext()
        self.scope = scope
        self.by_key: dict[str, int] = defaultdict(int)

    def _count_flops(self, func_packet, out, args, kwargs):  # overrides the private hook
        if func_packet in self.flop_registry:
            flops = self.flop_registry[func_packet](*args, **kwargs, out_val=out)
            key = self.scope.current()
            if key == "attention/sdpa":  # one fused op or Function: both matmul families
                split = _flash_split(func_packet, args)
                if split is None:
                    family = current_family()
                    if family is None:
                        raise RuntimeError(f"unlabelled matmul {func_packet} inside attention/sdpa")
                    split = {family: flops}
                if sum(split.values()) != flops:
                    raise RuntimeError(f"{func_packet}: split {split} does not sum to {flops}")
                for family, n in split.items():
                    self.by_key["attention/" + family] += n
            else:
                self.by_key[key] += flops
        return out

    def result(self) -> dict[str, int]:
        return {k: v for k, v in self.by_key.items() if v}


def measure_params(model: torch.nn.Module, trainable: bool = False) -> dict[str, int]:
    """Unique parameters' numel per component (tied parameters once, under their first name);
    ``trainable``: those that require grad only. A parameter belongs to its module
    (``attention.q.weight`` -> ``attention/q``), unless that module has submodules: then it is a
    component of its own (``attention.sinks``)."""
    counts: dict[str, int] = defaultdict(int)
    for name, p in model.named_parameters():
        if trainable and not p.requires_grad:
            continue
        owner = name.rpartition(".")[0]
        leaf = not any(True for _ in model.get_submodule(owner).children())
        counts[component_key(owner if leaf else name)] += p.numel()
    return {k: v for k, v in counts.items() if v}


def training_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The cross-entropy of next-token logits against the tokens (the reference's training loss), in
    fp32 whatever the compute dtype, as transformers' ``ForCausalLMLoss``, torchtitan and Megatron-LM
    compute it: the log-softmax it saves is fp32. float64 logits (the real-tensor checks) stay float64."""
    targets = tokens[:, -logits.shape[1]:]  # shapes only matter for counting
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def measure_flops(model: Transformer, tokens: torch.Tensor, logits: str = "all"):
    """(forward, backward) FLOPs per component; the backward of the cross-entropy loss on
    ``logits``. Only ops FlopCounterMode has a formula for count (matmuls, SDPA)."""
    fwd, bwd, _ = measure_training(model, tokens, logits)
    return fwd, bwd


def measure_training(model: Transformer, tokens: torch.Tensor, logits: str = "all"):
    """(forward FLOPs, backward FLOPs, saved bytes) of one training step, in one pass: the FLOPs
    as :func:`measure_flops` counts them, the bytes as :func:`measure_saved_bytes` does."""
    with ModuleScope(model) as scope:
        with _Counter(scope) as fwd, _Saved(model, scope) as saved:
            loss = training_loss(model(tokens, logits=logits), tokens)
            saved.keep_outputs(model)
    with _Counter(scope) as bwd:
        loss.backward()
    return fwd.result(), bwd.result(), saved.result()


@torch.no_grad()
def measure_inference_flops(model: Transformer, batch: int, prefill: int) -> tuple[dict, dict]:
    """(prefill, decode) forward FLOPs per component: a prefill of ``prefill`` tokens into a
    KV cache (logits of the last position), then one decode step at position ``prefill``."""
    device = next(model.parameters()).device
    cache = KVCache(model.cfg, batch, prefill + 1, next(model.parameters()).dtype, device)
    counts = []
    for tokens, start in ((prefill, 0), (1, prefill)):
        with ModuleScope(model) as scope, _Counter(scope) as counter:
            model(torch.zeros(batch, tokens, dtype=torch.long, device=device), cache, start, logits="last")
        counts.append(counter.result())
    return counts[0], counts[1]


def _storage_id(t: torch.Tensor) -> int:
    """Identity of the storage behind a tensor, shared by all its views; on meta too."""
    return t.untyped_storage()._cdata


class _Saved:
    """Bytes autograd saves for backward while it is entered, per component of ``scope``: each
    storage once, under the component that saved it first; parameters and buffers excluded."""

    def __init__(self, model: torch.nn.Module, scope: ModuleScope):
        self.scope = scope
        self.excluded = {_storage_id(t) for t in [*model.parameters(), *model.buffers()]}
        self.seen: dict[int, torch.Tensor] = {}  # keeps storages alive, so ids are not reused
        self.counts: dict[str, int] = defaultdict(int)
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t):
        self.keep(self.scope.current(), t)
        return t

    def keep(self, key: str, t: torch.Tensor) -> None:
        """Counts ``t``'s storage under ``key``, unless counted already or a parameter's."""
        sid = _storage_id(t)
        if sid not in self.excluded and sid not in self.seen:
            self.seen[sid] = t
            self.counts[key] += t.untyped_storage().nbytes()

    def keep_outputs(self, model: Transformer) -> None:
        """What per-op checkpointing kept (the policy's cache, which the hooks never see)."""
        for key, t in model.kept():
            self.keep(key, t)

    def __enter__(self):
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self.hooks.__exit__(*exc)

    def result(self) -> dict[str, int]:
        out = {k: v for k, v in self.counts.items() if v}
        out["total"] = sum(out.values())
        return out


def measure_saved_bytes(model: Transformer, tokens: torch.Tensor, logits: str = "all") -> dict[str, int]:
    """Bytes autograd saves for backward during forward and loss, per component, plus
    ``total``. Each storage counts once, under the component that saved it first;
    parameters and buffers are excluded (they are not activations).

    With ``recompute`` the non-reentrant checkpoint installs its own saved-tensor hooks
    inside each block, which replace every save there by a placeholder that keeps nothing
    (so this hook never sees them); the checkpoint saves its tensor arguments through the
    enclosing hooks, so exactly what it keeps until backward is counted, under ``layer``. Under
    per-op checkpointing the outputs its policy keeps are counted too, each under its component."""
    with ModuleScope(model) as scope, _Saved(model, scope) as saved:
        training_loss(model(tokens, logits=logits), tokens)
        saved.keep_outputs(model)
    return saved.result()


@torch.no_grad()
def measure_kv_bytes(model: Transformer, batch: int, prefill: int, decode: int,
                     dtype: torch.dtype | None = None) -> int:
    """Bytes of the KV-cache tensors after a prefill of ``prefill`` tokens and ``decode``
    single-token steps (cache sized for ``prefill + decode`` tokens)."""
    device = next(model.parameters()).device
    dtype = dtype or next(model.parameters()).dtype
    cache = KVCache(model.cfg, batch, prefill + decode, dtype, device)
    model(torch.zeros(batch, prefill, dtype=torch.long, device=device), cache, 0, logits="last")
    for step in range(decode):
        model(torch.zeros(batch, 1, dtype=torch.long, device=device), cache, prefill + step, logits="last")
    return cache_bytes(cache)
