"""spadework: one language model teaches itself tool use by self-play in executable toolworlds."""

__version__ = "0.1.0"
