"""The recipes of docs/chinese.md that the page cannot run (they need the published sets and a Chinese biLM), run here
as written on small files in the sets' published layouts: CMRC 2018's SQuAD JSON, C3 converted to rows of endings,
MSRA's character-a-line columns (a full-width-space line among them, removed by the page's own Python), LCQMC's
headerless TSV and THUCNews's folder a category. Each command of a block runs through its console script's frame
(`conftest.run_cli`) with the tiny preset in place of `my-zh-elmo` and one training step; what it read is checked
(the labels, the pairs, the characters), so that a recipe whose options read the file wrong fails here.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from conftest import _working_directory as working_directory
from test_readme import code_blocks

pytestmark = pytest.mark.slow  # fine-tuning commands on the tiny preset, a step each

PAGE = REPO / "docs" / "chinese.md"
ONE_STEP = ["--use_cpu", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true", "--max_steps", "1",
            "--per_device_train_batch_size", "2", "--seed", "0"]
CONTEXT = "北京大学位于北京市海淀区，创建于1898年。"
QUESTIONS = [("q1", "北京大学创建于哪一年？", "1898"), ("q2", "北京大学位于哪里？", "北京市海淀区")]


def _squad(rows: list[tuple[str, str, str]]) -> str:
    qas = [{"id": id_, "question": question, "answers": [{"text": answer, "answer_start": CONTEXT.index(answer)}]}
           for id_, question, answer in rows]
    return json.dumps({"version": "v1.0", "data": [{"title": "北大", "paragraphs": [
        {"context": CONTEXT, "qas": qas}]}]}, ensure_ascii=False)


def _msra(sentences: list[list[tuple[str, str]]]) -> str:
    return "\n".join("\n".join(f"{char} {tag}" for char, tag in sentence) + "\n" for sentence in sentences)


MSRA = [[("中", "B-ORG"), ("国", "I-ORG"), ("银", "I-ORG"), ("行", "I-ORG"), ("在", "O"), ("北", "B-LOC"),
         ("京", "I-LOC")],
        [("\u3000", "O"), ("张", "B-PER"), ("三", "I-PER"), ("去", "O"), ("上", "B-LOC"), ("海", "I-LOC")]]
LCQMC = ("喜欢打篮球的男生喜欢什么样的女生\t爱打篮球的男生喜欢什么样的女生\t1\n"
         "我手机丢了，我想换个手机\t我想买个新手机，求推荐\t1\n"
         "大家觉得她好看吗\t大家觉得跑男好看吗？\t0\n"
         "求秋色之空漫画全集\t求秋色之空全集漫画\t1\n")
DIALOGUE = "男：你今天去哪儿了？女：我去北京大学看朋友了。"


def write_published_files(folder: Path) -> None:
    """Each set's files in the layout its authors publish (C3 as the page's conversion leaves it)."""
    (folder / "cmrc2018_train.json").write_text(_squad(QUESTIONS), encoding="utf-8")
    (folder / "cmrc2018_dev.json").write_text(_squad(QUESTIONS[:1]), encoding="utf-8")
    c3 = [{"context": DIALOGUE + "女的去哪儿了？", "endings": ["北京大学", "医院", "商店", "医院"], "label": 0},
          {"context": DIALOGUE + "女的去做什么？", "endings": ["看朋友", "上课", "上课", "上课"], "label": 0}]
    for name in ("c3-train.jsonl", "c3-dev.jsonl"):
        (folder / name).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in c3), encoding="utf-8")
    for name in ("msra_train_bio", "msra_test_bio"):
        (folder / name).write_text(_msra(MSRA), encoding="utf-8")
    (folder / "news.txt").write_text("李四在广州工作。\n", encoding="utf-8")
    (folder / "lcqmc").mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (folder / "lcqmc" / name).write_text(LCQMC, encoding="utf-8")
    for category, text in (("体育", "中国队在比赛中获得冠军。"), ("财经", "股市今天上涨了百分之二。")):
        (folder / "THUCNews" / category).mkdir(parents=True)
        for number in range(10):  # the tenth goes to the validation file
            (folder / "THUCNews" / category / f"{number}.txt").write_text(f"{text}\n第{number}篇。\n", encoding="utf-8")


def recipe_blocks() -> list[dict]:
    """The page's blocks that it does not run and that name files this test writes: the conversions (Python) and the
    commands (bash), in the page's order."""
    return [block for block in code_blocks(PAGE) if block["not_run"] is not None]


