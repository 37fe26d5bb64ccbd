"""The analytic model: pure Python over one frozen :class:`~analysis.model.config.ModelConfig` and
one frozen :class:`~analysis.spec.RunSpec`, returning small frozen dataclasses of integers. It never
imports torch (only :mod:`.verify` does, lazily).

One sub-package per concern: :mod:`.model` (what a model is), :mod:`.spec` (the run spec),
:mod:`.load` (reading files and the bundled catalog), :mod:`.count` (counting on one device),
:mod:`.perf` (time on one accelerator), :mod:`.cluster` (many GPUs), :mod:`.verify` (reference
PyTorch modules and measurement), :mod:`.errors` and :mod:`.numbers` (the grammar of sizes, rates and
counts). Imports go one way, with no circle (a test
reads the import graph): model before spec and load, those before count, count before perf, perf
before cluster.
"""
