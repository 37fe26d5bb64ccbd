"""``generate`` on a layout: gpt-fast's tensor-parallel decode (its README's "Tensor Parallelism"
tables).

Each GPU runs its tensor-parallel shard of the layers (:func:`.sharding.tp_local`) and, as gpt-fast's
``tp.py`` shards only the attention and FFN linears (``_apply_tp_attn``, ``_apply_tp_ffn``), the whole
token embedding and LM head (:func:`shard`): every GPU looks up its tokens and computes every logit,
so a pass's only collectives are the all-reduces of its layers' outputs (one per attention and one
per FFN: ``tp region outputs``). The prompt's prefill is one pass, and so is each decode step: the
shard's compute summed in closed form as on one GPU (:func:`analysis.perf.roofline.decode_sums`),
plus the step's all-reduces. Their payloads are polynomials in the step's context (a decode step
all-reduces ``batch x d`` per region whatever its context; a step without a KV cache all-reduces its
whole prefix), so their bytes are summed exactly from three steps
(:class:`analysis.perf.polynomial.Newton`): constant time in the new tokens. Ideal: at the link's peak;
expected: the alpha-beta model (:func:`analysis.perf.calibration.collective_s`), every call exposed,
tensor parallelism being on the critical path, as :func:`.step.step` has it.

Or on data-parallel replicas (``dp``) whose routed experts may be dealt over ``ep`` of them, without ``tp``:
the data-parallel attention and expert parallelism of SGLang's and vLLM's MoE serving (``--dp --ep``). Each
GPU runs its own ``batch`` sequences through the whole attention and the experts it holds
(:func:`.sharding.tp_local` of nothing; the pass of one GPU of an expert-parallel group,
``count.flops.copies_read``), and a pass's collectives are the experts' dispatch and combine (all-to-all over
``ep``), whose payloads follow the tokens of a pass as the all-reduces do. Pipeline and context parallel
generation, and ``tp`` with ``dp``, are refused.
"""

import dataclasses
from typing import NamedTuple

from ..errors import SpecError
from ..model.config import ModelConfig
from ..perf.calibration import CALIBRATED, Efficiency, collective_s
from ..perf.hardware import Hardware
from ..perf.polynomial import Newton
from ..perf.roofline import Generation, Roofline, decode_sums, roofline
from ..spec import Layout, RunSpec
from .comm import Collective, collectives
from .sharding import check_layout, tp_local
from .step import link

REPLICATED = ("tp embedding", "tp logits")  # the vocab-parallel collectives gpt-fast's whole vocabulary has not


class Pass(NamedTuple):
    """One pass on the layout: the shard's compute and the collectives, each at the link's peak and
    expected."""

    run: RunSpec  # resolved, with its layout
    compute: Roofline
    collectives: tuple[Collective, ...]
    ideal_s: tuple[float, ...]
    expected_s: tuple[float, ...]

    @property
    def communication_s(self) -> float:
        return sum(self.ideal_s)

    @property
    def expected_communication_s(self) -> float:
        return sum(self.expected_s)

    @property
    def sent(self) -> int:
        return sum(c.sent for c in self.collectives)


class ParallelGeneration(NamedTuple):
    generation: Generation  # the shard's compute and the communication, prefill and decode steps summed
    prefill: Pass  # the prompt's pass over the layout
    decode: Pass  # the first decode step: every step's collectives are its own
    decode_sent: int  # bytes one GPU sends over the new - 1 decode steps
    no_cache_sent: int  # over the same steps without a KV cache

    def tokens_per_s(self, batch: int, expected: bool) -> float:
        """New tokens a second over every GPU: each data-parallel GPU generates for its own ``batch`` sequences."""
        return self.generation.tokens_per_s(batch * self.decode.run.layout.dp, expected)


def shard(cfg: ModelConfig, tp: int) -> ModelConfig:
    """The model one GPU runs: its tensor-parallel shard of the layers, the whole vocabulary."""
    return dataclasses.replace(tp_local(cfg, tp), vocab_size=cfg.vocab_size) if tp > 1 else cfg


