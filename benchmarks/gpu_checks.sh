#!/bin/bash
# What a lent GPU checks and measures (issues 49 and 57), in order of importance, each part under its own time
# limit, within about TOTAL seconds; logs and JSON under $OUT. Run from the repository root:
#     OUT=/some/folder bash benchmarks/gpu_checks.sh
# The machine has torch with CUDA but not this project: elmo_hf is linked from this checkout's folders and named in a
# .pth file of that Python (so that the processes the tests start find it too), and the wheels in ./.whl
# (transformers at the tested version, datasets and its needs) are installed over the machine's.
# PTB (the embed command and part 5) is read from ./ptb/ptb.{train,valid,test}.txt when there. SMALL=1 rehearses the
# script on a CPU: tiny sizes, no GPU. PARTS picks parts (default: tests,slow_tests,cnn,bench,profile,onnx,embed,ptb);
# GPU_BATCHES are the bench's sentences per batch (default 32,128,512).
set -u -o pipefail
PARTS=${PARTS:-tests,slow_tests,cnn,bench,profile,onnx,embed,ptb}
want() { [[ ",$PARTS," == *",$1,"* ]]; }
OUT=${OUT:?set OUT to a folder for the logs}
SMALL=${SMALL:-0}
TOTAL=${TOTAL:-540}
WORK=${WORK:-/tmp/gpu_checks}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
PY=${PY:-python3}
START=$(date +%s)
left() { echo $(( TOTAL - ($(date +%s) - START) )); }
part() { echo; echo "=== $1 (at $(( $(date +%s) - START )) s, $(left) s left)"; }
device=cuda; [ "$SMALL" = 1 ] && device=cpu

