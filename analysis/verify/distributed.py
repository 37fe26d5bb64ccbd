"""`llmcalc verify --tp T --dp D --zero 3`: a parallel layout checked on torch.distributed.

The reference model is sharded the way PyTorch shards a model, not the way llmcalc's formulas
say: DTensor's tensor-parallel plans (``ColwiseParallel`` for q, k, v, the attention gate, up and gate,
``RowwiseParallel`` for o and down, a vocab-parallel token embedding and LM head with
``loss_parallel`` cross-entropy, ``PrepareModuleInput`` so that each TP region receives its
input once) and FSDP2's ``fully_shard`` over the data-parallel mesh dimension (each layer a
unit, then the root; also over a single data-parallel GPU, see ``_parallelize``), each tensor on
its first dimension, or a later one that splits evenly when the first has fewer rows than GPUs,
as torchtitan places stacked experts. It runs in
this one process as rank 0 of a fake process group of the full world size (collectives return
without communicating: shapes are right, values are not).

FSDP2 refuses parameters on the meta device at its first forward, so the rank's shards are
materialized on the CPU (small real tensors, fp32), and one training step runs there: forward,
vocab-parallel cross-entropy, backward, one Adam step. Checked against the analytic figures of
:mod:`analysis.cluster.sharding` and :mod:`analysis.cluster.comm`: rank 0's parameter, gradient and Adam-state
elements, and every collective ``CommDebugMode`` counts, by group and kind: calls and payload
bytes.

What it covers: dense MHA/GQA models (tensor parallelism needs ``tp`` to divide the KV heads;
ALiBi, T5 buckets, attention sinks and whole-projection qk-norm are split by heads differently
and are not sharded here), any model with ``tp`` 1; ZeRO-3 for ``dp`` > 1 (FSDP2 is ZeRO-3;
ZeRO-0 to 2 and pipeline, expert and sequence parallelism are checked on the formulas only). DSA's
indexer runs without gradient in the reference (transformers'), where llmcalc's training state counts
its gradients and optimizer state (DeepSeek-V3.2 trains it by a loss of its own): formulas only; so
does a vision tower, through which the reference's text-only step runs no image.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter

import torch

from ..cluster.comm import collectives
from ..cluster.sharding import check_layout, gpu_state, one_gpu_only
from ..errors import SpecError
from ..model.config import ModelConfig
from ..spec import OPTIMIZER_STATES, Layout, RunSpec
from .check import Check
from .measure import training_loss
from .model import Transformer

KIND_OF = (("all_reduce", "all-reduce"), ("allreduce", "all-reduce"), ("all_gather", "all-gather"),
           ("allgather", "all-gather"), ("reduce_scatter", "reduce-scatter"), ("all_to_all", "all-to-all"),
           ("alltoall", "all-to-all"))
MAX_LOCAL_BYTES = 8 * 2**30  # rank 0's materialized shards and their Adam state


def unsupported(cfg: ModelConfig, layout: Layout) -> str | None:
    """Why ``layout`` of ``cfg`` cannot be checked on torch.distributed here (None: it can)."""
    what = one_gpu_only(cfg)
    if what is not None and not layout.trivial:  # check_layout refuses it, as memory and time do
        return f"{cfg.name} has {what} sized on one GPU only: not with a parallel layout"
    if layout.pp > 1 or layout.ep > 1 or layout.sp or layout.cp > 1:
        return ("pipeline, expert, sequence and context parallelism are checked on the formulas only (use memory "
                "or time)")
    if cfg.dsa is not None and not layout.trivial:
        # the reference runs transformers' indexer, which has no gradient; llmcalc's training state counts its
        # gradients and optimizer state, as DeepSeek-V3.2 trains it by a loss of its own
        return ("DSA's indexer runs without gradient in the reference, and llmcalc counts its gradients and "
                "optimizer state: checked on the formulas only")
    if cfg.vision is not None and not layout.trivial:  # no image runs through the reference's tower
        return ("the vision tower gets no gradient without images, and llmcalc counts its gradients and optimizer "
                "state (as with images): checked on the formulas only")
    if layout.dp > 1 and layout.zero != 3:
        return "data parallelism is checked with FSDP2, which is ZeRO-3: add --zero 3"
    if layout.tp > 1:
        reasons = [(cfg.attention != "mha", "multi-head latent attention"), (cfg.moe is not None, "experts"),
                   (cfg.has_recurrent, f"{cfg.recurrent_kind} layers"),
                   (cfg.position in ("alibi", "relative"), f"{cfg.position} position biases"),
                   (cfg.attention_sinks, "attention sinks"), (cfg.qk_norm == "full", "whole-projection qk-norm"),
                   (cfg.sub_norms, "sub-norms over the whole attention output and MLP width"),
                   (cfg.kv_heads % layout.tp != 0, f"tp {layout.tp} not dividing the {cfg.kv_heads} KV heads"),
                   # the full layers' own KV heads (Gemma 4), which DTensor's plans split as the others
                   (cfg.full_kv_heads is not None and cfg.full_kv_heads % layout.tp != 0,
                    f"tp {layout.tp} not dividing the {cfg.full_kv_heads} KV heads of the full layers")]
        found = [what for bad, what in reasons if bad]
        if found:
            return f"tensor parallelism is sharded here for dense MHA/GQA models only, not with {', '.join(found)}"
    return None


def _kind(op: str) -> str:
    return next(kind for pattern, kind in KIND_OF if pattern in op)


def _tensors(args) -> list[torch.Tensor]:
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += _tensors(a)
    return out


def _group(args):
    """The process group a collective runs on: a name (functional collectives) or a boxed group."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group

    for a in args:
        if isinstance(a, torch.ScriptObject):
            return dist.ProcessGroup.unbox(a)
        if isinstance(a, str):
            with contextlib.suppress(Exception):  # a reduce op's name ("sum") names no group
                return _resolve_process_group(a)
    return None


