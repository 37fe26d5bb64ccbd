"""The README's command examples are real: each ```console block starting with
`$ llmcalc ...` must show exactly what that command prints to stdout today.

Refresh them after a deliberate change with `python tests/test_readme.py`.
"""

import re
import shlex
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```console\n\$ (llmcalc [^\n]*)\n(.*?)```", re.S)


def _run(command: str) -> str:
    from tests.console import llmcalc  # the console script, as a user runs it

    result = llmcalc(*shlex.split(command)[1:])
    assert result.exit_code in (0, 1), (command, result.stderr)
    return result.stdout


def _blocks():
    return BLOCK.findall(README.read_text())


EXAMPLE = re.compile(r"`llmcalc params` total ([0-9,]+)[^\n]*:\n\n```yaml\n(.*?)```", re.S)


def test_readme_has_examples_of_every_command():
    shown = {cmd.split()[1] for cmd, _ in _blocks()}
    assert {"models", "params", "flops", "kvcache", "memory", "time", "hardware", "verify"} <= shown


@pytest.mark.parametrize("command, shown", _blocks(), ids=[c for c, _ in _blocks()])
def test_readme_output_is_current(command, shown):
    assert _run(command) == shown


@pytest.mark.parametrize("total, text", EXAMPLE.findall(README.read_text()))
def test_readme_example_configs_give_their_published_totals(total, text):
    """Each example config gives the parameter count of the released checkpoint it describes."""
    from llmcalc.analysis.config import load_text
    from llmcalc.analysis.params import count_params

    assert count_params(load_text(text, "README.yaml")).total == int(total.replace(",", ""))


def test_readme_examples_use_every_new_key():
    text = "".join(t for _, t in EXAMPLE.findall(README.read_text()))
    for key in ("layer_types", "attn_logit_softcap", "final_logit_softcap", "embedding_scale", "attention: mla",
                "q_lora_rank", "first_dense_layers", "shared_expert_d_ff", "shared_expert_gate", "router_bias",
                "expert_bias", "attention_sinks", "rotary_fraction", "norm_weight", "post_branch", "qk_norm: full",
                "rope_layers"):
        assert key in text, key


if __name__ == "__main__":
    sys.path.insert(0, str(README.parent))  # run as a script: `tests` from the source tree
    text = README.read_text()
    new = BLOCK.sub(lambda m: f"```console\n$ {m.group(1)}\n{_run(m.group(1))}```", text)
    README.write_text(new)
    print(f"refreshed {len(BLOCK.findall(new))} examples", file=sys.stderr)
