"""A lazy libcst index over the vllm / vllm_ascend packages: modules, imports, classes, methods."""