part "0. machine, packages, elmo_hf"
mkdir -p "$WORK/pkg/elmo_hf"
for folder in cli modeling_elmo tokenization tools train; do ln -sfn "$PWD/$folder" "$WORK/pkg/elmo_hf/$folder"; done
if [ "$SMALL" = 0 ]; then
    echo "$WORK/pkg" > "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/elmo_hf_checkout.pth"
    [ -d .whl ] && $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade .whl/*.whl 2>&1 \
        | tail -3
else
    export PYTHONPATH="$WORK/pkg"
fi
(nvidia-smi || true) 2>&1 | tee "$OUT/nvidia-smi.txt" | head -12
$PY -c "import torch, transformers, accelerate, h5py, pyarrow, elmo_hf.modeling_elmo as m
print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__,
      'pyarrow', pyarrow.__version__, 'elmo_hf from', m.__path__[0])
import importlib.util as u; print('triton', u.find_spec('triton') is not None, 'datasets', u.find_spec('datasets') is not None)" \
    2>&1 | tee "$OUT/env.txt"

MODEL=$WORK/original
preset=original; [ "$SMALL" = 1 ] && preset=tiny
$PY -c "import torch; from elmo_hf.modeling_elmo import ElmoModel, ElmoConfig; from elmo_hf.tokenization import ElmoTokenizer
torch.manual_seed(0); ElmoModel(ElmoConfig.from_preset('$preset')).save_pretrained('$MODEL')
ElmoTokenizer().save_pretrained('$MODEL')" >/dev/null 2>&1 || echo "could not build the $preset model"

if want tests; then
part "1. exact: tests/test_cuda.py (not the slow ones) and the graph kernel's and the window CNN's CPU tests"
timeout 120 $PY -m pytest -q -p no:randomly -p no:cacheprovider -rs --durations=5 -m "not slow" tests/test_cuda.py \
    tests/test_lstm_graph.py tests/test_fast_paths.py -k "not interpreter and (cuda or graph or window)" 2>&1 \
    | tee "$OUT/tests.log" | tail -15
echo "tests exit: $?"
fi

if want slow_tests; then
part "1b. exact: tests/test_cuda.py's slow ones (elmo-embed and training with one and two processes on the GPU)"
timeout 100 $PY -m pytest -q -p no:randomly -p no:cacheprovider -rs --durations=5 -m slow tests/test_cuda.py 2>&1 \
    | tee "$OUT/slow_tests.log" | tail -8
echo "slow tests exit: $?"
fi

if want cnn; then
part "2a. the character CNN alone, by kernel"
CNN="--tokens 2798 11305"; [ "$SMALL" = 1 ] && CNN="--device cpu --tokens 64 --repeats 2 --preset tiny"
timeout 60 $PY benchmarks/bench_char_cnn_gpu.py $CNN 2>&1 | tee "$OUT/cnn.log" | grep "^|"
fi

if want bench; then
part "2. fast: bench_speed.py --sections gpu (original size, random weights and words)"
BENCH="--device $device --gpu_batches ${GPU_BATCHES:-32,128,512} --repeats 5"
[ "$SMALL" = 1 ] && BENCH="--device cpu --gpu_batches 4,8 --peak_size 256 --repeats 2"
timeout ${BENCH_LIMIT:-200} $PY benchmarks/bench_speed.py --sections gpu --model "$MODEL" $BENCH --json "$OUT/speed.json" \
    2>"$OUT/speed.log" >/dev/null
echo "bench exit: $?"
grep -A40 "matmul peak TFLOP/s:" "$OUT/speed.log" | grep -v "bench_speed:" | head -40
fi

if want profile && [ "$SMALL" = 0 ]; then
part "3. where a forward's time goes (torch profiler), 128 and 512 sentences"
for batch in 128 512; do
    timeout 60 $PY benchmarks/profile_gpu_forward.py --model "$MODEL" --batch $batch 2>&1 \
        | tee "$OUT/profile-$batch.log" | grep -E "^===|Self CUDA time total|Self CPU time total"
done
fi

if want onnx; then
part "4. ONNX Runtime's providers here"
$PY -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" 2>&1 \
    | tail -1 | tee "$OUT/onnx.txt"
fi

if want embed && [ -f ptb/ptb.valid.txt ]; then
part "4b. the elmo-embed command at its own batch (PTB validation, --top)"
    for dtype in float32 bfloat16; do
        s=$(date +%s.%N)
        timeout 60 $PY -m elmo_hf.cli embed ptb/ptb.valid.txt "$WORK/embed-$dtype.hdf5" --model "$MODEL" --top \
            --device $device --dtype $dtype --quiet --overwrite 2>&1 | tail -3
        rc=$?
        e=$(date +%s.%N)
        $PY -c "
lines = open('ptb/ptb.valid.txt').read().splitlines(); tokens = sum(len(l.split()) + 2 for l in lines)
print(f'elmo-embed $dtype exit $rc: {len(lines)} lines, {tokens} tokens, {$e - $s:.1f} s, {tokens / ($e - $s):,.0f} tokens/s')" \
            | tee -a "$OUT/embed.log"
    done
fi

if want ptb && [ -f ptb/ptb.train.txt ]; then
part "5. PTB: small without clipping (cuDNN's LSTM), dropout 0.5, the rate decayed to 0, time-boxed"
    # the time left less the data's preparation, the last evaluation, saving and the test set's perplexity
    budget=$(( $(left) - 110 ))
    preset=small; batch=${PTB_BATCH:-256}; eval_steps=100; eval_batches=0
    [ "$SMALL" = 1 ] && budget=40 && preset=tiny && batch=8 && eval_steps=5 && eval_batches=2
    if [ "$budget" -gt 30 ]; then
        $PY -c "from elmo_hf.modeling_elmo import ElmoConfig
ElmoConfig.from_preset('$preset', cell_clip=None, proj_clip=None).save_pretrained('$WORK/ptb-config')"
        echo "training for at most $budget s"
        timeout -s INT -k 20 $(( budget + 60 )) $PY -m elmo_hf.cli pretrain --train_file ptb/ptb.train.txt \
            --validation_file ptb/ptb.valid.txt --output_dir "$WORK/ptb" --overwrite_output_dir \
            --config_file "$WORK/ptb-config/config.json" --dropout 0.5 --per_device_batch_size $batch \
            --unroll_steps 35 --max_train_time ${budget}s --max_steps 100000 --lr_scheduler_type linear \
            --eval_steps $eval_steps --max_eval_batches $eval_batches --logging_steps 50 --mixed_precision bf16 \
            --report_to none --disable_tqdm 2>&1 | grep -v "it/s\]" | tee "$OUT/ptb.log" \
            | grep -E "step [0-9]+:|perplexity|Error|error" | tail -25
        cp "$WORK/ptb/train_log.jsonl" "$OUT/ptb_train_log.jsonl" 2>/dev/null
        timeout 60 $PY benchmarks/quality_ptb.py perplexity --models "$WORK/ptb" --device $device \
            --texts ptb/ptb.test.txt --output "$OUT/ptb_perplexity.json" 2>&1 | tail -2
    fi
fi
part "done"
