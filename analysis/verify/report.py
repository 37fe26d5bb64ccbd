"""`llmcalc verify`: analytic figures against what the reference modules measure.

Each check is ``(name, analytic, measured, ok)``. On the ``meta`` device (shapes only, any
model size) it checks parameters, forward and backward matmul FLOPs per component for eager
and flash attention, the bytes saved for backward (eager and flash, with and without full
recomputation) and KV-cache bytes after prefill and decode (below and past every window).
On ``cpu`` it also runs the real-tensor checks of :mod:`analysis.verify.checks` on a small
copy of the model.

MoE routing is data dependent and the meta device has no data: tokens are dealt to the
experts evenly instead (``Experts`` in :mod:`analysis.verify.ffn`). Expert FLOPs depend
only on how many token-slots there are, ``T * experts_per_token``, when no token is
dropped, so the count is the one any routing gives.
"""

from __future__ import annotations

import gc
import multiprocessing
import signal
import threading
from multiprocessing import resource_tracker
from typing import Any, Callable, Iterator, TypeVar

import torch

from ..cluster.memory import memory
from ..count.activations import activation_bytes
from ..count.flops import count_flops
from ..count.kvcache import kv_cache
from ..count.lora import adapter_params
from ..count.params import count_params
from ..errors import ConfigError
from ..model.config import ModelConfig
from ..model.layers import layer_specs
from ..perf.hardware import Hardware
from ..spec import LoRA, RunSpec, recompute_refusal
from . import checks
from .check import Check
from .lora import add_lora
from .measure import (
    build,
    measure_inference_flops,
    measure_kv_bytes,
    measure_params,
    measure_training,
    training_loss,
)
from .meta_kernels import cpp_meta, use_cpp_meta

ATTENTION_KEYS = ("attention/scores", "attention/values")
TORCH_BYTES = 2**63 - 1  # torch sizes tensors and storages in int64 bytes, on meta too
STACK_BYTES = 2**30  # of the thread the checks run on: address space, committed only as used

T = TypeVar("T")


def _compare(prefix: str, analytic: dict[str, int], measured: dict[str, int]) -> list[Check]:
    keys = list(dict.fromkeys([*analytic, *measured]))
    out = [Check(f"{prefix}/{k}", analytic.get(k, 0), measured.get(k, 0),
                 analytic.get(k, 0) == measured.get(k, 0)) for k in keys]
    a, m = sum(analytic.values()), sum(measured.values())
    return out + [Check(f"{prefix}/total", a, m, a == m)]


def _merge_attention(d: dict[str, int]) -> dict[str, int]:
    """scores + values as one entry: a fused SDPA kernel reports them together."""
    out = {k: v for k, v in d.items() if k not in ATTENTION_KEYS}
    out["attention/scores+values"] = sum(d.get(k, 0) for k in ATTENTION_KEYS)
    return out


def param_checks(cfg: ModelConfig) -> list[Check]:
    return _compare("params", count_params(cfg).components, measure_params(build(cfg)))


