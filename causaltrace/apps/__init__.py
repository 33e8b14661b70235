"""Command-line applications (Hydra apps and inspectors)."""
