"""The TensorRT-LLM adapter (``engine.name: trtllm``): options, the mapping from model.yaml to
TensorRT-LLM's ``LLM`` and ``SamplingParams`` arguments, the conversion of flashinfer tap
records into trace steps, and the adapter itself.

``options`` and ``config`` are light (pydantic only) so that listing engines and validating
model.yaml never import torch or tensorrt_llm; ``observe`` needs torch (the tap); only
``adapter`` imports tensorrt_llm, lazily, when an audit uses this engine.
"""
