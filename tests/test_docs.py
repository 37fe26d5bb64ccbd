"""The README's and the docs' command examples are real: each ```console block starting with
`$ llmcalc ...` shows exactly what that command prints today, as a terminal shows it: its warnings
(stderr, written before the results) and then stdout. A line `...` alone stands for lines left out
(long verify reports show their head and their tail).

Refresh them after a deliberate change with `python tests/test_docs.py` (an elided block keeps as
many head and tail lines as it had)."""

import functools
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"```console\n\$ (llmcalc [^\n]*)\n(.*?)```", re.S)
ELIDED = "...\n"


@functools.cache  # an example shown on two pages runs once
def _run(command: str) -> str:
    from tests.console import llmcalc  # the console script, as a user runs it

    result = llmcalc(*shlex.split(command)[1:])
    assert result.exit_code in (0, 1), (command, result.stderr)
    return result.stderr + result.stdout


def _blocks() -> list[tuple[str, str, str]]:
    return [(page.relative_to(ROOT).as_posix(), command, shown) for page in PAGES
            for command, shown in BLOCK.findall(page.read_text())]


def _matches(shown: str, output: str) -> bool:
    """``shown`` is ``output``, or its head and tail around a ``...`` line."""
    if f"\n{ELIDED}" not in f"\n{shown}":
        return shown == output
    head, tail = f"\n{shown}".split(f"\n{ELIDED}", 1)
    head = head[1:] + "\n" if head else ""
    return output.startswith(head) and output.endswith(tail) and len(head) + len(tail) < len(output)


@pytest.mark.unit
def test_every_command_has_an_example():
    shown = {command.split()[1] for _, command, _ in _blocks()}
    assert {"models", "params", "flops", "kvcache", "memory", "time", "plan", "hardware", "verify"} <= shown


NO_MAPPER = "docs/examples/no-mapper/"  # configs counted by transformers' own model (torch)


def _cases():
    """Each example in the unit tier, those of `llmcalc verify` and of a model without a mapper
    (torch) in the reference tier."""
    return [pytest.param(page, command, shown, id=f"{page}: {command}",
                         marks=[pytest.mark.reference, pytest.mark.slow] if command.split()[1] == "verify"
                         else pytest.mark.reference if NO_MAPPER in command else pytest.mark.unit)
            for page, command, shown in _blocks()]


@pytest.mark.parametrize("page, command, shown", _cases())
def test_example_output_is_current(page, command, shown):
    assert _matches(shown, _run(command))


EXAMPLE = re.compile(r"`llmcalc params` total ([0-9,]+)[^\n]*:\n\n```yaml\n(.*?)```", re.S)
CONFIGS = (ROOT / "docs" / "config.md").read_text()


@pytest.mark.unit
@pytest.mark.parametrize("total, text", EXAMPLE.findall(CONFIGS))
def test_example_configs_give_their_published_totals(total, text):
    """Each example config gives the parameter count of the released checkpoint it describes."""
    from llmcalc.analysis.count.params import count_params
    from llmcalc.analysis.load.catalog import load_text

    assert count_params(load_text(text, "example.yaml")).total == int(total.replace(",", ""))


@pytest.mark.unit
def test_example_configs_use_every_new_key():
    text = "".join(t for _, t in EXAMPLE.findall(CONFIGS))
    for key in ("layer_types", "attn_logit_softcap", "final_logit_softcap", "embedding_scale", "attention: mla",
                "q_lora_rank", "first_dense_layers", "shared_expert_d_ff", "shared_expert_gate", "router_bias",
                "expert_bias", "attention_sinks", "rotary_fraction", "norm_weight", "post_branch", "qk_norm: full",
                "rope_layers"):
        assert key in text, key
    assert "embedding_norm" in text
    assert "position_offset" in text


def _refresh(shown: str, output: str) -> str:
    if f"\n{ELIDED}" not in f"\n{shown}":
        return output
    head, tail = f"\n{shown}".split(f"\n{ELIDED}", 1)
    lines = output.splitlines(keepends=True)
    keep_head, keep_tail = len(head[1:].splitlines()), len(tail.splitlines())
    return "".join(lines[:keep_head]) + ELIDED + "".join(lines[len(lines) - keep_tail:])


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # run as a script: `tests` from the source tree
    count = 0
    for page in PAGES:
        text = page.read_text()
        new = BLOCK.sub(lambda m: f"```console\n$ {m.group(1)}\n{_refresh(m.group(2), _run(m.group(1)))}```", text)
        count += len(BLOCK.findall(new))
        page.write_text(new)
    print(f"refreshed {count} examples", file=sys.stderr)


@pytest.mark.unit
def test_every_model_type_has_its_row():
    """The Hugging Face page lists every model_type llmcalc reads (language models, then multimodal
    checkpoints), each with the checkpoint its test uses, and no other."""
    from llmcalc.analysis.load.hf import MAPPERS
    from llmcalc.analysis.load.hf.vision import MULTIMODAL

    page = (ROOT / "docs" / "huggingface.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|", page, re.M)
    assert sorted(rows) == sorted(["model_type", "model_type", *MAPPERS, *MULTIMODAL])  # the two headers
