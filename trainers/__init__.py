"""Training-side pieces: the float policy checkpoint, GGUF export and weight sync (the GRPO loop comes next)."""