# check-name suffix of each recomputation (full keeps its historical name)
RECOMPUTE_TAG = {"none": "", "selective": "/selective", "op": "/op", "full": "/recompute"}


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def training_checks(cfg: ModelConfig, seq: int, batch: int, attention: str, recompute: str,
                    device: str, lora: LoRA | None = None, dtype: str = "bf16") -> list[Check]:
    """One training step of the model in ``dtype``, measured once: forward and backward matmul FLOPs
    per component (with recomputation the backward's total only: the recomputed forward runs inside
    the backward, where per-module attribution is not meaningful) and the bytes saved for
    backward per component (see analysis.count.activations); ``lora``: with adapters on a frozen base."""
    model = build(cfg, attention, device, DTYPES[dtype], recompute=recompute)
    if lora is not None:
        add_lora(model, lora.targets, lora.rank, lora.alpha)
    fwd, bwd, saved = measure_training(model, torch.zeros(batch, seq, dtype=torch.long, device=device))
    saved.pop("total")
    run = RunSpec("train", seq, batch, attention, recompute=recompute, dtype=dtype, lora=lora)
    flops = count_flops(cfg, run)
    tag = f"{attention}{RECOMPUTE_TAG[recompute]}"
    prefix = "lora/" if lora else ""  # every check's name
    if recompute == "none":
        a_fwd, a_bwd = flops.forward.matmul, flops.backward.matmul
        if attention == "flash":  # the fused kernel's backward is one op: compare its total
            a_bwd, bwd = _merge_attention(a_bwd), _merge_attention(bwd)
        out = (_compare(f"{prefix}flops/{tag}/forward", a_fwd, fwd)
               + _compare(f"{prefix}flops/{tag}/backward", a_bwd, bwd))
    else:
        analytic, measured = flops.backward.matmul_total, sum(bwd.values())
        out = [Check(f"{prefix}flops/{tag}/backward/total", analytic, measured, analytic == measured)]
    return out + _compare(f"{prefix}activations/{tag}", activation_bytes(cfg, run).components, saved)


def lora_checks(cfg: ModelConfig, seq: int, batch: int, lora: LoRA) -> list[Check]:
    """LoRA on meta (analysis.verify.lora): the trainable parameters by component; a training
    step with eager and flash attention and each recomputation; and, in fp32, the weights, the
    adapters' gradients and their Adam state after one step."""
    meta = "meta"
    adapters = {k + "/lora": n for k, n in adapter_params(cfg, lora).items()}
    model = build(cfg, "flash", meta, torch.float32)
    add_lora(model, lora.targets, lora.rank, lora.alpha)
    out = _compare("lora/params", adapters, measure_params(model, trainable=True))
    for attention in ("eager", "flash"):
        for recompute in recomputations(attention, cfg, lora):
            out += training_checks(cfg, seq, batch, attention, recompute, meta, lora)
    tokens = torch.zeros(batch, seq, dtype=torch.long, device=meta)
    training_loss(model(tokens), tokens).backward()
    trained = [p for p in model.parameters() if p.requires_grad]
    adam = torch.optim.Adam(trained)
    adam.step()
    state = memory(cfg, RunSpec("train", seq, batch, dtype="fp32", lora=lora))
    measured = {"weights": sum(p.nbytes for p in model.parameters()),
                "gradients": sum(p.grad.nbytes for p in trained),
                "optimizer": sum(v.nbytes for s in adam.state.values() for k, v in s.items() if k != "step")}
    return out + [Check(f"lora/state/fp32 adam/{k}", state.parts[k], n, state.parts[k] == n)
                  for k, n in measured.items()]


def recomputations(attention: str, cfg: ModelConfig | None = None, lora: LoRA | None = None) -> tuple[str, ...]:
    """What each attention is checked with: selective recomputation changes only eager's; with ``cfg``, those
    the model (with ``lora``) allows (analysis.spec.recompute_refusal), per-op checkpointing among them."""
    out = ("none", "selective", "full") if attention == "eager" else ("none", "full")
    if cfg is None:
        return out
    return tuple(r for r in (*out, "op") if recompute_refusal(cfg, r, lora) is None)


def kv_spans(cfg: ModelConfig) -> list[tuple[int, int]]:
    """(prefill, decode) token counts: one span within every window of the plan (or 16
    tokens without one), and one past each distinct window, so full layers and rolling
    buffers are both exercised."""
    windows = sorted({w for s in layer_specs(cfg) for w in s.span if w is not None})  # windows and chunks
    spans = [(min([16, *windows]), 2 if windows else 4)]
    return spans + [(W + 3, 5) for W in windows]


def kv_checks(cfg: ModelConfig, device: str, batch: int) -> list[Check]:
    model = build(cfg, "eager", device)
    out = []
    for prefill, decode in kv_spans(cfg):
        run = RunSpec("decode", prefill + decode, batch, kv_dtype="fp32")
        analytic = kv_cache(cfg, run).bytes
        measured = measure_kv_bytes(model, batch, prefill, decode)
        out.append(Check(f"kv_cache/prefill {prefill} + decode {decode}", analytic, measured,
                         analytic == measured))
    return out


