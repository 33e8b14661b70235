"""The model layer: a panel of segments x time, nodes with pure vectorized mechanisms, noise,
interventions as transformations of a model, the SCM, and the simulation of factual and
counterfactual worlds (including counterfactuals from observations)."""
