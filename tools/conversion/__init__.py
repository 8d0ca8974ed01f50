"""Conversion: `elmo-convert`, the readers of the original checkpoints (allennlp/bilm-tf, ELMoForManyLangs) and the
downloads of the published models."""
