"""The tools around the ELMo model: converters of the original weights, downloads, `elmo-embed`, `elmo-analyze`,
sentence vectors and sharing on the Hub.

Nothing in this subpackage travels to the Hub as remote code: the model files flat in `modeling_elmo/` never import
it (a test checks), so these tools may use h5py, datasets, pyarrow and tqdm.
"""
