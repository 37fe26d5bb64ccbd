"""Reading files: bounded reading and hardened YAML/JSON (:mod:`.files`), the Hugging Face
``config.json`` mapping (:mod:`.hf`), and the bundled catalog of models and accelerators with the
functions that load either by name or path (:mod:`.catalog`)."""
