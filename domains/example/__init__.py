"""A small example domain: a web shop whose orders can drop for three reasons.

It exists to show how a domain is declared on the engine's public API (see
``docs/tutorial-new-domain.md``) and to give the README's first command something to simulate.
"""

from causaltrace_domains.example.domain import ExampleDomain

__all__ = ["ExampleDomain"]
