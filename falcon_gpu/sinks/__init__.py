"""Sinks move rendered samples to a destination; only sinks know wire formats.

A network sink is a pusher (encode, push, classify the answer) composed with a
delivery path from :mod:`falcon_gpu.delivery` by its module's ``build``; add one
as docs/SINKS.md, "Adding a sink", says: its settings model in :mod:`.config`,
its module here, one line in :mod:`.registry`.
"""
