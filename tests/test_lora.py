"""LoRA adapters (issue 13, first part): trainable parameters, against closed forms and against
PEFT's own get_peft_model on transformers' models (built on meta: no weights)."""

import json
import warnings

import pytest
import torch

from llmcalc.analysis.config import load_model
from llmcalc.analysis.lora import LoRA, adapter_params

ATTENTION = "attention/q,attention/k,attention/v,attention/o"


def test_llama_2_7b_rank_16_on_attention(run):
    """r (d_in + d_out) per adapted matrix: 16 x (4,096 + 4,096) x 4 matrices x 32 layers."""
    data = json.loads(run("params", "llama-2-7b", "--lora-rank", "16", "--lora-targets", ATTENTION, "--json").stdout)
    lora = data["lora"]
    assert lora["trainable"] == 16 * (4096 + 4096) * 4 * 32 == 16_777_216
    assert lora["frozen"] == 6_738_415_616 and lora["scaling"] == 1.0
    assert lora["components"] == dict.fromkeys(ATTENTION.split(","), 16 * 8192 * 32)


def _peft_trainable(hf_model, **config) -> int:
    from peft import LoraConfig, get_peft_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = get_peft_model(hf_model, LoraConfig(**config))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("rank, targets, modules", [
    (16, ATTENTION, ["q_proj", "k_proj", "v_proj", "o_proj"]),
    (8, "all-linear", "all-linear"),
])
def test_dense_adapters_match_peft(rank, targets, modules):
    """Llama 2 7B's and Mistral 7B's shapes (GQA: k and v are narrower) in transformers, adapted by PEFT."""
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    shapes = [("llama-2-7b", LlamaForCausalLM, LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                                                          num_hidden_layers=32, num_attention_heads=32,
                                                          num_key_value_heads=32)),
              ("mistral-7b", MistralForCausalLM, MistralConfig(vocab_size=32000, hidden_size=4096,
                                                               intermediate_size=14336, num_hidden_layers=32,
                                                               num_attention_heads=32, num_key_value_heads=8))]
    for name, cls, hf in shapes:
        with torch.device("meta"):
            model = cls(hf)
        ours = sum(adapter_params(load_model(name), LoRA(rank, tuple(targets.split(",")))).values())
        assert ours == _peft_trainable(model, r=rank, target_modules=modules), name


def test_all_linear_is_every_layer_linear():
    """Llama 2 7B, rank 8 on every linear of every layer: PEFT's well-known 19,988,480."""
    adapters = adapter_params(load_model("llama-2-7b"), LoRA(8, ("all-linear",)))
    assert sum(adapters.values()) == 8 * 32 * (4 * 2 * 4096 + 3 * (4096 + 11008)) == 19_988_480


@pytest.mark.parametrize("args, message", [
    (["gpt2-small", "--lora-rank", "8", "--lora-targets", "mlp/gate"], "gpt2-small has no linear mlp/gate to adapt"),
    (["gpt2-small", "--lora-alpha", "8"], "--lora-alpha and --lora-targets need --lora-rank"),
    (["gpt2-small", "--lora-rank", "0"], "--lora-rank must be >= 1, got 0"),
    (["gpt2-small", "--lora-rank", "8", "--lora-targets", ","], "--lora-targets needs at least one breakdown key"),
    (["gpt2-small", "--lora-rank", "8", "--lora-alpha", "-1"], "--lora-alpha must be a positive number"),
])
def test_lora_usage_errors_exit_2(run, args, message):
    result = run("params", *args)
    assert result.exit_code == 2 and message in result.output, result.output
