"""scalesched: place the tasks of agentic LLM workflows on heterogeneous GPU/CPU clusters."""

__version__ = "0.1.0"
