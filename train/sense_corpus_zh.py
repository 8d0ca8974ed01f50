"""A generated Chinese corpus where polysemous characters occur in two senses each.

The Chinese twin of `train/sense_corpus.py`, for `elmo-demo --language zh`. Everything here is
produced by code: sentence templates per sense of 行 (银行 háng "bank" / 行走 xíng "walk"), 长 (很长 cháng "long" /
长大 zhǎng "grow"), 花 (花园 "flower" / 花钱 "spend"), 打 (打人 "hit" / 打球 "play"), 还 (还在 hái "still" / 还书
huán "return"), 好 (很好 hǎo "good" / 爱好 hào "like"), 觉 (觉得 jué "feel" / 睡觉 jiào "sleep") and 乐 (快乐 lè
"happy" / 音乐 yuè "music"), filled from small word lists, plus sentences without them.

Sentences are written without spaces, as Chinese is; the model's tokenizer makes every ideograph a token of its
own (the default rule, `punctuation`), so the model is trained per character and each polysemous character is one
token whose layer-0 vector is the same in both senses. Every template holds its character exactly once and no
slot word holds any of the eight characters (tested), so a probe's character has one position.
"""

from __future__ import annotations

import random

from elmo_hf.train.sense_corpus import fill_template, probes_from

SLOTS = {
    "name": ["小明", "小红", "李雷", "王芳", "张伟", "刘洋", "陈静", "赵磊"],
    "time": ["今天", "昨天", "明天", "上午", "下午", "晚上", "周末", "星期一"],
    "place": ["学校", "公园", "超市", "图书馆", "车站", "医院", "商店"],
    "food": ["米饭", "面条", "苹果", "饺子", "包子", "西瓜"],
    "animal": ["小狗", "小猫", "小鸟", "兔子"],
    "money": ["一千块钱", "五百元", "三百块", "两万元", "工资"],
    "years": ["三年", "五年", "十年", "两年"],
    "road": ["小路", "河边", "山路", "大街"],
    "city": ["北京", "上海", "杭州", "西安", "成都"],
    "way": ["河", "路", "街", "隧道"],
    "film": ["电影", "小说", "电视剧"],
    "tree": ["小树", "草", "竹子"],
    "season": ["春天", "三月", "四月"],
    "color": ["红色", "白色", "黄色", "紫色"],
    "thing": ["一本书", "一双鞋", "一件衣服", "一台电脑"],
    "hours": ["两个小时", "一个下午", "半天"],
    "ball": ["篮球", "乒乓球", "网球", "排球", "羽毛球"],
    "hobby": ["唱歌", "画画", "跑步", "游泳", "读书", "下棋"],
}

SENSES: dict[str, dict[str, list[str]]] = {
    "行": {
        "bank": [
            "{name}{time}去银行存了{money}。",
            "这家银行的经理叫{name}。",
            "{name}在银行工作了{years}。",
            "{name}从银行取出了{money}。",
            "银行给{name}办了一张新卡。",
            "{name}向银行借了{money}。",
        ],
        "walk": [
            "{name}{time}步行去{place}。",
            "我们沿着{road}慢慢行走。",
            "{name}{time}去{city}旅行。",
            "{name}带着行李去了{city}。",
            "{name}一个人行走在{road}上。",
            "{name}每天步行去{place}。",
        ],
    },
    "长": {
        "long": [
            "这条{way}很长。",
            "{name}的头发很长。",
            "{name}{time}去爬长城。",
            "{name}{time}去看了长江。",
            "这部{film}太长了。",
            "{name}等了很长时间。",
        ],
        "grow": [
            "{name}{time}见到了校长。",
            "{name}{time}长高了。",
            "{name}的爸爸是我们的校长。",
            "{name}是在{city}长大的。",
            "{tree}长出了新叶子。",
            "{name}想当班长。",
        ],
    },
    "花": {
        "flower": [
            "{name}在花园里浇水。",
            "{time}公园里的花都开了。",
            "{name}送给妈妈一束花。",
            "{name}家的花园很美。",
            "{season}桃树开花了。",
            "这朵花是{color}的。",
        ],
        "spend": [
            "{name}花了{money}买{thing}。",
            "做作业花了{name}{hours}。",
            "{name}不想花钱买{thing}。",
            "{name}花时间学习中文。",
            "{name}每天花{hours}看书。",
        ],
    },
    "打": {
        "hit": [
            "{name}生气地打了{animal}一下。",
            "{name}说不要打人。",
            "那个孩子打了{name}。",
            "{name}被坏人打伤了。",
            "两个孩子在{place}打架。",
        ],
        "play": [
            "{name}{time}和朋友打{ball}。",
            "{name}很喜欢打{ball}。",
            "{name}每个周末都去打{ball}。",
            "我们下课以后去打{ball}吧。",
        ],
    },
    "还": {
        "still": [
            "{name}还在{place}。",
            "{name}还没有吃饭。",
            "{name}{time}还要去{place}。",
            "天还没亮，{name}就起床了。",
            "{name}还想再吃一点{food}。",
        ],
        "return": [
            "{name}{time}去图书馆还书。",
            "{name}把{money}还给了朋友。",
            "{name}说借的东西要按时还。",
            "{name}把雨伞还给了{name}。",
            "{name}{time}还清了欠朋友的钱。",
        ],
    },
    "好": {
        "good": [
            "{time}的天气很好。",
            "{name}是一个好学生。",
            "这里的{food}很好吃。",
            "{name}的身体很好。",
            "{name}和{name}是好朋友。",
        ],
        "like": [
            "{name}的爱好是{hobby}。",
            "{name}对什么都很好奇。",
            "{name}有很多爱好。",
            "{animal}好奇地看着{name}。",
            "{name}的好奇心很强。",
        ],
    },
    "觉": {
        "feel": [
            "{name}觉得{food}很香。",
            "{name}觉得这本书很有意思。",
            "{name}感觉有点冷。",
            "{name}{time}觉得很累。",
            "我觉得{name}说得对。",
        ],
        "sleep": [
            "{name}{time}睡了一觉。",
            "{name}每天中午睡午觉。",
            "{name}在{place}睡觉。",
            "睡觉以前{name}刷了牙。",
            "{animal}在沙发上睡觉。",
        ],
    },
    "乐": {
        "happy": [
            "祝{name}生日快乐。",
            "{name}过得很快乐。",
            "{name}是一个乐观的人。",
            "{name}{time}玩得很快乐。",
        ],
        "music": [
            "{name}喜欢听音乐。",
            "{name}{time}去听音乐会。",
            "{name}会弹很多种乐器。",
            "{name}在乐队里弹吉他。",
            "{name}在学习音乐。",
        ],
    },
}

