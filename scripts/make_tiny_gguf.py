#!/usr/bin/env python3
"""Write tiny, random-weight llama-architecture GGUF models for tests.

The models are meant for exercising an inference server (llama.cpp's
llama-server) end to end: they load in milliseconds, generate fast on a CPU,
and need nothing from a model hub. The text they produce is gibberish.

Vocabulary and tokenizer metadata are copied from a vocab-only GGUF file that
ships in the llama.cpp source tree (models/ggml-vocab-llama-spm.gguf, the
32000-token Llama/SentencePiece vocabulary); a small ChatML-style chat
template is added so that /v1/chat/completions works.

Weights are drawn from numpy's PCG64 generator with a fixed seed, so the same
gguf/numpy versions always produce byte-identical files. The f32, f16 and q8_0
variants of a model share the same underlying weights.

Generation is steered so that tests get predictable token/chunk counts:
  * residual channel 0 is a constant "bias" channel (every token embedding has
    the same positive value there and no layer writes to it), and
  * the output head gives every non-NORMAL token (control tokens such as
    <s>/</s>, <unk>, and the 256 byte-fallback tokens <0x00>..<0xFF>) a large
    negative weight on that channel.
So the model never samples EOS (generation always runs to max_tokens, with or
without ignore_eos) and never samples byte tokens, which would otherwise
produce partial UTF-8 sequences that llama-server holds back and merges into a
later streamed chunk. Each generated token is therefore one SSE chunk with
non-empty text.

Usage:
    make_tiny_gguf.py --vocab PATH/ggml-vocab-llama-spm.gguf --out-dir DIR
                      [--only NAME ...] [--list]
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as QT
    from gguf import LlamaFileType, MODEL_TENSOR, TENSOR_NAMES
except ImportError as exc:  # pragma: no cover - environment problem
    sys.exit(
        f"make_tiny_gguf.py: missing python dependency ({exc}); "
        "install 'gguf' and 'numpy' (scripts/setup-llama does this in its venv)"
    )

ARCH = "llama"

# A ChatML-like template. The <|im_start|>/<|im_end|> markers are not special
# tokens in this vocabulary; they are simply tokenized as text, which is fine
# for a random model. It only uses features that llama-server's Jinja engine
# supports and handles string message contents.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)


@dataclass(frozen=True)
class ModelSpec:
    name: str          # output file stem, e.g. "tiny-f16"
    dtype: str         # "f32" | "f16" | "q8_0"
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx: int
    seed: int


TINY = dict(n_layer=2, n_embd=64, n_head=4, n_head_kv=4, n_ff=256, n_ctx=2048, seed=1234)
SMALL = dict(n_layer=8, n_embd=512, n_head=8, n_head_kv=4, n_ff=1408, n_ctx=2048, seed=5678)

MODELS: list[ModelSpec] = [
    ModelSpec("tiny-f32", "f32", **TINY),
    ModelSpec("tiny-f16", "f16", **TINY),
    ModelSpec("tiny-q8_0", "q8_0", **TINY),
    ModelSpec("small-f16", "f16", **SMALL),
]


@dataclass
class Vocab:
    fields: dict[str, object]   # tokenizer.* key -> python value
    tokens: list[str]
    scores: list[float]
    types: list[int]


def read_vocab(path: Path) -> Vocab:
    """Read tokenizer metadata and the token list from a vocab-only GGUF."""
    reader = gguf.GGUFReader(str(path))
    fields: dict[str, object] = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer."):
            fields[key] = field.contents()
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens",
                "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        if key not in fields:
            raise SystemExit(f"make_tiny_gguf.py: {path} has no {key!r}; not a vocab GGUF?")
    tokens = list(fields.pop("tokenizer.ggml.tokens"))
    scores = [float(s) for s in fields.pop("tokenizer.ggml.scores")]
    types = [int(t) for t in fields.pop("tokenizer.ggml.token_type")]
    if not (len(tokens) == len(scores) == len(types)):
        raise SystemExit(f"make_tiny_gguf.py: inconsistent token arrays in {path}")
    return Vocab(fields, tokens, scores, types)


def make_weights(spec: ModelSpec, vocab: Vocab) -> dict[str, np.ndarray]:
    """Random float32 weights (numpy layout: [rows=out, cols=in])."""
    rng = np.random.default_rng(spec.seed)
    d, n_vocab, n_ff = spec.n_embd, len(vocab.tokens), spec.n_ff
    head_dim = d // spec.n_head
    d_kv = head_dim * spec.n_head_kv
    std = 0.02
    # GPT-2 style: shrink the projections that write into the residual stream.
    std_res = std / np.sqrt(2.0 * spec.n_layer)

    def normal(shape, s):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(s)).astype(np.float32)

    def tn(t: MODEL_TENSOR, bid: int | None = None) -> str:
        return TENSOR_NAMES[t].format(bid=bid) + ".weight"

    w: dict[str, np.ndarray] = {}

    # Token embeddings: random, plus the constant bias channel 0 whose value is
    # about the norm of the rest of the vector. They are large next to what
    # the layers add, so the next token depends mostly on the current one (a
    # random bigram model); with small embeddings the 8-layer model collapses
    # into repeating a handful of tokens.
    emb_std = 0.3
    emb = normal((n_vocab, d), emb_std)
    emb[:, 0] = emb_std * np.sqrt(d)
    w[tn(MODEL_TENSOR.TOKEN_EMBD)] = emb

    for i in range(spec.n_layer):
        w[tn(MODEL_TENSOR.ATTN_NORM, i)] = np.ones(d, dtype=np.float32)
        w[tn(MODEL_TENSOR.ATTN_Q, i)] = normal((d, d), std)
        w[tn(MODEL_TENSOR.ATTN_K, i)] = normal((d_kv, d), std)
        w[tn(MODEL_TENSOR.ATTN_V, i)] = normal((d_kv, d), std)
        wo = normal((d, d), std_res)
        wo[0, :] = 0.0          # never write to the bias channel
        w[tn(MODEL_TENSOR.ATTN_OUT, i)] = wo
        w[tn(MODEL_TENSOR.FFN_NORM, i)] = np.ones(d, dtype=np.float32)
        w[tn(MODEL_TENSOR.FFN_GATE, i)] = normal((n_ff, d), std)
        w[tn(MODEL_TENSOR.FFN_UP, i)] = normal((n_ff, d), std)
        down = normal((d, n_ff), std_res)
        down[0, :] = 0.0        # never write to the bias channel
        w[tn(MODEL_TENSOR.FFN_DOWN, i)] = down

    w[tn(MODEL_TENSOR.OUTPUT_NORM)] = np.ones(d, dtype=np.float32)

    # Output head. After the final RMSNorm the bias channel is positive and,
    # roughly, sqrt(d/2) in size, as is the norm of the other channels. Pick
    # the random part so that logits of allowed tokens have a std of ~3 (a
    # peaked but varied distribution) and push disallowed tokens ~40 below.
    h_rest = np.sqrt(d / 2.0)
    out = normal((n_vocab, d), 3.0 / h_rest)
    out[:, 0] = 0.0
    bad = np.array([t != int(gguf.TokenType.NORMAL) for t in vocab.types])
    out[bad, 0] = -40.0 / h_rest
    w[tn(MODEL_TENSOR.OUTPUT)] = out
    return w


def convert(name: str, arr: np.ndarray, dtype: str) -> tuple[np.ndarray, QT | None]:
    """Cast a float32 weight to the model's storage type (norms stay f32)."""
    if arr.ndim == 1 or dtype == "f32":
        return arr.astype(np.float32), None
    if dtype == "f16":
        return arr.astype(np.float16), None
    if dtype == "q8_0":
        block = gguf.GGML_QUANT_SIZES[QT.Q8_0][0]
        if arr.shape[-1] % block != 0:
            raise SystemExit(f"make_tiny_gguf.py: {name}: row size {arr.shape[-1]} "
                             f"is not a multiple of the Q8_0 block size {block}")
        return gguf.quants.quantize(arr, QT.Q8_0), QT.Q8_0
    raise SystemExit(f"make_tiny_gguf.py: unknown dtype {dtype!r}")


