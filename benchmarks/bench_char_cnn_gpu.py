"""The character CNN alone on a GPU, by kernel (issue 57): cuDNN's seven convolutions (`encode`, the reference), the
one-multiply window kernel as the library runs it (`encode_windows`: the last positions multiplied apart and masked),
its first form (every position masked), and one cuDNN convolution of the filters padded to the widest. Original
size, random weights, tokens of 1-12 random letters; median milliseconds of --repeats calls after 3 warm-ups, each
synchronized; the largest difference to the reference in the same dtype.

    python benchmarks/bench_char_cnn_gpu.py --tokens 2798 11305     # the tokens of 128 and 512 sentences
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def masked_whole(encoder, char_ids):
    """The window kernel's first form: all 50 positions in one multiply, the windows past the end masked."""
    import elmo_hf.modeling_elmo.char_cnn_kernels_elmo as char_cnn

    chars = encoder.char_embedding(char_ids)
    weight, bias, widest = char_cnn._window_weights(encoder)
    dtype = char_cnn._char_dtype(encoder, chars.device)
    chars = F.pad(chars.to(dtype), (0, 0, 0, widest - 1))
    products = F.linear(chars.unfold(1, widest, 1).flatten(2), weight.to(dtype))  # (N, 50, F)
    products.add_(char_cnn._past_the_end(encoder, 0, char_ids.shape[1], dtype, chars.device))
    return encoder.from_pooled(products.amax(dim=1) + bias.to(dtype))


def one_convolution(encoder, char_ids):
    """One cuDNN convolution of every filter padded to the widest, the positions past the end masked."""
    import elmo_hf.modeling_elmo.char_cnn_kernels_elmo as char_cnn

    weight, bias, widest = char_cnn._window_weights(encoder)
    dim = encoder.char_embedding.embedding_dim
    chars = F.pad(encoder.char_embedding(char_ids).transpose(1, 2), (0, widest - 1))  # (N, d, 50 + widest - 1)
    out = F.conv1d(chars, weight.view(weight.shape[0], dim, widest))  # (N, F, 50)
    mask = char_cnn._past_the_end(encoder, 0, char_ids.shape[1], out.dtype, out.device).T  # (F, 50)
    return encoder.from_pooled(out.add_(mask).amax(dim=-1) + bias.to(out.dtype))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[2798, 11305])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--preset", default="original")
    args = parser.parse_args()
    import elmo_hf.modeling_elmo.char_cnn_kernels_elmo as char_cnn
    from elmo_hf.modeling_elmo import ElmoConfig, ElmoModel

    torch.manual_seed(0)
    encoder = ElmoModel(ElmoConfig.from_preset(args.preset)).char_encoder.to(args.device).eval()
    kernels = {"cuDNN, seven convolutions (reference)": encoder.encode,
               "windows, the last positions apart (the library's)": lambda ids: char_cnn.encode_windows(encoder, ids),
               "windows, every position masked": lambda ids: masked_whole(encoder, ids),
               "one cuDNN convolution, padded filters": lambda ids: one_convolution(encoder, ids)}
    print("| tokens | dtype | kernel | ms a call | max diff to the reference |\n|---|---|---|---|---|")
    for tokens in args.tokens:
        generator = torch.Generator().manual_seed(tokens)
        ids = torch.zeros(tokens, 50, dtype=torch.long)
        lengths = torch.randint(1, 13, (tokens,), generator=generator)
        ids[:, 0], ids[:, 1:] = 259, 261  # begin-of-word, then padding characters (ids + 1, as the tokenizer's)
        for row, length in enumerate(lengths.tolist()):
            ids[row, 1 : 1 + length] = torch.randint(98, 124, (length,), generator=generator)
            ids[row, 1 + length] = 260  # end of word
        ids = ids.to(args.device)
        for dtype in (torch.float32, torch.bfloat16):
            autocast = torch.autocast(ids.device.type, dtype=dtype, enabled=dtype != torch.float32)
            reference = None
            for name, kernel in kernels.items():
                with torch.inference_mode(), autocast:
                    times = []
                    for _ in range(3 + args.repeats):
                        if ids.device.type == "cuda":
                            torch.cuda.synchronize()
                        start = time.perf_counter()
                        out = kernel(ids)
                        if ids.device.type == "cuda":
                            torch.cuda.synchronize()
                        times.append(time.perf_counter() - start)
                out = out.float()
                reference = out if reference is None else reference
                print(f"| {tokens} | {str(dtype)[6:]} | {name} | {1e3 * statistics.median(times[3:]):.3f} | "
                      f"{float((out - reference).abs().max()):.2g} |", flush=True)


if __name__ == "__main__":
    main()
