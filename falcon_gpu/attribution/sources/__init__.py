"""One module per attribution source; :mod:`falcon_gpu.attribution.registry` lists them in order."""
