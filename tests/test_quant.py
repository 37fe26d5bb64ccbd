"""Quantized storage formats against the issue's closed form, against checkpoints transformers
quantizes with bitsandbytes on the CPU, and against the GPTQ, AWQ, FP8 and MXFP4 packings
written out here as their documentation gives them."""

import json

import pytest
import torch

from llmcalc.analysis.count.quant import Storage, checkpoint_bytes, stored_bytes
from llmcalc.analysis.load.catalog import load_model, load_path
from llmcalc.analysis.model.formats import FORMATS, WEIGHT_FORMATS

pytestmark = pytest.mark.reference


def test_every_format_a_user_can_name_has_a_formula():
    assert tuple(FORMATS) == WEIGHT_FORMATS


def test_nf4_double_quant_llama_2_7b():
    """The layer linears (32 x (4 x 4096^2 + 3 x 4096 x 11008) values) in 4 bits, an 8-bit absmax
    per 64 and an fp32 scale per 64 x 256; embeddings, head and norms in bf16."""
    linears = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    rest = (2 * 32000 * 4096 + 65 * 4096) * 2  # the embedding and head, 65 norms of 4,096, in bf16
    closed = linears * 4 // 8 + linears // 64 + linears // (64 * 256) * 4 + rest
    assert closed == 3_865_591_808
    got = checkpoint_bytes(load_model("llama-2-7b"), "nf4-dq")
    assert got - closed == 32 * 7 * (16 + 256) * 4  # the two code maps of every matrix


# -- bitsandbytes: the checkpoint transformers writes ---------------------------------------------

TINY = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(vocab_size=300, hidden_size=128, intermediate_size=320,
                                                      num_hidden_layers=2, num_attention_heads=4,
                                                      num_key_value_heads=2)),
    "qwen2-moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", dict(
        vocab_size=300, hidden_size=128, intermediate_size=192, moe_intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
        shared_expert_intermediate_size=96, tie_word_embeddings=False)),
}
BNB = {"nf4": dict(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
       "nf4-dq": dict(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True),
       "fp4": dict(load_in_4bit=True, bnb_4bit_quant_type="fp4"),
       "fp4-dq": dict(load_in_4bit=True, bnb_4bit_quant_type="fp4", bnb_4bit_use_double_quant=True),
       "llm-int8": dict(load_in_8bit=True)}


@pytest.mark.parametrize("model", TINY)
@pytest.mark.parametrize("fmt", BNB)
def test_bitsandbytes_checkpoints(tmp_path, model, fmt):
    """A bf16 model saved, loaded back quantized by transformers + bitsandbytes, saved again: its
    tensors' bytes (less bitsandbytes' JSON header per matrix) are llmcalc's figure for the
    config.json it writes, whose quantization_config llmcalc reads."""
    import transformers

    config_cls, model_cls, sizes = TINY[model]
    torch.manual_seed(0)
    getattr(transformers, model_cls)(getattr(transformers, config_cls)(**sizes)).to(torch.bfloat16).save_pretrained(
        tmp_path / "bf16")
    quantized = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "bf16", quantization_config=transformers.BitsAndBytesConfig(**BNB[fmt]), dtype=torch.bfloat16,
        device_map="cpu")
    quantized.save_pretrained(tmp_path / "q")
    measured = sum(t.numel() * t.element_size() for k, t in quantized.state_dict().items() if ".quant_state." not in k)
    cfg = load_path(tmp_path / "q" / "config.json")
    assert cfg.dtype == fmt
    assert checkpoint_bytes(cfg, fmt) == measured


# -- packings written out --------------------------------------------------------------------------

def _pack(values: torch.Tensor, bits: int, dim: int) -> torch.Tensor:
    """GPTQ/AWQ packing: 32 // bits consecutive values along ``dim`` into one int32 (the last
    partial word zero-padded)."""
    per = 32 // bits
    pad = -values.shape[dim] % per
    values = torch.nn.functional.pad(values.movedim(dim, -1), (0, pad)).to(torch.int64)
    words = values.reshape(*values.shape[:-1], -1, per)
    packed = sum(words[..., i] << (bits * i) for i in range(per))
    return packed.to(torch.int32).movedim(-1, dim)


