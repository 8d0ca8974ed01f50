"""The values each choice field of `ElmoConfig` may take: one table, which the configuration's own checks read
(`configuration_elmo.py`) and so do the commands' options (`elmo_hf.tools.core.config_choices` runs this file alone,
without importing the model package, which imports torch), so that a command refuses another value when its command
line is parsed, listing these choices, in the time Python takes to start.

Standard library only, importing nothing: it travels to the Hub as remote code with the configuration.
"""

# The transition rules `ElmoForTokenClassification`'s CRF may follow (`crf_elmo.allowed_transitions`): "auto" reads
# them from the label names.
CRF_CONSTRAINTS = ("auto", "bio", "bioes", "none")

# How `ElmoForSequenceClassification` combines the pooled vectors u, v of a pair's two sentences, and how many of
# them the combination is wide: [u; v; |u - v|; u * v] and [u; v].
PAIR_COMBINATIONS = {"concat_diff_product": 4, "concat": 2}

# field -> its values. `lstm_implementation`'s depend on the kernels this torch has (configuration_elmo reads them
# from kernels_elmo), so they are not here.
CHOICES = {
    "char_cnn_activation": ("relu", "tanh"),
    "token_encoder": ("char_cnn", "word_char"),
    "softmax_type": ("full", "sampled", "adaptive"),
    "scalar_mix": ("learned", "top", "average", "fixed"),
    "classifier_pooling": ("mean", "max", "lstm", "attention"),
    "token_classifier_encoder": ("none", "lstm"),
    "crf_constraints": CRF_CONSTRAINTS,
    "qa_modeling_layer": ("none", "lstm"),
    "pair_combination": tuple(PAIR_COMBINATIONS),
}
