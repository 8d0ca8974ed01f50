"""Export and the backends: the biLM (and a head) as an ONNX graph (`elmo-export`), the runtimes that run it (ONNX
Runtime, OpenVINO) with the automatic choice, and the standalone runner."""