def generate(cfg: ModelConfig, run: RunSpec, hw: Hardware, prompt: int, new: int,
             eff: Efficiency = CALIBRATED) -> ParallelGeneration:
    """``prompt`` tokens, then ``new`` tokens per sequence, on the tensor-parallel layout of ``run``."""
    layout = run.layout
    for name in ("pp", "cp"):
        if getattr(layout, name) > 1:
            raise SpecError(f"layout.{name}", f"{getattr(layout, name)}: generate runs on one tensor-parallel group "
                                              "or on data-parallel GPUs, without pipeline stages or context "
                                              "parallelism")
    if layout.micro_batches not in (None, 1):
        raise SpecError("global_batch", "(batches in flight through a pipeline) does not apply to generate, which "
                                        "runs one batch a GPU: give --batch")
    if layout.dp > 1 and layout.tp > 1:
        raise SpecError("layout.dp", f"{layout.dp} with --tp {layout.tp}: generate runs on one tensor-parallel group "
                                     "(--tp, as gpt-fast does) or on data-parallel GPUs whose experts --ep may deal "
                                     "out (--dp, as SGLang and vLLM serve MoE models), not both")
    run = run.replace(mode="prefill", seq=prompt)
    decode = one_pass(cfg, run.replace(mode="decode", seq=prompt + 1, chunk=None), hw, eff)  # its rules first:
    first = one_pass(cfg, run, hw, eff)  # the prompt's are those of a prefill, which a length can fix
    local = decode_sums(shard(cfg, layout.tp), run.replace(layout=Layout.expert_gpu(layout.ep)), hw, prompt, new, eff)
    sums = [_comm(cfg, run.replace(mode=mode, chunk=None), hw, prompt, new) for mode in ("decode", "prefill")]
    gen = Generation(new, first.compute, local[0] + sums[0][1], local[1] + sums[1][1], local[2] + sums[0][2],
                     local[3] + sums[1][2], first.communication_s, first.expected_communication_s)
    return ParallelGeneration(gen, first, decode, sums[0][0], sums[1][0])


def one_pass(cfg: ModelConfig, run: RunSpec, hw: Hardware, eff: Efficiency = CALIBRATED) -> Pass:
    """An inference pass of ``run`` (one micro-batch) on its tensor-parallel layout."""
    run = run.resolve(cfg)
    check_layout(cfg, run)
    compute = roofline(shard(cfg, run.layout.tp), run.replace(layout=Layout.expert_gpu(run.layout.ep)), hw, eff)
    cs = tuple(_collectives(cfg, run))
    links = [link(hw, run.layout, c.group) for c in cs]
    return Pass(run, compute, cs, tuple(c.sent / k.rate for c, k in zip(cs, links)),
                tuple(collective_s(hw.calibration, c.calls, c.sent, k) for c, k in zip(cs, links)))


def _collectives(cfg: ModelConfig, run: RunSpec) -> list[Collective]:
    return [c for c in collectives(cfg, run, 0) if c.what not in REPLICATED]


def _comm(cfg: ModelConfig, run: RunSpec, hw: Hardware, prompt: int, new: int) -> tuple[int, float, float]:
    """Bytes one GPU sends over the steps at contexts ``prompt + 1 .. prompt + new - 1`` of
    ``run.mode``, and their ideal and expected seconds."""
    n = new - 1
    if n == 0:
        return 0, 0.0, 0.0
    samples = [_collectives(cfg, run.replace(seq=prompt + 1 + k)) for k in range(min(3, n))]
    total, ideal, expected = 0, 0.0, 0.0
    for i, c in enumerate(samples[0]):
        bytes_ = Newton([cs[i].sent for cs in samples]).prefix(n)
        k = link(hw, run.layout, c.group)
        total += bytes_
        ideal += bytes_ / k.rate
        expected += collective_s(hw.calibration, n * c.calls, bytes_, k)
    return total, ideal, expected
