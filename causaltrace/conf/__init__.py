"""The engine's Hydra configs, shipped with the package: the apps' primary configs
(``generate.yaml``, ``eval.yaml``, ``audit.yaml``) and the engine's own groups (``verifier``,
``reward``, ``launcher``, the domain-free agents, the trainer recipes). The apps load them as
``pkg://causaltrace.conf``; each domain's presets come from its own ``conf`` package, added to
Hydra's search path by ``hydra_plugins.causaltrace_searchpath``."""
