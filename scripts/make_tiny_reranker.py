"""Write a tiny, random-weight reranker GGUF for tests: Qwen3 architecture
with a classification head (`cls.output`, one label) and pooling type RANK,
which llama.cpp's llama-server serves on /v1/rerank with --reranking.

It reuses make_tiny_gguf.py's vocabulary (the 32000-token Llama
SentencePiece one), weights and writer; the scores are meaningless, the
shapes and token counts are real.

Usage:
    make_tiny_reranker.py --vocab PATH/ggml-vocab-llama-spm.gguf --out-dir DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_gguf as base  # noqa: E402
import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import MODEL_TENSOR, TENSOR_NAMES  # noqa: E402

NAME = "tiny-rerank"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=Path, required=True)
    ap.add_argument("--out-dir", type=Path, required=True)
    args = ap.parse_args()
    spec = base.ModelSpec(NAME, "f32", **base.TINY)
    vocab = base.read_vocab(args.vocab)
    weights = base.make_weights(spec, vocab)
    head_dim = spec.n_embd // spec.n_head
    rng = np.random.default_rng(spec.seed + 1)
    for i in range(spec.n_layer):
        for t in (MODEL_TENSOR.ATTN_Q_NORM, MODEL_TENSOR.ATTN_K_NORM):
            weights[TENSOR_NAMES[t].format(bid=i) + ".weight"] = np.ones(head_dim, dtype=np.float32)
    weights[TENSOR_NAMES[MODEL_TENSOR.CLS_OUT] + ".weight"] = (
        rng.standard_normal((1, spec.n_embd), dtype=np.float32) * np.float32(0.1)
    ).astype(np.float32)

    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"{NAME}.gguf"
    tmp = out.with_name(out.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), "qwen3")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(f"infer-bench {NAME} (random weights)")
    w.add_file_type(base.FILE_TYPES["f32"])
    w.add_vocab_size(len(vocab.tokens))
    w.add_context_length(spec.n_ctx)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_pooling_type(gguf.PoolingType.RANK)
    w.add_tokenizer_model(str(vocab.fields["tokenizer.ggml.model"]))
    w.add_token_list(vocab.tokens)
    w.add_token_scores(vocab.scores)
    w.add_token_types(vocab.types)
    for key, value in vocab.fields.items():
        if key in ("tokenizer.ggml.model", "tokenizer.chat_template"):
            continue
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
    for name, arr in weights.items():
        data, raw = base.convert(name, arr, "f32")
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)
    print(f"make_tiny_reranker.py: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
