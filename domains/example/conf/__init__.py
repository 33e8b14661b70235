"""The example domain's Hydra preset, ``domain/example``. The ``causaltrace_searchpath`` Hydra
plugin adds ``pkg://causaltrace_domains.example.conf`` to every causaltrace app's search path,
because the domain is registered under the ``causaltrace.domains`` entry points and has this
package."""
