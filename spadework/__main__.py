"""`python -m spadework` is the `spadework` command."""

from spadework.cli import run

run()
