"""Time on one accelerator: its spec (:mod:`.hardware`) and the roofline of a pass, a chunked
prefill, a generation and a training run's utilization (:mod:`.roofline`)."""