def inference_flop_checks(cfg: ModelConfig, device: str, batch: int) -> list[Check]:
    """Forward matmul FLOPs of a prefill (last position's logits) and of the decode step after
    it, below and past every window (the decode step reads the cache)."""
    out = []
    for attention in ("eager", "flash"):
        model = build(cfg, attention, device)
        for prefill, _ in kv_spans(cfg):
            pre, dec = measure_inference_flops(model, batch, prefill)
            for mode, seq, measured in (("prefill", prefill, pre), ("decode", prefill + 1, dec)):
                analytic = count_flops(cfg, RunSpec(mode, seq, batch, attention)).forward.matmul
                out += _compare(f"flops/{attention}/{mode} {seq}", analytic, measured)
    return out


def real_tensor_checks(cfg: ModelConfig) -> list[Check]:
    small = checks.small_config(cfg)
    out = []
    for name, fn in checks.applicable(cfg).items():
        ok, diff = fn(small)
        out.append(Check(f"real/{name}", 0.0, diff, ok, "max |difference| on float64 tensors"))
    return out


def check_sizes(cfg: ModelConfig, seq: int, batch: int, longest: int) -> None:
    """ConfigError unless every tensor the checks make fits in what torch can address.
    ``longest``: the longest sequence a check runs (``seq``, or a prefill past every window).
    Elements are counted at 8 bytes (int64 positions, float64 tables), over a generous width
    per token: the logits, the eager score rows, and every projection of a layer."""
    widths = [cfg.vocab_size, cfg.n_heads * longest, cfg.d_model, 2 * cfg.d_ff, cfg.q_width, cfg.kv_width]
    if cfg.mla is not None:
        m = cfg.mla
        widths += [cfg.n_heads * (m.qk_nope_head_dim + max(m.qk_rope_head_dim, m.v_head_dim)),
                   m.kv_lora_rank + m.qk_rope_head_dim, m.q_lora_rank or 0]
    if cfg.moe is not None:
        widths += [cfg.moe.num_experts, 2 * cfg.moe.experts_per_token * cfg.expert_width,
                   2 * max(cfg.moe.shared_experts, 1) * cfg.shared_expert_width]
    run = f"--seq {seq:,} with --batch {batch:,}" + (f" and a prefill of {longest:,} tokens" if longest > seq else "")
    tensors = {  # what would be too large -> its elements
        run: batch * longest * max(widths),
        f"context_length {cfg.context_length:,}": cfg.context_length * max(cfg.d_model, cfg.head_size),
        "its parameters": max(count_params(cfg).components.values()),
    }
    for what, elements in tensors.items():
        if 8 * elements > TORCH_BYTES:
            raise ConfigError(f"{what}: a tensor of {elements:.3g} elements would pass the 2^63 bytes torch "
                              "can address", cfg.name)


