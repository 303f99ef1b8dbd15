"""Modeling: what a model is and how it is loaded and prompted. `models` (aliases, GGUF conversion,
availability checks), `model_loading` (dtype / quantisation policy, tokenizer, base model, (Q)LoRA),
`precision` (dtype choice), `prompts` (pattern + verbaliser -> token ids) and `threads` (CPU thread count).

Imports the flat core modules (errors, io, hub, choices) and settings/ (Project, LoraSettings); never tracking/,
a stage, launch/ or an entry point."""
