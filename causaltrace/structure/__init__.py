"""Causal-structure research: identification of effects from the graph (back-door, front-door,
the ID algorithm) and sampled data with the true graph for structure learning."""
