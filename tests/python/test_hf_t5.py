"""transformers' T5 the way users train and decode it, compiled by kiln: a training step with labels
(the default use_cache=True builds an EncoderDecoderCache of DynamicCaches, whose construction
deep-copies the config through PreTrainedConfig.get_text_config, and a CrossEntropyLoss inside
forward) is one graph, as under torch.compile; loss and every gradient match eager over several
steps with new inputs. A greedy decode passing the cache and a BaseModelOutput back in takes the
three graphs torch.compile takes (the first call, then the cached step at two cache lengths)."""
import copy

import pytest
import torch

import kiln

transformers = pytest.importorskip("transformers")

TOL = dict(rtol=1e-4, atol=1e-5)


def _t5(**overrides):
    # decoder_start_token_id: transformers 5.24's T5Config no longer sets it, and _shift_right needs it.
    cfg = transformers.T5Config(vocab_size=256, d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16,
                                decoder_start_token_id=0, **overrides)
    torch.manual_seed(0)
    return transformers.T5ForConditionalGeneration(cfg)


def _counts():
    s = kiln.stats()
    return s["graphs"], s["graph_breaks"], s["recompiles"]


def test_t5_training_step_is_one_graph_and_matches_eager():
    model = _t5().train()  # dropout 0.1: both runs seeded alike
    ref = copy.deepcopy(model)
    compiled = kiln.compile(model)
    for step in range(3):
        ids, labels = torch.randint(0, 256, (2, 12)), torch.randint(0, 256, (2, 7))
        torch.manual_seed(step)
        out = compiled(input_ids=ids, labels=labels)
        torch.manual_seed(step)
        expected = ref(input_ids=ids, labels=labels)
        out.loss.backward()
        expected.loss.backward()
        assert type(out) is type(expected) and list(out.keys()) == list(expected.keys())
        torch.testing.assert_close(out.loss, expected.loss, **TOL)
        torch.testing.assert_close(out.logits, expected.logits, **TOL)
        assert type(out.cache) is type(expected.cache)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, **TOL, msg=lambda m: f"{name}: {m}")
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        assert _counts() == (1, 0, 0), kiln.stats()["breaks"]


def test_t5_eval_forward_is_one_graph():
    model = _t5().eval()
    compiled = kiln.compile(model)
    with torch.no_grad():
        for _ in range(2):
            ids, labels = torch.randint(0, 256, (2, 12)), torch.randint(0, 256, (2, 7))
            out, expected = compiled(input_ids=ids, labels=labels), model(input_ids=ids, labels=labels)
            torch.testing.assert_close(out.logits, expected.logits, **TOL)
            torch.testing.assert_close(out.loss, expected.loss, **TOL)
    assert _counts() == (1, 0, 0), kiln.stats()["breaks"]


def _greedy(model, ids, steps=4):
    dec = torch.zeros((ids.shape[0], 1), dtype=torch.long)
    out = model(input_ids=ids, decoder_input_ids=dec, use_cache=True)
    encoded = transformers.modeling_outputs.BaseModelOutput(last_hidden_state=out.encoder_last_hidden_state)
    tokens = [dec]
    for _ in range(steps):
        tokens.append(out.logits[:, -1:].argmax(-1))
        out = model(encoder_outputs=encoded, decoder_input_ids=tokens[-1], cache=out.cache, use_cache=True)
    return torch.cat(tokens, 1), out.logits


def test_t5_greedy_decode_with_cache_takes_dynamos_graph_count():
    model = _t5().eval()
    compiled = kiln.compile(model)
    with torch.no_grad():
        for _ in range(2):
            ids = torch.randint(0, 256, (2, 12))
            tokens, logits = _greedy(compiled, ids)
            expected_tokens, expected_logits = _greedy(model, ids)
            assert torch.equal(tokens, expected_tokens)
            torch.testing.assert_close(logits, expected_logits, **TOL)
    assert _counts() == (3, 0, 2), kiln.stats()["breaks"]


def test_t5_generate_with_a_compiled_forward_compiles_once_across_calls():
    # model.forward = compile(model.forward), then generate() as users call it. The first decoder
    # step's entry required every input container to be a distinct object, while transformers'
    # output registry maps T5ForConditionalGeneration and T5Stack to one shared dict: that entry
    # never matched again, and every generate() call compiled its first step anew.
    model = _t5(pad_token_id=0).eval()
    ids = torch.randint(1, 256, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        want = model.generate(input_ids=ids, attention_mask=mask, **kw)
        model.forward = kiln.compile(model.forward)
        model.generate(input_ids=ids, attention_mask=mask, **kw)
        before = _counts()
        for _ in range(2):
            assert torch.equal(model.generate(input_ids=ids, attention_mask=mask, **kw), want)
    assert _counts() == before