# Pinyin of each character in each sense, and a word that shows the sense: the plot's labels.
READINGS: dict[str, dict[str, str]] = {
    "行": {"bank": "háng", "walk": "xíng"},
    "长": {"long": "cháng", "grow": "zhǎng"},
    "花": {"flower": "huā", "spend": "huā"},
    "打": {"hit": "dǎ", "play": "dǎ"},
    "还": {"still": "hái", "return": "huán"},
    "好": {"good": "hǎo", "like": "hào"},
    "觉": {"feel": "jué", "sleep": "jiào"},
    "乐": {"happy": "lè", "music": "yuè"},
}
EXAMPLES: dict[str, dict[str, str]] = {
    "行": {"bank": "银行", "walk": "行走"},
    "长": {"long": "长城", "grow": "长大"},
    "花": {"flower": "花园", "spend": "花钱"},
    "打": {"hit": "打人", "play": "打球"},
    "还": {"still": "还在", "return": "还书"},
    "好": {"good": "很好", "like": "爱好"},
    "觉": {"feel": "觉得", "sleep": "睡觉"},
    "乐": {"happy": "快乐", "music": "音乐"},
}

FILLER = [
    "{name}{time}在{place}吃{food}。",
    "{animal}跑到了{place}。",
    "{name}和{name}在{place}见面。",
    "{name}在{place}买了{food}。",
    "{name}{time}坐车去{place}。",
]


def word_label(char: str, cjk: bool) -> str:
    """The plot's name for a character: `行 háng / xíng` with a CJK font, `háng / xíng` without one."""
    readings = " / ".join(dict.fromkeys(READINGS[char].values()))
    return f"{char} {readings}" if cjk else readings


def sense_label(char: str, sense: str, cjk: bool) -> str:
    """The plot's name for a sense: `háng (bank, 银行)` with a CJK font, `háng (bank)` without one."""
    reading = READINGS[char][sense]
    return f"{reading} ({sense}, {EXAMPLES[char][sense]})" if cjk else f"{reading} ({sense})"


def _fill(template: str, rng: random.Random) -> str:
    return fill_template(template, SLOTS, rng)


def generate_corpus(num_sentences: int, seed: int = 0, filler_fraction: float = 0.3) -> list[str]:
    """Sentences, one per item: every sense equally often, with `filler_fraction` of other sentences."""
    rng = random.Random(seed)
    senses = [templates for by_sense in SENSES.values() for templates in by_sense.values()]
    sentences = []
    for _ in range(num_sentences):
        pool = FILLER if rng.random() < filler_fraction else rng.choice(senses)
        sentences.append(_fill(rng.choice(pool), rng))
    return sentences


def generate_probes(per_sense: int, seed: int = 1) -> list[tuple[str, str, str]]:
    """Held-out `(character, sense, sentence)` triples: sentences with the character in a known sense."""
    return probes_from(SENSES, _fill, per_sense, seed)
