"""The open registries of ELMo's kernels: every way to run a biLSTM layer, and every way to run the character CNN.

In the manner of transformers' `ALL_ATTENTION_FUNCTIONS`: a kernel registers itself where it is defined, with one
`register` call, and the dispatch looks it up by name (`ElmoBiLm.forward` in `ALL_LSTM_FUNCTIONS`,
`ElmoCharacterEncoder.forward` in `ALL_CHAR_CNN_FUNCTIONS`); `ElmoConfig` checks `lstm_implementation` against
`ALL_LSTM_FUNCTIONS.choices`: the names of the built-in kernels, declared below with the registry so that the
configuration imports no kernel, and every name registered since. A new kernel is one file that defines a function
and registers it:

    >>> from elmo_hf.modeling_elmo.kernels_elmo import ALL_LSTM_FUNCTIONS
    >>> def my_lstm(layer, inputs, batch_sizes, state):  # every LSTM kernel's signature (lstm_inference_elmo.py)
    ...     return layer(inputs, batch_sizes, state)
    >>> ALL_LSTM_FUNCTIONS.register("mine", my_lstm)  # then ElmoConfig(lstm_implementation="mine") runs it

(Written as a session so that no line of this docstring starts with `from`: the import checks that read remote code
line by line, transformers' and tests/test_modeling.py's, would take it for an import.)

Where each built-in kernel lives: "reference", "loop", "fused" in `lstm_inference_elmo.py`, "graph" (padded, CUDA
graphs) in `lstm_graph_elmo.py`, "training" in `lstm_training_elmo.py`; "reference", "onednn", "distinct", "windows" in
`char_cnn_kernels_elmo.py`, "cached" in `token_cache_elmo.py`; "int8" of both kinds in `quantization_elmo.py`.
docs/architecture.md ("Fast paths") says how one is chosen.

This module imports nothing of the package, so that every file may import it without a circle. It travels to the
Hub as remote code with `modeling_elmo.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping


class KernelRegistry(Mapping):
    """Kernels of one layer kind by name: a read-only mapping, filled by `register`."""

    def __init__(self, kind: str, built_in_choices: tuple[str, ...] = ()):
        self.kind = kind
        self._functions: dict[str, Callable] = {}
        # A choice from its declaration on: the built-in kernels' files register their functions when imported
        # (the model imports them all), while a configuration is checked without importing them.
        self._choices: list[str] = list(built_in_choices)

    def register(self, name: str, function: Callable, *, user_choice: bool = True) -> None:
        """Make `function` the kernel called `name` (registering a name again replaces its kernel).

        `user_choice=False` keeps a name out of `choices`: a kernel only the dispatch picks (the LSTM's "training",
        which runs only where its backward pass is written out), not one a configuration may name.
        """
        if not isinstance(name, str) or not name or not callable(function):
            raise ValueError(f"register needs a name and a function, got {name!r} and {function!r}")
        self._functions[name] = function
        if user_choice and name not in self._choices:
            self._choices.append(name)
        elif not user_choice and name in self._choices:
            self._choices.remove(name)

    @property
    def choices(self) -> tuple[str, ...]:
        """The names a configuration may choose: the built-in ones, then those registered since, in order."""
        return tuple(self._choices)

    def __getitem__(self, name: str) -> Callable:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"no {self.kind} kernel {name!r}; registered: {sorted(self._functions)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)


# fn(layer: ElmoBiLstmLayer, inputs (2, N, P) packed, batch_sizes: list[int], state (h, c)) -> (outputs, (h, c))
# The built-in choices: "loop", "fused", "reference" (lstm_inference_elmo.py), "int8" (quantization_elmo.py) and
# "graph" (lstm_graph_elmo.py).
ALL_LSTM_FUNCTIONS = KernelRegistry("lstm", built_in_choices=("loop", "fused", "reference", "int8", "graph"))
# fn(encoder: ElmoCharacterEncoder, char_ids (N, max_characters_per_token)) -> (N, P)
ALL_CHAR_CNN_FUNCTIONS = KernelRegistry("character CNN")
