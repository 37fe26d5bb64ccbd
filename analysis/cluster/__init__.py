"""Many GPUs: what one GPU holds under a parallel layout (:mod:`.sharding`), its memory and the
largest batch that fits (:mod:`.memory`), the collectives it takes part in (:mod:`.comm`), a step's
time (:mod:`.step`), and the search over layouts of ``llmcalc plan`` (:mod:`.search`)."""
