"""Where a forward of the original-size model spends its time on a GPU: torch's profiler over a few forwards of one
batch, per route (the packed loop in float32, the graph kernel in bfloat16), the kernels by GPU time and the share of
the wall time the GPU was busy (issue 49).

    python benchmarks/profile_gpu_forward.py --work_dir /tmp/g49 --batch 128    # or --model FOLDER
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_speed import original_model_dir, sentences  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work_dir", type=Path, default=Path("/tmp/g49"))
    parser.add_argument("--model", type=Path, default=None, help="an original-size folder (default: built in WORK_DIR)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    from elmo_hf.modeling_elmo import ElmoModel
    from elmo_hf.tokenization import ElmoTokenizer

    folder = args.model or original_model_dir(args.work_dir)
    model = ElmoModel.from_pretrained(folder).cuda().eval()
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    batch = tokenizer(sentences(16, 24, args.batch), is_split_into_words=True, padding=True, return_tensors="pt")
    batch = batch.to("cuda")
    tokens = int(batch["attention_mask"].sum())
    for name, implementation, dtype in (("float32, loop", "loop", torch.float32),
                                        ("bfloat16, graph", "graph", torch.bfloat16)):
        model.config.lstm_implementation = implementation
        autocast = torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32)
        with torch.inference_mode(), autocast:
            for _ in range(2):
                model(**batch)
            torch.cuda.synchronize()
            activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=activities) as profile:
                start = time.perf_counter()
                for _ in range(args.calls):
                    model(**batch)
                torch.cuda.synchronize()
                wall = time.perf_counter() - start
        events = profile.key_averages()
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]  # not the aten ops too
        busy = sum(e.self_device_time_total for e in kernels) / 1e6
        print(f"\n=== {name}: batch {args.batch}, {tokens} tokens, {1e3 * wall / args.calls:.1f} ms a forward "
              f"({tokens * args.calls / wall:,.0f} tokens/s), GPU busy {1e3 * busy / args.calls:.1f} ms "
              f"({100 * busy / wall:.0f}% of the wall time)")
        print(events.table(sort_by="self_device_time_total", row_limit=14, max_name_column_width=60))


if __name__ == "__main__":
    main()