def _recorder(names: dict):
    """CommDebugMode that also records each collective's group, kind and payload bytes."""
    from torch.distributed.tensor.debug import CommDebugMode

    class Recorder(CommDebugMode):
        def __init__(self):
            super().__init__()
            self.calls: Counter = Counter()
            self.payload: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            before = sum(self.comm_counts.values())
            out = super().__torch_dispatch__(func, types, args, kwargs)
            if out is not NotImplemented and sum(self.comm_counts.values()) > before:
                group = _group([*args, *(kwargs or {}).values()])
                kind = _kind(str(func._overloadpacket))
                tensors = _tensors(args)
                payload = max(t.numel() * t.element_size() for t in tensors)
                if kind == "all-gather" and len(tensors) == 1:  # functional: the shard goes in
                    payload *= group.size()
                key = (names.get(group.group_name, "?"), kind)
                self.calls[key] += 1
                self.payload[key] += payload
            return out

    return Recorder()


def _parallelize(model: Transformer, cfg: ModelConfig, mesh, layout: Layout) -> None:
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        parallelize_module,
    )

    if layout.tp > 1:
        tp = mesh["tp"]
        parallelize_module(model, tp, {
            "embedding.token": RowwiseParallel(input_layouts=Replicate()),
            "lm_head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)})
        if cfg.tie_embeddings:  # both split the vocabulary rows: the same shard serves both
            model.lm_head.weight = model.embedding["token"].weight
        once = PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Replicate(),),
                                  use_local_output=False)
        for layer in model.layers:
            plan = {"attention": PrepareModuleInput(input_layouts=(Replicate(), None),
                                                    desired_input_layouts=(Replicate(), None),
                                                    use_local_output=False),
                    "mlp": once, "attention.o": RowwiseParallel(), "mlp.down": RowwiseParallel()}
            plan.update({name: ColwiseParallel() for name in ("attention.q", "attention.k", "attention.v",
                                                              "attention.gate", "mlp.up", "mlp.gate")
                         if _has(layer, name)})
            parallelize_module(layer, tp, plan)
            layer.attention.h //= layout.tp  # the heads this rank computes
            layer.attention.g //= layout.tp
    # FSDP2 even over one data-parallel GPU, as torchtitan composes it with TP: it lands each
    # gradient in its parameter's placement (on its own, DTensor keeps the gradient of a
    # vocab-parallel embedding whole on every TP rank); over one GPU it issues no collective
    dp = mesh["dp"]

    def placement(param) -> Shard:  # as sharding.Tensor.shard: torchtitan's placement of stacked experts
        n = dp.size()
        later = (i for i, rows in enumerate(param.shape) if i and rows % n == 0)
        return Shard(0 if param.shape[0] >= n else next(later, 0))

    for layer in model.layers:
        fully_shard(layer, mesh=dp, shard_placement_fn=placement)
    fully_shard(model, mesh=dp, shard_placement_fn=placement)


