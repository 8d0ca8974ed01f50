"""A word split of a user's own, for tests/test_matrix.py's `custom_split` kind: a function at the top of an
importable module, named on the command line as `matrix_splits:lowercase_words`."""

import re


def lowercase_words(text: str) -> list[str]:
    """Lower-cased runs of letters and digits, and each other visible character alone."""
    return re.findall(r"\w+|[^\w\s]", text.lower())
