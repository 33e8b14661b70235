"""Training support: the tiny model used by the CPU smoke of the reference recipe, and the
recipe's steps (see docs/training.md). Nothing here is imported by ``import causaltrace``;
the modules import torch and transformers when called."""
