#!/usr/bin/env python3
"""make-model.py OUT.gguf [TEXT_DIR]: a tiny LLaMA-architecture model for
llama.cpp, made here and the same on every run (no model hub is reachable).

Run inside the sid root of scripts/real-engine.sh, which has python3-gguf and
python3-numpy.  What it writes:

- a byte-level BPE of 4,096 tokens in GPT-2's form (256 byte tokens, merges
  trained on the ASCII text of TEXT_DIR, by default the root's licence files,
  so English comes out at about 4 characters a token), pre-tokenizer
  "gpt-2", and the ChatML specials <|im_start|> and <|im_end|> (EOS) with a
  ChatML chat template, so /v1/chat/completions works;
- 384 wide, 4 layers, 6 heads, 2 KV heads, FFN 1,024, context 32,768, F32:
  9.4 M parameters of seeded random weights.  Its text is noise by design.

Random weights may pick EOS early, and a byte token of a partial UTF-8
sequence would make llama-server hold it back and send two tokens in one
chunk.  So dimension 0 of the residual stream is a constant: every token's
embedding has EMB0 there, and no attention or FFN output writes to it
(row 0 of attn_output and ffn_down is zero).  After the final RMS norm it is
positive for every position, and the output rows of EOS, the specials, the
control bytes and the bytes >= 0x80 carry a large negative weight there:
their logits sit far below every printable token's.
"""
import collections
import os
import re
import sys

import numpy as np
import gguf

SEED = 20261203
VOCAB = 4096
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, N_CTX = 384, 4, 6, 2, 1024, 32768
HEAD_DIM = N_EMBD // N_HEAD
EMB0 = 1.0        # the constant of dimension 0
SUPPRESS = -40.0  # output weight on dimension 0 of the improbable tokens
SPECIALS = ["<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# GPT-2's pre-tokenizer, in Python's re (letters and digits as classes).
PRETOK = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """GPT-2's printable stand-in for each byte."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def training_text(text_dir):
    parts = []
    for name in sorted(os.listdir(text_dir)):
        path = os.path.join(text_dir, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                raw = f.read()
            parts.append(bytes(b for b in raw if b == 10 or 32 <= b < 127).decode("ascii"))
    return "\n".join(parts)


def train_bpe(text, n_merges, b2u):
    """Byte-level BPE: the most frequent pair merged first, ties by the pair
    itself, so the result depends on the text alone.  Pair counts are kept
    up to date incrementally (only the words holding a merged pair change)."""
    freq = collections.Counter(PRETOK.findall(text))
    words = [[b2u[b] for b in w.encode("ascii")] for w in freq]
    counts = [freq[w] for w in freq]
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[a, b] += counts[i]
            where[a, b].add(i)
    merges = []
    for _ in range(n_merges):
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        merges.append(best)
        a, b = best
        joined = a + b
        for i in list(where[best]):
            w = words[i]
            for x, y in zip(w, w[1:]):
                pairs[x, y] -= counts[i]
                if pairs[x, y] <= 0:
                    del pairs[x, y]
                where[x, y].discard(i)
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(joined)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for x, y in zip(out, out[1:]):
                pairs[x, y] += counts[i]
                where[x, y].add(i)
        where.pop(best, None)
    return merges


def vocabulary(text):
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    merges = train_bpe(text, VOCAB - 256 - len(SPECIALS), b2u)
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
    # Pad with unreachable tokens so the vocabulary has its size whatever the
    # text gave (they are never produced: their merges do not exist).
    n = 0
    while len(tokens) < VOCAB - len(SPECIALS):
        tokens.append("<|unused_%d|>" % n)
        n += 1
    types = [gguf.TokenType.NORMAL] * len(tokens)
    for i in range(len(tokens)):
        if tokens[i].startswith("<|unused_"):
            types[i] = gguf.TokenType.UNUSED
    for s in SPECIALS:
        tokens.append(s)
        types.append(gguf.TokenType.CONTROL)
    improbable = [b for b in range(256) if b < 32 and b != 10 or b >= 127]
    improbable += [i for i, t in enumerate(types) if t != gguf.TokenType.NORMAL]
    return tokens, types, ["%s %s" % m for m in merges], improbable


def weights(rng, improbable):
    def normal(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t = {}
    emb = normal(VOCAB, N_EMBD, scale=0.05)
    emb[:, 0] = EMB0
    t["token_embd.weight"] = emb
    t["output_norm.weight"] = np.ones(N_EMBD, dtype=np.float32)
    out = normal(VOCAB, N_EMBD, scale=0.05)
    out[:, 0] = 0.0
    out[improbable, 0] = SUPPRESS
    t["output.weight"] = out
    kv = N_HEAD_KV * HEAD_DIM
    for i in range(N_LAYER):
        p = "blk.%d." % i
        t[p + "attn_norm.weight"] = np.ones(N_EMBD, dtype=np.float32)
        t[p + "attn_q.weight"] = normal(N_EMBD, N_EMBD)
        t[p + "attn_k.weight"] = normal(kv, N_EMBD)
        t[p + "attn_v.weight"] = normal(kv, N_EMBD)
        wo = normal(N_EMBD, N_EMBD)
        wo[0, :] = 0.0
        t[p + "attn_output.weight"] = wo
        t[p + "ffn_norm.weight"] = np.ones(N_EMBD, dtype=np.float32)
        t[p + "ffn_gate.weight"] = normal(N_FF, N_EMBD)
        t[p + "ffn_up.weight"] = normal(N_FF, N_EMBD)
        down = normal(N_EMBD, N_FF)
        down[0, :] = 0.0
        t[p + "ffn_down.weight"] = down
    return t


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: make-model.py OUT.gguf [TEXT_DIR]")
    out = sys.argv[1]
    text_dir = sys.argv[2] if len(sys.argv) == 3 else "/usr/share/common-licenses"
    tokens, types, merges, improbable = vocabulary(training_text(text_dir))
    rng = np.random.default_rng(SEED)
    w = gguf.GGUFWriter(out + ".tmp", "llama")
    w.add_name("tokbench-tiny")
    w.add_vocab_size(VOCAB)
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|im_start|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    for name, arr in weights(rng, improbable).items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(out + ".tmp", out)
    print("make-model: %s: %d tokens, %d merges" % (out, len(tokens), len(merges)))


if __name__ == "__main__":
    main()