def _gptq(d_in, d_out, group, bits):
    q = torch.randint(0, 2**bits, (d_in, d_out))
    groups = -(-d_in // group)
    return [_pack(q, bits, 0),  # qweight (d_in * bits / 32, d_out)
            _pack(torch.randint(0, 2**bits, (groups, d_out)), bits, 1),  # qzeros (groups, d_out * bits / 32)
            torch.ones(groups, d_out, dtype=torch.float16),  # scales
            torch.arange(d_in, dtype=torch.int32) // group]  # g_idx


def _awq(d_in, d_out, group, bits):
    groups = -(-d_in // group)
    return [_pack(torch.randint(0, 16, (d_in, d_out)), 4, 1),  # qweight (d_in, d_out / 8)
            _pack(torch.randint(0, 16, (groups, d_out)), 4, 1),  # qzeros
            torch.ones(groups, d_out, dtype=torch.float16)]  # scales


def _fp8(scales):
    def tensors(d_in, d_out, group, bits):
        return [torch.zeros(d_out, d_in, dtype=torch.float8_e4m3fn), torch.ones(scales(d_in, d_out, group))]
    return tensors


def _mxfp4(d_in, d_out, group, bits):
    blocks = -(-d_in // 32)
    return [torch.zeros(d_out, blocks, 16, dtype=torch.uint8),  # two E2M1 codes per byte, 32 per block
            torch.zeros(d_out, blocks, dtype=torch.uint8)]  # one E8M0 exponent per block


PACKINGS = {
    "gptq-int4": (_gptq, 4), "gptq-int8": (_gptq, 8), "awq-int4": (_awq, 4),
    "fp8-tensor": (_fp8(lambda i, o, g: (1,)), 8), "fp8-channel": (_fp8(lambda i, o, g: (o, 1)), 8),
    "fp8-block": (_fp8(lambda i, o, g: (-(-o // g), -(-i // g))), 8), "mxfp4": (_mxfp4, 4),
}


@pytest.mark.parametrize("fmt", PACKINGS)
@pytest.mark.parametrize("d_in, d_out, group", [(256, 128, 128), (512, 1376, 128), (200, 72, 64),
                                                 (96, 40, 32), (2880, 5760, 32)])
def test_packed_matrix_bytes(fmt, d_in, d_out, group):
    build, bits = PACKINGS[fmt]
    group = 32 if fmt == "mxfp4" else group
    tensors = build(d_in, d_out, group, bits)
    assert FORMATS[fmt].matrix_bytes(d_in, d_out, group) == sum(t.numel() * t.element_size() for t in tensors)


def test_mxfp4_is_4_25_bits():
    assert FORMATS["mxfp4"].matrix_bytes(2880, 5760, 32) * 8 == 2880 * 5760 * 4.25


# -- what stays in 16 bits --------------------------------------------------------------------------

def test_every_default_skip_names_a_component():
    """Each skip entry of every format is a key (or key prefix) some bundled or variant model has."""
    from llmcalc.analysis.load.catalog import bundled_names
    from llmcalc.analysis.model.architecture import build
    from tests.strategies import CONFIGS

    keys = {m.key for cfg in [*CONFIGS.values(), *map(load_model, bundled_names())] for m, _ in build(cfg).linears()}
    for f in FORMATS.values():
        for entry in f.skip + f.fixed:
            assert any(k == entry or k.startswith(entry + "/") for k in keys), (f.name, entry)


def test_deepseek_mxfp4_keeps_shared_experts_in_bf16():
    """Only the routed experts are MXFP4: DeepSeek-V3's shared experts and attention stay bf16."""
    cfg = load_model("deepseek-v3")
    plain, mx = stored_bytes(cfg, Storage.of("fp8-tensor", skip=("lm_head", "attention", "mlp", "moe")), "bf16"), \
        stored_bytes(cfg, Storage.of("mxfp4"), "bf16")
    assert [k for k in plain if plain[k] != mx[k]] == ["moe/experts"]


def test_gpt_oss_quantizes_its_experts_only():
    cfg = load_model("gpt-oss-20b")
    stored = stored_bytes(cfg, Storage.of("mxfp4"), "bf16")
    plain = stored_bytes(cfg, Storage.of("mxfp4", skip=("lm_head", "attention", "moe")), "bf16")
    changed = [k for k in stored if stored[k] != plain[k]]
    assert changed == ["moe/experts"]


def _hf(tmp_path, quantization, **extra):
    data = {"model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 256, "quantization_config": quantization, **extra}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return load_path(path)


@pytest.mark.parametrize("quantization, dtype, group, skip", [
    ({"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": False}, "gptq-int4", 64, None),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, "gptq-int8", 2**53, None),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}, "awq-int4", 128, None),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8-block", 128, None),
    ({"quant_method": "fbgemm_fp8"}, "fp8-channel", None, None),
    # MiniMax-M2.5's list: the router's score correction is a vector, never quantized
    ({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["e_score_correction_bias",
                                                                                        "lm_head"]},
     "fp8-block", 128, ("lm_head",)),
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.embed_tokens",
                                                          "lm_head"]},
     "mxfp4", None, ("attention", "lm_head")),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "llm_int8_skip_modules": ["lm_head", "mlp"]},
     "fp4", None, ("lm_head", "mlp")),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
      "bnb_4bit_use_double_quant": False, "llm_int8_skip_modules": ["model.layers.*.mlp.down_proj", "o_proj"]},
     "nf4", None, ("mlp/down", "attention/o")),
    ({"quant_method": "awq", "w_bit": 4, "q_group_size": 64}, "awq-int4", 64, None),
])
def test_quantization_config_is_read(tmp_path, quantization, dtype, group, skip):
    cfg = _hf(tmp_path, quantization)
    assert (cfg.dtype, cfg.quant_group_size, cfg.quant_skip) == (dtype, group, skip)


