"""The one build step pyproject.toml cannot say: a wheel carries the top-level `model_card.md` (the model card
template) inside `elmo_hf/tools/`, where `elmo_hf.tools.hub.model_card` looks for it beside the repository's own."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithModelCard(build_py):
    def run(self):
        super().run()
        if not self.editable_mode:  # an editable install reads the repository's own file
            target = Path(self.build_lib) / "elmo_hf" / "tools" / "model_card.md"
            target.write_bytes((Path(__file__).parent / "model_card.md").read_bytes())


setup(cmdclass={"build_py": BuildWithModelCard})
