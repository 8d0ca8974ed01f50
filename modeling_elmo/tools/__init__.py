"""The tools around the ELMo model: the one loader of every command (`loading.load_elmo`), the commands' options
(`command_options.py`, standard library only: `train/tool_commands.py` parses them first), the converters of the
original weights (`convert.py`, the `elmo-convert` command, dispatching to `convert_allennlp_elmo.py` and
`convert_elmoformanylangs.py`, which share `convert_common.py`), downloads, `elmo-embed`, `elmo-analyze`, sentence
vectors and sharing on the Hub.

Nothing in this subpackage travels to the Hub as remote code: the model files flat in `modeling_elmo/` never import
it (a test checks), so these tools may use h5py, datasets, pyarrow and tqdm.
"""
