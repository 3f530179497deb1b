"""Studies: measured experiments on runs (the GRPO sweep, who learned, hint rewording, designer corpora and rewards)."""
