"""Source trees: where the vLLM and vllm-ascend packages are, and which versions they are."""
