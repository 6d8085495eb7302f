"""fusion-analyze: find fused and open operator-fusion scenarios in vLLM models for Ascend NPUs."""

__version__ = "0.1.0"