FILE_TYPES = {
    "f32": LlamaFileType.ALL_F32,
    "f16": LlamaFileType.MOSTLY_F16,
    "q8_0": LlamaFileType.MOSTLY_Q8_0,
}


def write_model(spec: ModelSpec, vocab: Vocab, out_path: Path) -> None:
    if spec.n_embd % spec.n_head or spec.n_head % spec.n_head_kv:
        raise SystemExit(f"make_tiny_gguf.py: bad head configuration in {spec}")
    head_dim = spec.n_embd // spec.n_head
    tmp_path = out_path.with_name(out_path.name + ".tmp")

    writer = gguf.GGUFWriter(str(tmp_path), ARCH)  # also writes general.architecture
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(f"infer-bench {spec.name} (random weights)")
    writer.add_description(
        f"Random-weight llama model for tests: {spec.n_layer} layers, hidden {spec.n_embd}, "
        f"{spec.n_head} heads, seed {spec.seed}. Produces gibberish.")
    writer.add_file_type(FILE_TYPES[spec.dtype])
    if spec.dtype == "q8_0":
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    writer.add_vocab_size(len(vocab.tokens))
    writer.add_context_length(spec.n_ctx)
    writer.add_embedding_length(spec.n_embd)
    writer.add_block_count(spec.n_layer)
    writer.add_feed_forward_length(spec.n_ff)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)

    # Tokenizer: copy everything under tokenizer.* from the vocab file.
    writer.add_tokenizer_model(str(vocab.fields["tokenizer.ggml.model"]))
    writer.add_token_list(vocab.tokens)
    writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    for key, value in vocab.fields.items():
        if key == "tokenizer.ggml.model" or key == "tokenizer.chat_template":
            continue
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            raise SystemExit(f"make_tiny_gguf.py: don't know how to copy {key!r} ({type(value)})")
    writer.add_chat_template(CHAT_TEMPLATE)

    for name, arr in make_weights(spec, vocab).items():
        data, raw_dtype = convert(name, arr, spec.dtype)
        writer.add_tensor(name, data, raw_dtype=raw_dtype)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp_path, out_path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=Path, help="vocab-only GGUF (ggml-vocab-llama-spm.gguf)")
    ap.add_argument("--out-dir", type=Path, help="directory for the .gguf files")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="write only this model (repeatable); see --list")
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    args = ap.parse_args()

    if args.list:
        for m in MODELS:
            print(m.name)
        return 0
    if args.vocab is None or args.out_dir is None:
        ap.error("--vocab and --out-dir are required")
    if not args.vocab.is_file():
        ap.error(f"vocab file not found: {args.vocab}")

    known = {m.name for m in MODELS}
    unknown = [n for n in args.only if n not in known]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {sorted(known)}")
    selected = [m for m in MODELS if not args.only or m.name in args.only]

    vocab = read_vocab(args.vocab)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for spec in selected:
        out = args.out_dir / f"{spec.name}.gguf"
        write_model(spec, vocab, out)
        print(f"make_tiny_gguf.py: wrote {out} ({out.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
