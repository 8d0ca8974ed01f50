"""A model loaded as remote code (without the project) and saved again: its folder opens with every Auto class its
config.json names. transformers fetches only the files of the classes loaded, so the heads' file of a folder loaded
as `AutoModel` must be found elsewhere or left out of the `auto_map`, with a warning naming what was left out."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import run_isolated, tiny_model

HEADS = ["AutoModelForSequenceClassification", "AutoModelForTokenClassification"]


@pytest.mark.slow
def test_a_model_loaded_as_remote_code_saves_a_folder_that_opens_with_its_auto_map(tmp_path):
    tiny_model().save_pretrained(tmp_path / "base")
    shutil.copytree(tmp_path / "base", tmp_path / "headless")
    code = f"""
import json, logging, os
os.environ["HF_MODULES_CACHE"] = {str(tmp_path / "modules")!r}
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoModelForTokenClassification

class Warnings(logging.Handler):
    records = []
    def emit(self, record):
        self.records.append(record.getMessage())
logging.getLogger().addHandler(Warnings(logging.WARNING))

def resave(source, target):
    model = AutoModel.from_pretrained(source, trust_remote_code=True)
    if source == "headless":  # the heads' file is nowhere: not in the module cache, not in the source folder
        os.remove("headless/modeling_elmo_heads.py")
    Warnings.records.clear()
    model.save_pretrained(target)
    left_out = [m for m in Warnings.records if "auto_map" in m]
    return json.load(open(target + "/config.json"))["auto_map"], left_out

# only AutoModel's files were loaded: the heads' file comes from the folder the model was loaded from
auto_map, left_out = resave("base", "resaved")
assert left_out == [], left_out
for auto in (AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoModelForTokenClassification):
    assert auto.__name__ in auto_map, auto_map
    assert type(auto.from_pretrained("resaved", trust_remote_code=True)).__module__.startswith("transformers_modules")

auto_map, left_out = resave("headless", "resaved_headless")
print(json.dumps({{"auto_map": auto_map, "left_out": left_out}}))
for auto in (AutoConfig, AutoModel):
    auto.from_pretrained("resaved_headless", trust_remote_code=True)
"""
    result = run_isolated(code, cwd=tmp_path)
    headless = json.loads(result.stdout.strip().splitlines()[-1])
    assert not set(HEADS) & set(headless["auto_map"]) and "AutoModel" in headless["auto_map"]
    assert len(headless["left_out"]) == 1 and all(auto in headless["left_out"][0] for auto in HEADS)
    assert "modeling_elmo_heads.py" in headless["left_out"][0]
    assert not (tmp_path / "resaved_headless" / "modeling_elmo_heads.py").exists()
