"""The package version, in the bottom layer so that dataset manifests and run records can state
it without importing the package's public namespace (which imports every layer)."""

__version__ = "0.1.0"
