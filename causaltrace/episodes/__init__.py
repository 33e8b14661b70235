"""The episode layer: domains (a named SCM with its root causes) and their contract, the
sampling of an episode (a hidden cause, both worlds, the rendered tables), its oracle label and
answer space, its alert, the verifier and the oracle that accept it, the composition of a split
and difficulty knobs. Import the modules themselves (``causaltrace.episodes.sampling``, ...)."""
