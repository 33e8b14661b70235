"""causaltrace's Hydra plugin: the installed domains' config presets (see
:mod:`hydra_plugins.causaltrace_searchpath.causaltrace_searchpath`)."""
