"""Everything a trainer meets, in one package (see docs/training.md):

- :mod:`~causaltrace.training.export`: SFT rows from fully correct trajectories, RL rows for
  TRL, verl and Hugging Face ``datasets``, verl's tool config (``causaltrace-export``);
- :mod:`~causaltrace.training.records`: episode records and the ground truth a reward
  function reads; :mod:`~causaltrace.training.hf`: a ``datasets.Dataset`` of them;
- :mod:`~causaltrace.training.trl_env`, :mod:`~causaltrace.training.trl_rewards`: TRL's
  ``environment_factory`` and reward functions;
- :mod:`~causaltrace.training.verl_tools`, :mod:`~causaltrace.training.verl_reward`: verl's
  tools and ``compute_score``;
- :mod:`~causaltrace.training.recipe`, :mod:`~causaltrace.training.smoke`,
  :mod:`~causaltrace.training.tiny`: the reference recipe's TRL steps (``causaltrace-train``),
  its CPU smoke and the tiny model it trains.

Nothing here is imported by ``import causaltrace``; importing a module needs only the runtime
dependencies except :mod:`~causaltrace.training.verl_tools`, which subclasses verl's tool class
(TRL, torch and transformers are imported when called).
"""
