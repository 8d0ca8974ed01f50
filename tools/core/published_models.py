"""AllenNLP's published English ELMo models: their names, where their files are, and what was reported for them.

The standard library only: `elmo-convert --help` lists the names from here before anything heavy is imported
(`command_options`), and `download` fetches the files.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where AllenNLP publishes the files (https://allennlp.org/elmo, and the bilm-tf README for the vocabulary).
DEFAULT_BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
BASE_URL_ENV = "ELMO_HF_BASE_URL"  # another mirror, or a local server in tests
CACHE_ENV = "ELMO_HF_CACHE"

# The vocabulary of the 1B Word Benchmark used to train small, medium and original (793,471 tokens, including
# <S>, </S> and <UNK>; bilm-tf README). The 5.5B model's vocabulary was not published.
VOCAB_PATH = "vocab-2016-09-10.txt"

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


@dataclass(frozen=True)
class PublishedModel:
    """One of AllenNLP's English ELMo models: where its files are and what was reported for it.

    The architecture's sizes are those of `preset` in `elmo_hf.modeling_elmo.configuration_elmo.PRESETS`, written once
    there. `options_bytes`/`weights_bytes` are the exact sizes where a public
    download log shows them (None otherwise: the server's Content-Length is then the only size check).
    `parameters` counts the floats of the weight file (the softmax is not published); the figures in `reported` are
    AllenNLP's (allennlp.org/elmo) and the paper's.
    """

    name: str
    folder: str  # under the base URL; the files are elmo_{folder}_options.json and elmo_{folder}_weights.hdf5
    preset: str  # the name in configuration_elmo.PRESETS of the same architecture
    parameters: int
    training_data: str
    reported: dict[str, str]
    options_bytes: int | None = None
    weights_bytes: int | None = None
    has_vocab: bool = True

    @property
    def options_path(self) -> str:
        return f"{self.folder}/elmo_{self.folder}_options.json"

    @property
    def weights_path(self) -> str:
        return f"{self.folder}/elmo_{self.folder}_weights.hdf5"


_ONE_BILLION = "1B Word Benchmark (about 800M tokens of WMT 2011 news crawl)"

PUBLISHED_MODELS: dict[str, PublishedModel] = {
    model.name: model
    for model in (
        PublishedModel(
            name="small",
            folder="2x1024_128_2048cnn_1xhighway",
            preset="small",
            parameters=13_593_296,
            training_data=_ONE_BILLION,
            reported={"SRL F1": "83.62", "constituency parsing F1": "93.12"},
        ),
        PublishedModel(
            name="medium",
            folder="2x2048_256_2048cnn_1xhighway",
            preset="medium",
            parameters=28_027_728,
            training_data=_ONE_BILLION,
            reported={"SRL F1": "84.04", "constituency parsing F1": "93.60"},
        ),
        PublishedModel(
            name="original",
            folder="2x4096_512_2048cnn_2xhighway",
            preset="original",
            parameters=93_600_848,
            training_data=_ONE_BILLION,
            reported={
                "SRL F1": "84.63",
                "constituency parsing F1": "93.85",
                # Peters et al. 2018, Table 1 (test sets) and section 3.4
                "SQuAD F1": "85.8",
                "SNLI accuracy": "88.7",
                "coreference F1": "70.4",
                "CoNLL 2003 NER F1": "92.22",
                "SST-5 accuracy": "54.7",
                "1B Word perplexity (mean of forward and backward)": "39.7",
            },
            options_bytes=336,
            weights_bytes=374_434_792,
        ),
        PublishedModel(
            name="original-5.5b",
            folder="2x4096_512_2048cnn_2xhighway_5.5B",
            preset="original",
            parameters=93_600_848,
            training_data="5.5B tokens: Wikipedia (1.9B) and WMT 2008-2012 news crawl (3.6B)",
            reported={"SRL F1": "84.93", "constituency parsing F1": "94.01"},
            has_vocab=False,
        ),
    )
}