def test_an_empty_skip_list_quantizes_the_head_too(tmp_path):
    cfg = _hf(tmp_path, {"quant_method": "bitsandbytes", "load_in_8bit": True,
                         "llm_int8_skip_modules": ["model.embed_tokens"]})
    assert cfg.quant_skip == ()
    head = 320 * 64
    assert checkpoint_bytes(cfg, "llm-int8") - checkpoint_bytes(cfg.replace(quant_skip=None), "llm-int8") == \
        (head + 320 * 4 + 1) - 2 * head


def test_group_size_and_skip_change_the_size(tmp_path):
    """GPTQ at group 64 stores twice the scales and zeros of group 128; skipping the MLP keeps
    its three matrices in bf16."""
    default = checkpoint_bytes(load_model("llama-2-7b"), "gptq-int4")
    linears = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    g64 = checkpoint_bytes(load_model("llama-2-7b").replace(dtype="gptq-int4", quant_group_size=64), "gptq-int4")
    assert g64 - default == linears // 128 * 5 // 2  # per extra group and output: fp16 scale, 4-bit zero
    size = FORMATS["gptq-int4"].matrix_bytes
    skip = load_model("llama-2-7b").replace(dtype="gptq-int4", quant_skip=("lm_head", "mlp"))
    mlp = 32 * 3 * 4096 * 11008
    assert checkpoint_bytes(skip, "gptq-int4") - default == 2 * mlp - 32 * (2 * size(4096, 11008, 128)
                                                                           + size(11008, 4096, 128))


# -- the command line ------------------------------------------------------------------------------

