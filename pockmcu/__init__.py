"""pockmcu: compile int8 TFLite/ONNX models to C for inference and on-device training."""

__version__ = "0.1.0"
