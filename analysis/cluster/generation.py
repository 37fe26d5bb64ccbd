"""``generate`` on a layout: gpt-fast's tensor-parallel decode (its README's "Tensor Parallelism"
tables).

Each GPU runs its tensor-parallel shard of the model (:func:`.sharding.tp_local`). The prompt's
prefill is a parallel inference pass (:func:`.step.step`: the shard's compute, then the layers'
all-reduces), and so is each decode step: the shard's compute summed in closed form as on one GPU
(:func:`analysis.perf.roofline.decode_sums`), plus the step's collectives. Their payloads are
polynomials in the step's context (a decode step all-reduces ``batch x d`` per region whatever its
context; a step without a KV cache all-reduces its whole prefix), so their bytes are summed exactly
from three steps (:class:`analysis.perf.steps.Newton`): constant time in the new tokens. Ideal: at
the link's peak; expected: the alpha-beta model (:func:`analysis.perf.calibration.collective_s`),
every call exposed, tensor parallelism being on the critical path, as :func:`.step.step` has it.

Only ``tp``: gpt-fast generates on one tensor-parallel group; pipeline, context, data and expert
parallel generation are refused.
"""

import dataclasses
from typing import NamedTuple

from ..errors import SpecError
from ..model.config import ModelConfig
from ..perf.calibration import CALIBRATED, Efficiency, collective_s
from ..perf.hardware import Hardware
from ..perf.roofline import Generation, decode_sums
from ..perf.steps import Newton
from ..spec import Layout, RunSpec
from .comm import collectives
from .sharding import tp_local
from .step import Step, link, step


class ParallelGeneration(NamedTuple):
    generation: Generation  # the shard's compute and the communication, prefill and decode steps summed
    prefill: Step  # the prompt's pass over the layout
    decode: Step  # the first decode step: every step's collectives are its own
    decode_sent: int  # bytes one GPU sends over the new - 1 decode steps
    no_cache_sent: int  # over the same steps without a KV cache


def generate(cfg: ModelConfig, run: RunSpec, hw: Hardware, prompt: int, new: int,
             eff: Efficiency = CALIBRATED) -> ParallelGeneration:
    """``prompt`` tokens, then ``new`` tokens per sequence, on the tensor-parallel layout of ``run``."""
    layout = run.layout
    for name in ("pp", "cp", "dp", "ep"):
        if getattr(layout, name) > 1:
            raise SpecError(f"layout.{name}", f"{getattr(layout, name)}: generate runs on one tensor-parallel "
                                              "group (--tp), as gpt-fast does")
    layout = dataclasses.replace(layout, micro_batches=1)  # one pass at a time, as step() runs inference
    run = run.replace(mode="prefill", seq=prompt, layout=layout)
    first = step(cfg, run, hw, eff)
    decode = step(cfg, run.replace(mode="decode", seq=prompt + 1, chunk=None), hw, eff)
    local = decode_sums(tp_local(cfg, layout.tp), run.replace(layout=Layout()), hw, prompt, new, eff)
    sums = [_comm(cfg, run.replace(mode=mode, chunk=None), hw, prompt, new) for mode in ("decode", "prefill")]
    gen = Generation(new, first.compute, local[0] + sums[0][1], local[1] + sums[1][1], local[2] + sums[0][2],
                     local[3] + sums[1][2], first.communication_s, first.expected.parts_s["communication"])
    return ParallelGeneration(gen, first, decode, sums[0][0], sums[1][0])


def _comm(cfg: ModelConfig, run: RunSpec, hw: Hardware, prompt: int, new: int) -> tuple[int, float, float]:
    """Bytes one GPU sends over the steps at contexts ``prompt + 1 .. prompt + new - 1`` of
    ``run.mode``, and their ideal and expected seconds."""
    n = new - 1
    if n == 0:
        return 0, 0.0, 0.0
    samples = [collectives(cfg, run.replace(seq=prompt + 1 + k), 0) for k in range(min(3, n))]
    total, ideal, expected = 0, 0.0, 0.0
    for i, c in enumerate(samples[0]):
        bytes_ = Newton([cs[i].sent for cs in samples]).prefix(n)
        k = link(hw, run.layout, c.group)
        total += bytes_
        ideal += bytes_ / k.rate
        expected += collective_s(hw.calibration, n * c.calls, bytes_, k)
    return total, ideal, expected
