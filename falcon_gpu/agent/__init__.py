"""The agent: wires sources, attribution, schemas and sinks, and runs them every interval."""
