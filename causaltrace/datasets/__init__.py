"""The dataset layer: generation of verified splits (sharded, resumable, byte-identical for a
seed whatever the number of workers), their files and checksums, seed derivation, and the Ray
executor."""
