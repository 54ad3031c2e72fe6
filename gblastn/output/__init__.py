"""Output formats; one module per format (tabular: -outfmt 6, 7 and 10)."""
