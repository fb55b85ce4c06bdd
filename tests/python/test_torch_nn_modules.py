"""torch.nn's own composite modules (nn.MultiheadAttention, nn.TransformerEncoderLayer, the
recurrent layers), called as users call them: captured without a break where Dynamo needs none,
and compared with eager (values, gradients)."""
import pytest
import torch
import torch.nn as nn

import kiln
from conftest import check


@pytest.fixture(autouse=True)
def fresh():
    kiln.reset()
    torch.manual_seed(0)


def test_multihead_attention_with_a_key_padding_mask_is_one_graph():
    # F.multi_head_attention_forward's private helpers (_none_or_dtype, _canonical_mask) were
    # recorded as operators: returning None for the absent attn_mask, each broke the graph.
    mha = nn.MultiheadAttention(32, 4, batch_first=True).eval()
    mask = torch.zeros(3, 10, dtype=torch.bool)
    mask[1, 7:] = True

    def f(x):
        out, weights = mha(x, x, x, key_padding_mask=mask)
        return out, weights

    check(f, lambda: [torch.randn(3, 10, 32)])


@pytest.mark.parametrize("training", [False, True])
def test_transformer_encoder_layer_is_one_graph(training):
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).train(training)
    check(lambda x: layer(x), lambda: [torch.randn(2, 12, 32)])


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_recurrent_layers_are_one_graph(cls):
    # RNNBase reads its parameters through weak references (`ref() is not weight` each call):
    # calling a weakref.ref was not supported, and the identity of two inputs always False.
    rnn = cls(8, 16, num_layers=2, batch_first=True)
    check(lambda x: rnn(x)[0], lambda: [torch.randn(3, 5, 8)])
