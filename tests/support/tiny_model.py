"""A tiny random-weight model folder for the ATOM stand-in's simple_inference (config, vocab, torch weights)."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = [
    "the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree", "red", "blue", "big", "small", "and",
    "then", "slowly", "quickly", "home", "park", "sun", "moon", "jumped", "slept", "hello", "world",
]


FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "atom_pkg"


def _stand_in_decoder():
    """The model class from the ATOM stand-in's source, without installing the package on the host."""
    import importlib.util

    source = FIXTURE / "atom" / "examples" / "simple_inference.py"
    spec = importlib.util.spec_from_file_location("_atom_stand_in_simple_inference", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TinyDecoder


def make_tiny_model(path: Path, hidden: int = 16, max_len: int = 64, seed: int = 0) -> Path:
    """Write config.json, vocab.txt and model.pt (torch.save of a state dict) into path."""
    import torch

    TinyDecoder = _stand_in_decoder()
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = TinyDecoder(len(WORDS), hidden, max_len)
    torch.save(model.state_dict(), path / "model.pt")
    (path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    config = {"model_type": "atom-tiny", "hidden_size": hidden, "max_position_embeddings": max_len,
              "vocab_size": len(WORDS)}
    (path / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    return path
