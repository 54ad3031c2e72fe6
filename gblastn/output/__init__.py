"""Output formats, one module per format: pairwise (-outfmt 0), xml (5), tabular (6, 7 and
10); formats picks the one -outfmt names, alignments and statistics hold what the reports
share."""
