"""Real-model suite: small random-weight models from `transformers` (and torchvision/timm when
installed), each called the way its users call it, measured in eager PyTorch, kiln and
torch.compile (Inductor).

    python bench/models.py                                   # every case, eager + kiln + inductor
    python bench/models.py --cases bert,llama_decode --compilers kiln --iters 10
    python bench/models.py --shapes --compilers kiln        # each case at ten batch sizes and lengths in turn
    python bench/models.py --list                            # the cases and their families
    python bench/models.py --json out.json

Nothing is downloaded: every model is built from a small config (2 layers, hidden 64-128,
sequences of 16-32) with random weights (HF_HUB_OFFLINE=1). Each case is a builder returning
(model in eval mode, a function producing fresh inputs, run(model, inputs)): `run` is how users
call the model (a forward with a padded attention mask, a generation loop with a KV cache, an
encoder-decoder forward ...), and the compiler is applied to the model only, as with
`torch.compile(model)`.

Every case runs in a child process of its own (a crash or a hang in one case cannot stop the
others); in it the compilers run one after another, eager first. Reported per (case, compiler):
  first_s     wall time of the first call (capture + compile + run), with empty kiln and Inductor
              cache directories (--keep-cache: the usual ones); each compiler is first primed on a
              tiny unrelated function so that one-time set-up is not counted
  eager_ms, ms   median steady time of one call under torch.no_grad() (eager and compiled calls
              interleaved, so both see the same machine)
  speedup     eager_ms / ms
  match       outputs equal eager on fresh inputs (allclose, rtol = atol = 1e-3, float32);
              judged on logits / last_hidden_state / the first tensor of the output
  maxerr      the largest absolute difference seen
  graphs, breaks, recompiles   from kiln.stats() (kiln) or torch._dynamo's counters (inductor),
              after every call of the case (first, checks, warm-up, timed)
  late_graphs graphs still being compiled during the timed calls (after 4 warm-up calls): not 0
              means the compiler had not reached a steady state and `ms` includes compilation
  top_breaks  the most frequent graph-break reasons
"""
import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import torch  # noqa: E402

CASES = {}   # name -> (family, builder)
SKIPPED = {}  # name -> why the case is not available here


def case(name, family):
    def deco(fn):
        CASES[name] = (family, fn)
        return fn
    return deco


# ---------------------------------------------------------------- inputs

B, S = 2, 24          # batch, sequence length of the text cases (--shapes changes them between calls)
VOCAB = 256
# --shapes: ten (batch, sequence length) pairs a case is called with in turn, the way a server sees
# batches of different lengths; the first is the default shape. Vision cases vary the batch only.
SHAPES = [(2, 24), (2, 16), (2, 31), (1, 9), (2, 40), (3, 24), (2, 13), (1, 33), (2, 20), (4, 27)]


def _row_lengths(b, seq):
    """Real-token counts of a padded batch: the first row full, each later one 7 tokens shorter."""
    return [max(1, seq - 7 * i) for i in range(b)]


def _padded_mask(lengths, seq, left=False):
    """1 for real tokens, 0 for padding; right padding for encoders, left for generation."""
    m = torch.zeros(len(lengths), seq, dtype=torch.long)
    for i, n in enumerate(lengths):
        if left:
            m[i, seq - n:] = 1
        else:
            m[i, :n] = 1
    return m


