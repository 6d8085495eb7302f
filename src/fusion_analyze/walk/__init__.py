"""Walk: from the model class through forward() into layers and kernels, as an op sequence with dataflow."""
