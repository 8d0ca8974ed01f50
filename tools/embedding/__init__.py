"""Embedding: `elmo-embed` (its options resolved once into a frozen plan), its readers and writers, worker processes and
Ray, and sentence vectors."""