def _has(module, path: str) -> bool:
    with contextlib.suppress(AttributeError):
        module.get_submodule(path)
        return True
    return False


def _local(t: torch.Tensor) -> int:
    return t.to_local().numel() if hasattr(t, "to_local") else t.numel()


def check_layout_on_torch(cfg: ModelConfig, layout: Layout, seq: int, batch: int) -> list[Check]:
    """One training step of ``cfg`` under ``layout`` on a fake process group (module docstring)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import loss_parallel

    # registers the "fake" backend (PyTorch ships it in its testing package)
    from torch.testing._internal.distributed.fake_pg import FakeStore

    run = RunSpec("train", seq, batch, "flash", dtype="fp32", layout=layout)
    check_layout(cfg, run)
    reason = unsupported(cfg, layout)
    if reason:
        raise SpecError("layout", f"{layout.describe()} of {cfg.name}: {reason}")
    state = gpu_state(cfg, layout, 0)
    moments = OPTIMIZER_STATES["adam"]
    if state.weights * 4 * (2 + moments) > MAX_LOCAL_BYTES:
        raise SpecError("layout", f"{layout.describe()}: rank 0 would hold {state.weights:,} parameters in fp32 with "
                                  f"their gradients and Adam state on this CPU: at most {MAX_LOCAL_BYTES // 2**30} "
                                  "GiB; check a smaller model or a wider layout")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=layout.gpus)
    try:
        dims = [("dp", layout.dp)] + ([("tp", layout.tp)] if layout.tp > 1 else [])
        mesh = init_device_mesh("cpu", tuple(s for _, s in dims), mesh_dim_names=tuple(n for n, _ in dims))
        names = {mesh[n].get_group().group_name: n for n, _ in dims}
        with torch.device("meta"):
            model = Transformer(cfg, "flash").to(torch.float32)  # the run's dtype, buffers too (Lightning's
            # decay tables are built in float64)
        _parallelize(model, cfg, mesh, layout)
        model.to_empty(device="cpu")
        tokens = torch.zeros(batch, seq, dtype=torch.long)
        recorder = _recorder(names)
        with recorder, warnings.catch_warnings():
            # FSDP2 warns that its root returns a view (nothing here writes to it in place) and
            # that its hooks fire on outputs when no input needs a gradient (token ids)
            warnings.filterwarnings("ignore", "FSDP2-wrapped module", UserWarning)
            warnings.filterwarnings("ignore", "Full backward hook", UserWarning)
            logits = model(tokens)  # (B, S, V): a DTensor split on the vocabulary under tp
            with loss_parallel() if layout.tp > 1 else contextlib.nullcontext():
                training_loss(logits, tokens).backward()
        params = list(model.parameters())
        optimizer = torch.optim.Adam(params)
        optimizer.step()
        measured_state = sum(_local(v) for s in optimizer.state.values() for k, v in s.items() if k != "step")
        checks = [_same("rank 0/weights", state.weights, sum(_local(p) for p in params)),
                  _same("rank 0/gradients", state.gradients, sum(_local(p.grad) for p in params)),
                  _same("rank 0/adam state", moments * state.optimizer, measured_state)]
    finally:
        dist.destroy_process_group()
    analytic_calls: Counter = Counter()
    analytic_payload: Counter = Counter()
    for c in collectives(cfg, run, 0):
        analytic_calls[c.group, c.kind] += c.calls
        analytic_payload[c.group, c.kind] += c.payload
    for key in sorted({*analytic_calls, *recorder.calls}):
        name = f"comm/{key[0]}/{key[1]}"
        checks += [_same(f"{name}/calls", analytic_calls[key], recorder.calls[key]),
                   _same(f"{name}/bytes", analytic_payload[key], recorder.payload[key])]
    return checks


def _same(name: str, analytic: int, measured: int) -> Check:
    return Check(name, analytic, measured, analytic == measured)