def commands_of(code: str) -> list[list[str]]:
    """The commands of a bash block, a line continued by a backslash joined to the next."""
    return [shlex.split(line) for line in code.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def recipes(tmp_path_factory) -> dict[str, dict]:
    """Every not-run block of the page, run in order in one folder: the output folder of each command -> its exit
    status, its stderr and the folder."""
    folder = tmp_path_factory.mktemp("chinese-recipes")
    write_published_files(folder)
    runs = {}
    for block in recipe_blocks():
        if block["language"] == "python":
            with working_directory(folder):  # the page's Python works in the folder of the files, as a reader's does
                exec(compile(block["code"], f"{PAGE.name}:{block['line']}", "exec"), {"__name__": "__main__"})
            continue
        for words in commands_of(block["code"]):
            name, argv = words[0], ["tiny" if word == "my-zh-elmo" else word for word in words[1:]]
            done = run_cli(name, [*argv, *ONE_STEP], cwd=folder)
            output = argv[argv.index("--output_dir") + 1]
            runs[output] = {"status": done.returncode, "stderr": done.stderr, "folder": folder / output}
    return runs


def _config(run: dict) -> dict:
    return json.loads((run["folder"] / "config.json").read_text(encoding="utf-8"))


def test_every_recipe_of_the_page_runs_as_written(recipes, monkeypatch):
    blocks = recipe_blocks()
    assert len(blocks) >= 7, [block["line"] for block in blocks]  # the page's seven not-run recipes at least
    assert set(recipes) == {"my-cmrc", "my-c3", "my-msra", "my-msra-tags", "my-lcqmc", "my-thucnews"}
    for output, run in recipes.items():
        assert run["status"] == 0, f"{output}:\n{run['stderr'][-4000:]}"
        assert "Traceback" not in run["stderr"], output


def test_cmrc_is_scored_on_characters(recipes):
    results = json.loads((recipes["my-cmrc"]["folder"] / "all_results.json").read_text(encoding="utf-8"))
    assert results["eval_scoring"].startswith("characters") and "eval_exact_match" in results


def test_c3_rows_are_read_as_four_endings(recipes):
    run = recipes["my-c3"]
    assert _config(run)["architectures"] == ["ElmoForMultipleChoice"]
    assert "eval_accuracy" in json.loads((run["folder"] / "all_results.json").read_text(encoding="utf-8"))


def test_msra_reads_characters_and_their_tags_and_tags_new_text(recipes):
    """The page's Python removed the full-width-space line (a line with no word); the tagger learned MSRA's tags and
    tags a new line a character at a time."""
    assert sorted(_config(recipes["my-msra"])["label2id"]) == ["B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER",
                                                               "O"]
    predictions = (recipes["my-msra-tags"]["folder"] / "predictions.txt").read_text(encoding="utf-8").split()
    assert [word for word in predictions if not re.fullmatch(r"[BIO](-[A-Z]+)?", word)] == list("李四在广州工作。")


def test_lcqmc_is_read_as_pairs_with_two_labels(recipes):
    """--column_names text,text_pair,label on the headerless TSV: each row a pair of questions, labels 0 and 1 (the
    first row is data, not a header)."""
    run = recipes["my-lcqmc"]
    config = _config(run)
    assert sorted(config["label2id"]) == ["0", "1"] and config["pair_combination"] is not None
    assert "4 training and 4 validation examples" in run["stderr"], run["stderr"][-3000:]


def test_thucnews_categories_are_the_labels_and_no_article_is_in_both_files(recipes):
    run = recipes["my-thucnews"]
    assert sorted(_config(run)["label2id"]) == ["体育", "财经"]
    assert "18 training and 2 validation examples" in run["stderr"], run["stderr"][-3000:]
