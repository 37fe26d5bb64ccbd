"""Counting, on one model replica: parameters (:mod:`.params`), FLOPs (:mod:`.flops`), the KV
cache (:mod:`.kvcache`), training activations (:mod:`.activations`), LoRA adapters (:mod:`.lora`),
quantized storage (:mod:`.quant`), one device's memory (:mod:`.memory`) and the bytes a pass moves
(:mod:`.traffic`)."""