def test_memory_inference_with_a_format(run):
    result = run("memory", "llama-2-7b", "--mode", "inference", "--weights-dtype", "nf4-dq", "--seq", "4096",
                 "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["weights"] == 3_865_835_520  # test_nf4_double_quant_llama_2_7b
    assert report["kv_cache"] == 2 * 32 * 4096 * 4096 * 2


@pytest.mark.parametrize("args, message", [
    (("memory", "llama-2-7b", "--mode", "inference", "--weights-dtype", "nf5"), "--weights-dtype"),
    (("kvcache", "llama-2-7b", "--kv-dtype", "nf4"), "--kv-dtype"),
    # MXFP4 quantizes routed experts alone (GPT-OSS): a dense model would stay in bf16 whole
    (("memory", "llama-2-7b", "--mode", "inference", "--weights-dtype", "mxfp4"),
     "--weights-dtype mxfp4 quantizes none of llama-2-7b's matrices: it keeps lm_head, attention, mlp, moe/router, "
     "moe/shared_experts, moe/shared_expert_gate in the compute dtype"),
    # d_ff 11,008 over 8 GPUs: 1,376 inputs of mlp/down per shard, 10.75 groups of 128
    (("memory", "llama-2-7b", "--mode", "inference", "--weights-dtype", "awq-int4", "--tp", "8"),
     "--tp 8 splits the 11,008 inputs of mlp/down into shards of 1,376, not a whole number of awq-int4's 128-wide "
     "groups (vLLM refuses it)"),
    # vLLM pads MXFP4's expert shards to 64 values (360 to 384), which llmcalc refuses to guess at
    (("memory", "gpt-oss-120b", "--mode", "inference", "--weights-dtype", "mxfp4", "--tp", "8"),
     "--tp 8 splits the 2,880 inputs of moe/experts into shards of 360, not a whole number of mxfp4's 32-wide "
     "groups (vLLM pads each shard to a multiple of 64, which llmcalc does not size yet)"),
    # fp8-block's 128 x 128 blocks on the output dim too: mlp/up's 11,008 outputs over 4 GPUs, 21.5 blocks each
    (("memory", "llama-2-7b", "--mode", "inference", "--weights-dtype", "fp8-block", "--tp", "4"),
     "--tp 4 splits the 11,008 outputs of mlp/up into shards of 2,752, not a whole number of fp8-block's "
     "128-wide blocks (vLLM refuses it)"),
])
def test_format_usage_errors_exit_2(run, args, message):
    result = run(*args)
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.output


@pytest.mark.parametrize("quantization, message", [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": "false"},
     "key 'quantization_config.bnb_4bit_use_double_quant': must be true or false, got 'false'"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": "false", "load_in_8bit": True},
     "key 'quantization_config.load_in_4bit': must be true or false"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": True},
     "key 'quantization_config': bitsandbytes needs exactly one of load_in_4bit and load_in_8bit"),
    ({"quant_method": "gptq", "bits": 4.0}, "key 'quantization_config.bits': gptq stores 4 or 8 bits here, got 4.0"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": ["model.layers.0.mlp"]},
     "'model.layers.0.mlp' names one layer's module"),
    ({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["mlp.gate"]},
     "key 'quant_skip': moe/router names none of the model's linears"),
])
def test_bad_quantization_configs_exit_2(tmp_path, run, quantization, message):
    data = {"model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 256, "quantization_config": quantization}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    result = run("params", path)
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.output


@pytest.mark.parametrize("text, message", [
    ("quant_group_size: 64\n", "key 'quant_group_size': applies only to a quantized dtype"),
    ("dtype: gptq-int4\nquant_skip: [router]\n", "key 'quant_skip': router names none of the model's linears"),
    ("dtype: fp8-channel\nquant_group_size: 64\n",
     "key 'quant_group_size': applies only to a quantized dtype with blocks or groups"),
])
def test_quant_keys_checked(config_file, run, text, message):
    base = "name: t\nvocab_size: 64\ncontext_length: 32\nd_model: 32\nn_layers: 2\nn_heads: 4\nd_ff: 64\n"
    result = run("params", config_file(base + text))
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.output
