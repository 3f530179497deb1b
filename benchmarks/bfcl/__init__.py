"""BFCL v4 multi-turn, played with the official data, backends and checker from the `bfcl-eval` wheel."""
