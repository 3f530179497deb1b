"""Example worlds shipped with spadework: the one the README and the designer prompt show."""

from pathlib import Path

# The library world's source itself: the designer prompt shows it, and tests load it into the sandbox.
EXAMPLE_WORLD = (Path(__file__).parent / "library.py").read_text()
EXAMPLE_SPEC = (Path(__file__).parent / "library.json").read_text()  # a library world as a spec