def _text_inputs(seq=None, left=False, vocab=VOCAB, token_type=False):
    """Inputs of the current batch B and length (seq, else S), both read at call time."""
    def make():
        n = seq or S
        ids = torch.randint(3, vocab, (B, n))
        mask = _padded_mask(_row_lengths(B, n), n, left=left)  # rows after the first are padded
        ids = ids.masked_fill(mask == 0, 0)
        d = dict(input_ids=ids, attention_mask=mask)
        if token_type:
            tt = torch.zeros(B, n, dtype=torch.long)
            tt[:, n // 2:] = 1
            d["token_type_ids"] = tt
        return d
    return make


def _forward(model, inputs):
    return model(**inputs)


def _hf(config_cls, model_cls, **cfg):
    """A transformers model from a small config, random weights, eval mode."""
    import transformers
    config = getattr(transformers, config_cls)(**cfg)
    return getattr(transformers, model_cls)(config).eval()


def _text_case(config_cls, model_cls, left=False, token_type=False, **cfg):
    model = _hf(config_cls, model_cls, **cfg)
    return model, _text_inputs(left=left, token_type=token_type), _forward


# ---------------------------------------------------------------- encoder-only

ENC = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
           max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@case("bert", "encoder")
def bert():
    return _text_case("BertConfig", "BertModel", token_type=True, **ENC)


@case("roberta", "encoder")
def roberta():
    return _text_case("RobertaConfig", "RobertaModel", pad_token_id=1, **ENC)


@case("distilbert", "encoder")
def distilbert():
    return _text_case("DistilBertConfig", "DistilBertModel", vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4,
                      hidden_dim=128, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0)


@case("albert", "encoder")
def albert():
    return _text_case("AlbertConfig", "AlbertModel", embedding_size=32, **ENC)


@case("electra", "encoder")
def electra():
    return _text_case("ElectraConfig", "ElectraModel", embedding_size=32, **ENC)


@case("deberta_v2", "encoder")
def deberta_v2():
    return _text_case("DebertaV2Config", "DebertaV2Model", **ENC)


# ---------------------------------------------------------------- decoder-only (one forward, padded mask)

LLAMA_LIKE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128)


@case("gpt2", "decoder")
def gpt2():
    return _text_case("GPT2Config", "GPT2Model", vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)


@case("llama", "decoder")
def llama():
    return _text_case("LlamaConfig", "LlamaModel", use_cache=False, **LLAMA_LIKE)


@case("mistral", "decoder")
def mistral():
    return _text_case("MistralConfig", "MistralModel", use_cache=False, sliding_window=16, **LLAMA_LIKE)


@case("qwen2", "decoder")
def qwen2():
    return _text_case("Qwen2Config", "Qwen2Model", use_cache=False, **LLAMA_LIKE)


@case("gemma", "decoder")
def gemma():
    return _text_case("GemmaConfig", "GemmaModel", use_cache=False, head_dim=16, **LLAMA_LIKE)


@case("opt", "decoder")
def opt():
    return _text_case("OPTConfig", "OPTModel", vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=4, ffn_dim=128, max_position_embeddings=128, word_embed_proj_dim=64,
                      dropout=0.0, attention_dropout=0.0, use_cache=False)


@case("gpt_neo", "decoder")
def gpt_neo():
    return _text_case("GPTNeoConfig", "GPTNeoModel", vocab_size=VOCAB, hidden_size=64, num_layers=2, num_heads=4,
                      attention_types=[[["global", "local"], 1]], window_size=8, intermediate_size=128,
                      max_position_embeddings=128, embed_dropout=0.0, attention_dropout=0.0, resid_dropout=0.0,
                      use_cache=False)


@case("phi", "decoder")
def phi():
    return _text_case("PhiConfig", "PhiModel", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=128,
                      resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, use_cache=False)


# ---------------------------------------------------------------- decoder generation loops (KV cache)

DECODE_STEPS = 4


def _decode_inputs():
    def make():
        d = _text_inputs(seq=max(4, S - 8), left=True)()  # a 16-token prompt at the default S
        d["next_tokens"] = torch.randint(3, VOCAB, (B, DECODE_STEPS))
        return d
    return make


def _decode_run(model, inputs):
    """What generate() does, greedy decoding replaced by given next tokens (so that compiled and
    eager follow the same path): a prefill over the left-padded prompt with use_cache=True, then
    one call per new token with past_key_values, a mask one longer each step, and position ids
    from the mask. Returns the last-position logits of every step, stacked."""
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    logits = [out.logits[:, -1]]
    past = out.past_key_values
    for t in range(DECODE_STEPS):
        tok = inputs["next_tokens"][:, t:t + 1]
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        pos = mask.sum(-1, keepdim=True) - 1
        n = mask.shape[1]
        out = model(input_ids=tok, attention_mask=mask, position_ids=pos, past_key_values=past, use_cache=True,
                    cache_position=torch.arange(n - 1, n))
        logits.append(out.logits[:, -1])
        past = out.past_key_values
    return torch.stack(logits, 1)


