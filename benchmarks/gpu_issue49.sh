#!/bin/bash
# Everything issue 49 measured on a lent GPU, in order of importance, each part under its own time limit, within
# about TOTAL seconds; logs and JSON under $OUT. Run from the repository root:
#     OUT=/some/folder bash benchmarks/gpu_issue49.sh
# Wheels the machine lacks (transformers at the pinned version, datasets and its needs) are installed from ../.whl
# when that folder is there; PTB (for part 4) is read from ./ptb/ptb.{train,valid}.txt[.gz] when there.
# SMALL=1 rehearses the script on a CPU: tiny sizes, no GPU. PARTS picks parts (default all:
# tests,bench,embed,profile,ptb); PTB_BATCH is part 4's batch (default 512).
set -u -o pipefail
PARTS=${PARTS:-tests,bench,embed,profile,ptb}
want() { [[ ",$PARTS," == *",$1,"* ]]; }
OUT=${OUT:?set OUT to a folder for the logs}
SMALL=${SMALL:-0}
TOTAL=${TOTAL:-520}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PY:-python3}
START=$(date +%s)
left() { echo $(( TOTAL - ($(date +%s) - START) )); }
part() { echo; echo "=== $1 (at $(( $(date +%s) - START )) s, $(left) s left)"; }

part "0. machine and packages"
if [ -d ../.whl ] && [ "$SMALL" = 0 ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade ../.whl/*.whl 2>&1 | tail -3
fi
for f in ptb/*.gz; do [ -e "$f" ] && gunzip -kf "$f"; done
(nvidia-smi || true) 2>&1 | tee "$OUT/nvidia-smi.txt" | head -15
$PY -c "import torch, transformers, accelerate, h5py, pyarrow; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'accelerate', accelerate.__version__, 'pyarrow', pyarrow.__version__)
import importlib.util as u; print('triton', u.find_spec('triton') is not None, 'datasets', u.find_spec('datasets') is not None)" \
    2>&1 | tee "$OUT/env.txt"

if want tests; then
part "1. exact: tests/test_cuda.py (and the graph kernel's CPU tests)"
timeout 230 $PY -m pytest -q -p no:randomly -p no:cacheprovider -rs --durations=8 tests/test_cuda.py \
    tests/test_lstm_graph.py -k "not interpreter" 2>&1 | tee "$OUT/tests.log"
echo "tests exit: $?"
fi

MODEL=/tmp/g49/original
if want bench; then
part "2. fast: bench_speed.py --sections gpu (original size)"
if [ "$SMALL" = 1 ]; then
    $PY -c "import torch; from elmo_hf.modeling_elmo import ElmoModel, ElmoConfig; from elmo_hf.tokenization import ElmoTokenizer
torch.manual_seed(0); ElmoModel(ElmoConfig.from_preset('tiny')).save_pretrained('/tmp/g49/original')
ElmoTokenizer().save_pretrained('/tmp/g49/original')" >/dev/null 2>&1
    BENCH="--model /tmp/g49/original --device cpu --gpu_batches 4,8 --peak_size 256 --repeats 2"
else
    BENCH="--work_dir /tmp/g49 --device cuda --gpu_batches 32,128,512 --repeats 5"
fi
timeout 200 $PY benchmarks/bench_speed.py --sections gpu $BENCH --json "$OUT/speed.json" 2>"$OUT/speed.log" >/dev/null
echo "bench exit: $?"
grep -A40 "matmul peak TFLOP/s:" "$OUT/speed.log" | grep -v "bench_speed:" | head -40
fi

if want embed && [ -f ptb/ptb.valid.txt ]; then
part "2b. the elmo-embed command at its own batch (PTB validation, --top)"
    for dtype in float32 bfloat16; do
        device=cuda; [ "$SMALL" = 1 ] && device=cpu
        s=$(date +%s.%N)
        timeout 60 $PY -m elmo_hf.cli embed ptb/ptb.valid.txt "/tmp/g49/embed-$dtype.hdf5" --model $MODEL --top \
            --device $device --dtype $dtype --quiet --overwrite 2>&1 | tail -3
        rc=$?
        e=$(date +%s.%N)
        $PY -c "
lines = open('ptb/ptb.valid.txt').read().splitlines(); tokens = sum(len(l.split()) + 2 for l in lines)
print(f'elmo-embed $dtype exit $rc: {len(lines)} lines, {tokens} tokens, {$e - $s:.1f} s, {tokens / ($e - $s):,.0f} tokens/s')" \
            | tee -a "$OUT/embed.log"
    done
fi

if want profile && [ "$SMALL" = 0 ]; then
part "2c. where a forward's time goes (torch profiler)"
timeout 120 $PY benchmarks/profile_gpu_forward.py --work_dir /tmp/g49 --batch 128 2>&1 | tee "$OUT/profile.log" \
    | grep -E "^===|Self CUDA time total|Self CPU time total" 
fi

if want ptb && [ -f ptb/ptb.train.txt ]; then
part "4. PTB, preset small, time-boxed"
    budget=$(( $(left) - 15 ))
    [ "$SMALL" = 1 ] && budget=40
    if [ "$budget" -gt 30 ]; then
        preset=small; steps=100000; batch=${PTB_BATCH:-512}; eval_steps=200
        [ "$SMALL" = 1 ] && preset=tiny && batch=8 && eval_steps=5
        echo "training for at most $budget s"
        timeout -s INT -k 20 "$budget" $PY -m elmo_hf.cli pretrain --train_file ptb/ptb.train.txt \
            --validation_file ptb/ptb.valid.txt --output_dir /tmp/g49/ptb-$preset --overwrite_output_dir \
            --preset $preset --per_device_batch_size $batch --unroll_steps 20 --max_steps $steps \
            --eval_steps $eval_steps --max_eval_batches 0 --logging_steps 50 --mixed_precision bf16 \
            --report_to none --disable_tqdm 2>&1 | grep -v "it/s\]" | tee "$OUT/ptb.log" | grep -E "step [0-9]+:|perplexity|Error|error" | tail -20
        cp /tmp/g49/ptb-$preset/train_log.jsonl "$OUT/ptb_train_log.jsonl" 2>/dev/null
    fi
fi
part "done"
