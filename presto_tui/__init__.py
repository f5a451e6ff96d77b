"""presto-tui: run, watch and replay exact PreSTO power sampling of LLMs."""

__version__ = "0.1.0"
