"""The image FLOPs llmcalc counts and those FlopCounterMode measures on the reference tower and projector
(analysis/verify/vision.py, built from the config alone), side by side: test_hf_vision.py's checkpoints and
test_properties.py's random towers compare them."""

from llmcalc.analysis.count.flops import count_flops
from llmcalc.analysis.model.config import ModelConfig
from llmcalc.analysis.spec import RunSpec

KEEP = ("vision/", "projector/")


def image_flops(cfg: ModelConfig, text: int, batch: int, size: int) -> tuple[dict, dict, int]:
    """(analytic, measured) forward and backward matmul FLOPs per vision and projector key, each
    ``{"forward": ..., "backward": ...}``, of ``batch`` sequences of ``text`` tokens and one eager image of
    ``size`` pixels a side; and the image tokens the tower gives past the text's, less those it measures
    (0 when they agree). A size the tower cannot take raises count_flops' SpecError before any torch runs."""
    import torch

    from llmcalc.analysis.verify.measure import ModuleScope, _Counter, build
    from llmcalc.analysis.verify.vision import image_features

    report = count_flops(cfg, RunSpec("train", text, batch, "eager", images=1, image_size=size))
    v, model = cfg.vision, build(cfg)
    with ModuleScope(model) as scope:
        with _Counter(scope) as fwd:
            tokens = image_features(model, torch.zeros(batch, v.channels * v.temporal_patch, size, size,
                                                       device="meta"))
        loss = tokens.sum()
    with _Counter(scope) as bwd:
        loss.backward()
    analytic = {d: {k: n for k, n in getattr(report, d).matmul.items() if k.startswith(KEEP)}
                for d in ("forward", "backward")}
    return analytic, {"forward": fwd.result(), "backward": bwd.result()}, report.run.seq - text - tokens.shape[1]
