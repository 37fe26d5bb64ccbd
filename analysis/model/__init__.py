"""What a model is: its config's schema and checks (:mod:`.config`, :mod:`.checks`), the variants
(:mod:`.variants`: activations, positions, norms; :mod:`.formats`: quantized weight formats), the
layer plan (:mod:`.layers`), the parts layers hold (:mod:`.parts`), the attention and FFN kinds'
descriptors (:mod:`.attention`, :mod:`.ffn`, recording what they save on :mod:`.tape`), and
:func:`.architecture.build`, the whole model part by part."""
