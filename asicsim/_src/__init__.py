"""asicsim's implementation. Nothing here is public: the supported names are those that
``asicsim`` and its packages ``numerics``, ``hw``, ``workloads``, ``system`` and ``report``
export (optax and equinox keep their code the same way)."""