@case("llama_decode", "decoder+kv")
def llama_decode():
    return _hf("LlamaConfig", "LlamaForCausalLM", **LLAMA_LIKE), _decode_inputs(), _decode_run


@case("gpt2_decode", "decoder+kv")
def gpt2_decode():
    model = _hf("GPT2Config", "GPT2LMHeadModel", vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return model, _decode_inputs(), _decode_run


# ---------------------------------------------------------------- encoder-decoder

def _seq2seq_inputs():
    def make():
        d = _text_inputs()()
        d["decoder_input_ids"] = torch.randint(3, VOCAB, (B, S // 2))
        return d
    return make


@case("t5", "encoder-decoder")
def t5():
    model = _hf("T5Config", "T5Model", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                num_decoder_layers=2, num_heads=4, dropout_rate=0.0, use_cache=False)
    return model, _seq2seq_inputs(), _forward


@case("bart", "encoder-decoder")
def bart():
    model = _hf("BartConfig", "BartModel", vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                max_position_embeddings=64, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                use_cache=False)
    return model, _seq2seq_inputs(), _forward


# ---------------------------------------------------------------- vision

def _image_inputs(size=32, channels=3):
    return lambda: dict(pixel_values=torch.randn(B, channels, size, size))


@case("vit", "vision")
def vit():
    model = _vit_model()
    return model, _image_inputs(), _forward


def _vit_model():
    import transformers
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=128, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    return transformers.ViTModel(cfg, add_pooling_layer=False).eval()


@case("convnext", "vision")
def convnext():
    model = _hf("ConvNextConfig", "ConvNextModel", num_channels=3, patch_size=4, hidden_sizes=[16, 32, 64, 128],
                depths=[1, 1, 2, 1], image_size=64)
    return model, _image_inputs(64), _forward


@case("resnet", "vision")
def resnet():
    model = _hf("ResNetConfig", "ResNetModel", num_channels=3, embedding_size=16, hidden_sizes=[16, 32, 64, 128],
                depths=[1, 1, 1, 1], layer_type="bottleneck")
    return model, _image_inputs(64), _forward


# ---------------------------------------------------------------- audio

@case("wav2vec2", "audio")
def wav2vec2():
    model = _hf("Wav2Vec2Config", "Wav2Vec2Model", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=128, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, feat_extract_norm="layer",
                do_stable_layer_norm=True, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, vocab_size=32)

    def make():
        n = S * 1600 // 24  # 1600 samples at the default S
        wav = torch.randn(B, n)
        mask = _padded_mask([n] + [n - n // 4 - 8 * i for i in range(B - 1)], n)  # 1600, 1200 at B=2
        return dict(input_values=wav * mask, attention_mask=mask)
    return model, make, _forward


@case("whisper", "audio")
def whisper():
    model = _hf("WhisperConfig", "WhisperModel", vocab_size=VOCAB, num_mel_bins=16, d_model=64, encoder_layers=2,
                decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                decoder_ffn_dim=128, max_source_positions=32, max_target_positions=32, dropout=0.0, pad_token_id=0,
                bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                attention_dropout=0.0, activation_dropout=0.0, use_cache=False)

    def make():
        return dict(input_features=torch.randn(B, 16, 64), decoder_input_ids=torch.randint(3, VOCAB, (B, S // 3)))
    return model, make, _forward


# ---------------------------------------------------------------- mixture of experts

@case("mixtral", "moe")
def mixtral():
    return _text_case("MixtralConfig", "MixtralModel", use_cache=False, num_local_experts=4, num_experts_per_tok=2,
                      **LLAMA_LIKE)


@case("qwen2_moe", "moe")
def qwen2_moe():
    return _text_case("Qwen2MoeConfig", "Qwen2MoeModel", use_cache=False, num_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=64, shared_expert_intermediate_size=128, **LLAMA_LIKE)


# ---------------------------------------------------------------- torchvision / timm CNNs (when installed)

def _optional_cnns():
    try:
        import torchvision  # noqa: F401

        def tv_resnet18():
            import torchvision.models as m
            return m.resnet18(num_classes=10).eval(), _image_inputs(64), lambda model, x: model(x["pixel_values"])

        def tv_mobilenet_v3():
            import torchvision.models as m
            return m.mobilenet_v3_small(num_classes=10).eval(), _image_inputs(64), \
                lambda model, x: model(x["pixel_values"])
        case("tv_resnet18", "cnn")(tv_resnet18)
        case("tv_mobilenet_v3", "cnn")(tv_mobilenet_v3)
    except Exception as e:  # noqa: BLE001
        SKIPPED["tv_resnet18,tv_mobilenet_v3"] = f"torchvision not importable ({type(e).__name__}: {e})"
    try:
        import timm  # noqa: F401

        def timm_efficientnet():
            return timm.create_model("efficientnet_b0", pretrained=False, num_classes=10).eval(), _image_inputs(64), \
                lambda model, x: model(x["pixel_values"])
        case("timm_efficientnet_b0", "cnn")(timm_efficientnet)
    except Exception as e:  # noqa: BLE001
        SKIPPED["timm_efficientnet_b0"] = f"timm not importable ({type(e).__name__}: {e})"


_optional_cnns()


# ---------------------------------------------------------------- judging outputs

def output_tensor(out):
    """The tensor a case is judged by: logits, else last_hidden_state, else the first tensor."""
    for key in ("logits", "last_hidden_state"):
        t = getattr(out, key, None)
        if isinstance(t, torch.Tensor):
            return t
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        for o in out:
            if isinstance(o, torch.Tensor):
                return o
    raise TypeError(f"no tensor in output of type {type(out).__name__}")


def compare(actual, expected, rtol=1e-3, atol=1e-3):
    """(match, max abs error) of the judged tensors."""
    a, e = output_tensor(actual).detach(), output_tensor(expected).detach()
    if a.shape != e.shape:
        return False, float("inf")
    err = (a.double() - e.double()).abs().max().item() if a.numel() else 0.0
    return bool(torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)), err


def build(name, seed=0):
    torch.manual_seed(seed)
    return CASES[name][1]()


# ---------------------------------------------------------------- child: one case, every compiler

def _prime(compiler):
    f = lambda t: (t * 2 + 1).relu().sum()  # noqa: E731
    if compiler == "kiln":
        import kiln
        kiln.compile(f)(torch.randn(16))
        kiln.reset()
    elif compiler == "inductor":
        import torch._dynamo as dynamo
        torch.compile(f)(torch.randn(16))
        dynamo.reset()


def _compile(compiler, model):
    if compiler == "kiln":
        import kiln
        kiln.reset()
        return kiln.compile(model)
    if compiler == "inductor":
        import torch._dynamo as dynamo
        from torch._dynamo.utils import counters
        dynamo.reset()
        counters.clear()
        return torch.compile(model)
    raise SystemExit(f"unknown compiler {compiler}")


def _short(where):
    """site-packages/transformers/models/bert/modeling_bert.py:620 -> modeling_bert.py:620"""
    return re.sub(r"[^\s():]*/", "", str(where))


def _compiler_stats(compiler):
    if compiler == "kiln":
        import kiln
        s = kiln.stats()
        reasons = collections.Counter(f"{b.get('reason')} @ {_short(b.get('where'))}" for b in s.get("breaks", []))
        return dict(graphs=s["graphs"], breaks=s["graph_breaks"], recompiles=s["recompiles"],
                    top_breaks=[f"{n}x {r}" for r, n in reasons.most_common(3)])
    from torch._dynamo.utils import counters
    graphs = counters["stats"].get("unique_graphs", 0)
    gb = counters["graph_break"]
    return dict(graphs=graphs, breaks=sum(gb.values()), recompiles=max(0, counters["stats"].get("unique_graphs", 0) - 1),
                top_breaks=[f"{n}x {r[:160]}" for r, n in gb.most_common(3)])


def _err(e):
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"


def child(a):
    torch.set_num_threads(a.threads)
    sys.path.insert(0, ROOT)
    model, make_inputs, run = build(a.case)
    torch.manual_seed(1)
    steady_inputs = make_inputs()
    checks = [make_inputs() for _ in range(2)]

    def step(m, inp):
        with torch.no_grad():
            return run(m, inp)

    def one(m):
        t0 = time.perf_counter()
        step(m, steady_inputs)
        return (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    step(model, steady_inputs)
    eager_first = time.perf_counter() - t0
    refs = [step(model, inp) for inp in checks]
    for _ in range(2):
        one(model)
    eager_alone = statistics.median(one(model) for _ in range(a.iters))
    results = [dict(case=a.case, family=CASES[a.case][0], compiler="eager", first_s=round(eager_first, 3),
                    eager_ms=round(eager_alone, 3), ms=round(eager_alone, 3))]
    for comp in a.compilers.split(","):
        rec = dict(case=a.case, family=CASES[a.case][0], compiler=comp)
        try:
            _prime(comp)
            compiled = _compile(comp, model)
            t0 = time.perf_counter()
            step(compiled, steady_inputs)
            rec["first_s"] = round(time.perf_counter() - t0, 3)
            ok, err = True, 0.0
            for inp, ref in zip(checks, refs):
                m, e = compare(step(compiled, inp), ref)
                ok, err = ok and m, max(err, e)
            rec.update(match=ok, maxerr=float(f"{err:.3g}"))
            for _ in range(3):
                one(model), one(compiled)
            graphs_before = _compiler_stats(comp)["graphs"]
            te, tc = [], []
            for _ in range(a.iters):
                te.append(one(model))
                tc.append(one(compiled))
            em, cm = statistics.median(te), statistics.median(tc)
            rec.update(eager_ms=round(em, 3), ms=round(cm, 3), speedup=round(em / cm, 3),
                       late_graphs=_compiler_stats(comp)["graphs"] - graphs_before)
        except Exception as e:  # noqa: BLE001
            rec["error"] = _err(e)
        try:
            rec.update(_compiler_stats(comp))
        except Exception as e:  # noqa: BLE001
            rec.setdefault("error", "stats: " + _err(e))
        results.append(rec)
    for r in results:
        print("RESULT " + json.dumps(r), flush=True)


def child_shapes(a):
    """--shapes: the case called at each (batch, length) of SHAPES in turn. first_s is the first pass
    over all of them (what compiling for every shape costs); ms is one whole pass, steady."""
    global B, S
    torch.set_num_threads(a.threads)
    sys.path.insert(0, ROOT)
    model, make_inputs, run = build(a.case)
    torch.manual_seed(1)
    default = B, S
    inputs = []
    for B, S in SHAPES:
        inputs.append(make_inputs())
    B, S = default

    def step(m, inp):
        with torch.no_grad():
            return run(m, inp)

    def one_pass(m):
        t0 = time.perf_counter()
        for inp in inputs:
            step(m, inp)
        return (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    refs = [step(model, inp) for inp in inputs]
    base = dict(case=a.case, family=CASES[a.case][0], shapes=len(SHAPES))
    results = [dict(base, compiler="eager", first_s=round(time.perf_counter() - t0, 3))]
    for comp in a.compilers.split(","):
        rec = dict(base, compiler=comp)
        try:
            _prime(comp)
            compiled = _compile(comp, model)
            t0 = time.perf_counter()
            outs = [step(compiled, inp) for inp in inputs]
            rec["first_s"] = round(time.perf_counter() - t0, 3)
            ok, err = True, 0.0
            for out, ref in zip(outs, refs):
                m, e = compare(out, ref)
                ok, err = ok and m, max(err, e)
            rec.update(match=ok, maxerr=float(f"{err:.3g}"))
            one_pass(model), one_pass(compiled)
            graphs_before = _compiler_stats(comp)["graphs"]
            te, tc = [], []
            for _ in range(a.iters):
                te.append(one_pass(model))
                tc.append(one_pass(compiled))
            em, cm = statistics.median(te), statistics.median(tc)
            rec.update(eager_ms=round(em, 3), ms=round(cm, 3), speedup=round(em / cm, 3),
                       late_graphs=_compiler_stats(comp)["graphs"] - graphs_before)
        except Exception as e:  # noqa: BLE001
            rec["error"] = _err(e)
        try:
            rec.update(_compiler_stats(comp))
        except Exception as e:  # noqa: BLE001
            rec.setdefault("error", "stats: " + _err(e))
        results.append(rec)
    for r in results:
        print("RESULT " + json.dumps(r), flush=True)


# ---------------------------------------------------------------- parent

def run_case(a, name):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    if not a.keep_cache:  # cold compiler caches: first_s is what a first-time user waits for
        with tempfile.TemporaryDirectory(prefix="bench_models_") as cache:
            env.update(KILN_CACHE_DIR=os.path.join(cache, "kiln"), TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
            return _run_child(a, name, env)
    return _run_child(a, name, env)


def _run_child(a, name, env):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--case", name, "--compilers", a.compilers,
           "--iters", str(a.iters), "--threads", str(a.threads)] + (["--shapes"] if a.shapes else [])
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired as e:
        out, err = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
        rows = [json.loads(ln[7:]) for ln in out.splitlines() if ln.startswith("RESULT ")]
        return rows or [dict(case=name, family=CASES[name][0], compiler=a.compilers, error=f"timeout after {a.timeout}s")]
    rows = [json.loads(ln[7:]) for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if not rows:
        tail = (p.stderr.strip().splitlines() or [f"exit code {p.returncode}, no output"])[-1]
        rows = [dict(case=name, family=CASES[name][0], compiler=a.compilers,
                     error=f"child died (exit {p.returncode}): {tail[:200]}")]
    return rows


COLS = ["case", "family", "compiler", "eager_ms", "ms", "speedup", "first_s", "match", "maxerr", "graphs", "breaks",
        "recompiles", "late_graphs"]


def report(rows):
    print("\n| " + " | ".join(COLS) + " |")
    print("|" + "---|" * len(COLS))
    for r in rows:
        if r["compiler"] == "eager":
            continue
        cells = []
        for c in COLS:
            v = r.get(c, "")
            if c == "ms" and "error" in r and "ms" not in r:
                v = "ERROR"
            cells.append(str(v))
        print("| " + " | ".join(cells) + " |")
    print("\nfirst call in eager:", ", ".join(f"{r['case']} {r['first_s']}s" for r in rows if r["compiler"] == "eager"))
    errs = [r for r in rows if "error" in r]
    if errs:
        print("\nerrors:")
        for r in errs:
            print(f"- {r['case']} / {r['compiler']}: {r['error']}")
    brk = [r for r in rows if r.get("top_breaks")]
    if brk:
        print("\ntop graph-break reasons:")
        for r in brk:
            print(f"- {r['case']} / {r['compiler']}: " + "; ".join(r["top_breaks"]))
    for name, why in SKIPPED.items():
        print(f"\nskipped {name}: {why}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="all", help="comma-separated case names (default: all)")
    p.add_argument("--compilers", default="kiln,inductor", help="comma-separated: kiln, inductor")
    p.add_argument("--iters", type=int, default=20, help="timed iterations per compiler (median)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--timeout", type=int, default=900, help="seconds for one case's child process")
    p.add_argument("--json", default=None, help="write every row to this file")
    p.add_argument("--keep-cache", action="store_true",
                   help="use the usual kiln/Inductor cache directories (default: a fresh, empty one per case)")
    p.add_argument("--shapes", action="store_true",
                   help="call each case at ten (batch, length) pairs in turn (SHAPES); first_s is the first pass "
                        "over all of them, ms one steady pass")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return child_shapes(a) if a.shapes else child(a)
    if a.list:
        for n, (fam, _) in CASES.items():
            print(f"{n:24s} {fam}")
        for n, why in SKIPPED.items():
            print(f"{n:24s} skipped: {why}")
        return
    names = list(CASES) if a.cases == "all" else [c.strip() for c in a.cases.split(",") if c.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    rows = []
    for n in names:
        t0 = time.perf_counter()
        got = run_case(a, n)
        rows += got
        for r in got:
            print(json.dumps(r), flush=True)
        print(f"# {n}: {time.perf_counter() - t0:.1f}s", flush=True)
        if a.json:  # written after every case, so a long run can be read while it goes
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
    report(rows)


if __name__ == "__main__":
    main()
