"""Bridges to other causal libraries. Each submodule imports its library at import time, so
``import causaltrace`` never loads them: import the submodule you need
(``causaltrace.interop.dowhy_gcm``)."""
