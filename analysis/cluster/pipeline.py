"""Pipeline schedules: which layers each stage holds, and how many micro-batches' activations it
keeps (the conventions are in the docs' "Parallelism").

- the split: the token embedding counts as one layer slot on the first stage, the LM head and loss
  as one on the last (Megatron-LM's ``account_for_embedding_in_pipeline_split`` and
  ``account_for_loss_in_pipeline_split``; the Llama 3 paper's "one Transformer layer fewer on the
  first and the last stage"), and the ``L + 2`` slots are dealt as evenly as possible over the
  stages (:func:`split`). A layer count that ``pp`` divides splits evenly, as without the slots;
- interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's ``virtual_pipeline_model_parallel_size``):
  with ``vpp`` virtual stages a GPU, the split is over ``pp x vpp`` virtual stages, and model chunk
  ``j`` of stage ``s`` is virtual stage ``j pp + s`` (:func:`chunks`); the activations a stage keeps
  follow Megatron-Core's schedule (:func:`held`).
"""

from itertools import accumulate

from ..spec import Layout


def split(n_layers: int, parts: int) -> list[int]:
    """Layers of each of ``parts`` consecutive (virtual) stages, ``parts <= n_layers``: each gets
    ``q = (L + 2) // parts`` slots and the ``r`` left over one more each, to the first stage, then
    the last, then the middle ones from the last backwards; the first and last give one slot to the
    embedding and the head. Every split of the slots has the same largest stage; this one gives the
    extra layers to the middle stages before the ends (which also run the head or embedding), the
    first stage before the last (an embedding lookup costs less than the LM head), and late middle
    stages before early ones (under 1F1B an early stage keeps more micro-batches in flight)."""
    if parts == 1:
        return [n_layers]
    q, r = divmod(n_layers + 2, parts)
    slots = [q] * parts
    for s in [0, parts - 1, *range(parts - 2, 0, -1)][:r]:
        slots[s] += 1
    slots[0] -= 1
    slots[-1] -= 1
    return slots


def chunks(n_layers: int, layout: Layout) -> list[list[range]]:
    """Layer indices of each model chunk of each pipeline stage (``vpp`` chunks a stage)."""
    pp, vpp = layout.pp, layout.vpp
    ends = [0, *accumulate(split(n_layers, pp * vpp))]
    virtual = [range(a, b) for a, b in zip(ends, ends[1:])]
    return [[virtual[j * pp + s] for j in range(vpp)] for s in range(pp)]


def held(layout: Layout, stage: int, sizes: list[int]) -> list[int]:
    """Micro-batches of each model chunk whose activations ``stage`` keeps at its peak, given the
    bytes one micro-batch saves in each chunk (``sizes``). 1F1B: ``min(pp - s, m)``. Interleaved,
    as Megatron-Core's ``forward_backward_pipelining_with_interleaving`` runs it: all ``m vpp``
    chunk forwards first when ``m = pp``, else ``2 (pp - s - 1) + (vpp - 1) pp`` warm-up forwards,
    then one forward and one backward in turn; forward ``k`` runs chunk ``(k mod pp vpp) // pp``,
    backward ``k`` the chunks in reverse order. Stage 0 keeps ``pp + (pp - 1) / vpp`` micro-batches
    of a stage's layers when ``m > pp`` (Korthikanti et al. 2022, section 4.2.3: ``1 + (p-1)/(p v)``
    times 1F1B's ``p``)."""
    if layout.vpp == 1:
        return [layout.in_flight(stage)]
    pp, vpp, m = layout.pp, layout.vpp, layout.steps
    total = m * vpp
    warmup = total if m == pp else min(2 * (pp - stage - 1) + (vpp - 1) * pp, total)

    def chunk(k: int, forward: bool) -> int:
        j = k % (pp * vpp) // pp
        return j if forward else vpp - 1 - j

    counts, peak, best = [0] * vpp, -1, [0] * vpp
    events = [(k, True) for k in range(warmup)]  # the cool-down's backwards only free memory
    for k in range(total - warmup):
        events += [(warmup + k, True), (k, False)]
    for k, forward in events:
        counts[chunk(k, forward)] += 1 if forward else -1
        kept = sum(c * n for c, n in zip(counts, sizes))
        if kept > peak:
            peak, best = kept, list(counts)
    return best