def on_deep_stack(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a thread with a STACK_BYTES stack. torch frees an autograd graph by
    recursing through every node that has a Python object, and measuring gives nodes one
    (ModuleScope's node lookups): a 2,000-layer model overflowed the main thread's 8 MiB C
    stack, a segfault. 1 GiB holds millions of nodes. Ctrl-C: cli.errors ends the process
    without waiting for this thread."""
    # torch._dynamo, which building a module on meta imports, creates torch's compile cache directory
    # as it is imported: imported on this thread, so that a thread Ctrl-C leaves running never creates
    # it after llmcalc verify removed it (cli/caches.py). Not at the top: a --jobs parent builds nothing.
    import torch._dynamo  # noqa: F401

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller's thread as it is
            outcome["error"] = exc

    previous = threading.stack_size(STACK_BYTES)
    try:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
    except RuntimeError:  # no room for the stack (a tight `ulimit -v`): the main thread's will do
        return fn(*args)  # for all but the deepest models
    finally:
        threading.stack_size(previous)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def verify(cfg: ModelConfig, device: str, seq: int, batch: int, hw: Hardware | None = None,
           lora: LoRA | None = None) -> list[Check]:
    """All checks for one model. ``meta``: the shape checks; ``cpu``: plus the real-tensor
    checks; with ``hw`` (cpu or cuda) plus prefill, decode and a training step timed against
    its roofline, and on cuda peak memory (:mod:`analysis.verify.timed`). With ``lora``: the
    LoRA checks on meta (:func:`lora_checks`) instead.
    ConfigError when ``seq`` and ``batch`` or the model make tensors torch cannot address."""
    if lora is not None:
        check_sizes(cfg, seq, batch, seq)
        return on_deep_stack(lora_checks, cfg, seq, batch, lora)
    timed = hw if device != "meta" else None
    longest = seq + 1 if timed else seq  # the timed decode step runs at position seq
    check_sizes(cfg, seq, batch, max([longest, *(prefill + decode for prefill, decode in kv_spans(cfg))]))
    return on_deep_stack(_checks, cfg, device, seq, batch, timed)


def verify_many(cfgs: list[ModelConfig], device: str, seq: int, batch: int, hw: Hardware | None = None,
                lora: LoRA | None = None, jobs: int = 1) -> Iterator[list[Check]]:
    """:func:`verify` of each model, in order. ``jobs`` > 1: that many worker processes (spawned:
    a forked torch can deadlock) take the models deepest first, so that no long one starts last;
    the checks are single-threaded Python, so every bundled model on 2 cores takes about half the
    time. Ctrl-C: the workers are started with SIGINT ignored (inherited from their first
    instruction, so none prints a traceback while it starts) and terminated with the pool, which
    is taken down whole (SIGINT ignored meanwhile); call from the main thread. Every process
    started is reaped before this returns or raises. The workers' meta kernels are this process's
    (:mod:`.meta_kernels`)."""
    if jobs == 1 or len(cfgs) == 1:
        yield from (verify(cfg, device, seq, batch, hw, lora) for cfg in cfgs)
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        pool = multiprocessing.get_context("spawn").Pool(min(jobs, len(cfgs)), use_cpp_meta, (cpp_meta(),))
    finally:
        signal.signal(signal.SIGINT, previous)
    deepest_first = sorted(range(len(cfgs)), key=lambda i: -cfgs[i].n_layers)
    pending = {i: pool.apply_async(verify, (cfgs[i], device, seq, batch, hw, lora)) for i in deepest_first}
    interrupted = False
    try:
        for i in range(len(cfgs)):
            yield pending[i].get()
    except KeyboardInterrupt:  # raised again below: its traceback (the awaited result) would keep the pool alive
        interrupted = True
    finally:
        held = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C now would leave the pool half taken down
        pool.terminate()  # the workers killed and reaped
        # The pool freed, its semaphores' finalizers unlink them and unregister them from the resource
        # tracker, the process spawn started beside the workers; stopping the tracker reaps it. Left to
        # itself it outlives this process (cli.errors ends a Ctrl-C with os._exit, and even an orderly
        # exit leaves it running), an orphan that shows as a zombie until init reaps it.
        del pool, pending
        gc.collect()
        resource_tracker._resource_tracker._stop()
        signal.signal(signal.SIGINT, held)
    if interrupted:
        raise KeyboardInterrupt


def _checks(cfg: ModelConfig, device: str, seq: int, batch: int, hw: Hardware | None) -> list[Check]:
    meta = "meta"
    out = param_checks(cfg)
    for attention in ("eager", "flash"):
        for recompute in recomputations(attention, cfg):
            out += training_checks(cfg, seq, batch, attention, recompute, meta)
    out += kv_checks(cfg, meta, batch)
    out += inference_flop_checks(cfg, meta, batch)
    if device in ("cpu", "cuda"):
        out += real_tensor_checks(cfg)
    if hw is not None:
        from .timed import timed_checks

        out += timed_checks(cfg, device, seq, batch, hw)
    return out
