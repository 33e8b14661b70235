"""The bottom layer every other layer may use: seed derivation, atomic and canonical file I/O,
and the one registry type. It imports nothing of causaltrace but :mod:`causaltrace.errors`."""
