"""The database layer: `make_db` (writer.py) builds, `open_db` (reader.py) reads; the stored
layout is described in format.py, makeblastdb's substitute bases in crandom.py."""
