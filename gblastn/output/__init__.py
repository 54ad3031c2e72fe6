"""Output formats, one module per format: tabular (-outfmt 6, 7 and 10), xml (5); formats
picks the one -outfmt names."""
