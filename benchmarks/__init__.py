"""Public benchmark harnesses (`spadework bench`) and the project's speed benchmarks (scripts here)."""
