"""The x86 kernel levels older than a CPU's own that torch can be capped to, and how: one environment per level.

torch picks its CPU kernels by what the processor has: ATen's vectorised operations (`ATEN_CPU_CAPABILITY`), oneDNN's
multiplies (`ONEDNN_MAX_CPU_ISA`), MKL's (`MKL_ENABLE_INSTRUCTIONS`) and fbgemm's int8 ones
(`FBGEMM_ENABLE_INSTRUCTIONS`). These variables are read when torch loads, so a capped run is a fresh interpreter:
`tests/test_cpu_branches.py` and `tests/run_numerics.py` start them.
"""

from __future__ import annotations

import torch

# From the oldest: the spelling of each level for ATen, oneDNN, MKL and fbgemm.
LEVELS = {
    "DEFAULT": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"},
    "AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"},
}
HERE = torch.backends.cpu.get_cpu_capability()  # DEFAULT, AVX2, AVX512 (x86); NEON, SVE..., ZVECTOR elsewhere
BELOW_HERE = list(LEVELS)[: list(LEVELS).index(HERE)] if HERE in LEVELS else \
    list(LEVELS) if HERE.startswith("AVX512") else []
