"""Spadework's worlds where other frameworks expect environments (Gymnasium, TRL, verifiers, OpenEnv): each a thin
layer over the one episode contract (`toolworlds.episode`), its library an optional extra."""
