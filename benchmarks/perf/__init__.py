"""Performance benchmarks: each script times one part and prints its figures side by side (`just bench-*`)."""
