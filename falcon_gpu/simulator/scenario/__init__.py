"""The scenario format (CONTRACT section 5): its typed model and its strict parser.

``model`` and ``host_model`` are the typed scenario (GPUs, and the node around
them); ``parse`` and ``parse_host`` read a JSON file into it through
``strict_json``, whose errors name the JSON path. The bundled scenario files live
next door in ``simulator/scenarios/``.
"""
