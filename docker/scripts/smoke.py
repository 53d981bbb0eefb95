"""The smoke test inside the image: generate tokens with a user-given model and count them (stdlib + the image).

    python /opt/atom-build/smoke.py atom --model /model --min-tokens 10 -- python -m atom.examples.simple_inference ...
    python /opt/atom-build/smoke.py cpu  --model /model --min-tokens 10

atom: ATOM's own simple_inference (as ATOM's CI runs it), in this process, with LLMEngine.generate wrapped so the
      generated token ids ATOM returns ("token_ids" of each output) are counted; text is never re-tokenised
      (digit-grouping tokenizers would under-count). Passes when every prompt produced a token and at least one
      reached --min-tokens (max_tokens stops it there; an early EOS is a legitimate end).
cpu:  what a CPU can prove where aiter (and so ATOM) cannot import without ROCm: ATOM's simple_inference is
      installed and takes --max-tokens; the image's torch + transformers load the model folder and generate
      --min-tokens token ids greedily on the CPU. It does NOT prove ATOM's engine generates; the result says so.
Prints one line `SMOKE_RESULT {json}` and exits non-zero when generation failed or too few tokens came out.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import runpy
import sys
import traceback
from pathlib import Path

PROMPT = "The capital of France is"


def run_atom(command: list[str]) -> dict:
    """Run `python -m MODULE ARGS` in this process and collect what LLMEngine.generate returned."""
    if "-m" not in command:
        raise SystemExit("smoke: the atom mode runs `python -m MODULE ...`; got " + " ".join(command))
    at = command.index("-m")
    module, args = command[at + 1], command[at + 2:]
    from atom.model_engine import llm_engine  # noqa: PLC0415 - the image's ATOM

    captured: list[dict] = []
    original = llm_engine.LLMEngine.generate

    def generate(self, *a, **k):
        outputs = original(self, *a, **k)
        captured.extend(outputs)
        return outputs

    llm_engine.LLMEngine.generate = generate
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    counts = [len(out.get("token_ids") or []) for out in captured]
    return {"mode": "atom", "counted_by": "token_ids returned by atom LLMEngine.generate", "per_prompt": counts,
            "new_tokens": max(counts, default=0), "all_prompts_generated": bool(counts) and min(counts) > 0,
            "completion": captured[0].get("text") if captured else None,
            "proved": ["ATOM's engine generated tokens on the GPU with the model"], "not_proved": []}


def atom_entry_point() -> tuple[bool, str]:
    """ATOM's simple_inference is installed and declares --max-tokens (read from its file: it cannot import here)."""
    spec = importlib.util.find_spec("atom")
    if spec is None or not spec.submodule_search_locations:
        return False, "atom is not installed"
    path = Path(next(iter(spec.submodule_search_locations))) / "examples" / "simple_inference.py"
    if not path.is_file():
        return False, f"{path} is missing"
    flags = {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant) and n.value == "--max-tokens"}
    return bool(flags), f"{path} {'declares' if flags else 'lacks'} --max-tokens"


def run_cpu(model: str, min_tokens: int) -> dict:
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    entry_ok, entry_note = atom_entry_point()
    tokenizer = AutoTokenizer.from_pretrained(model)
    lm = AutoModelForCausalLM.from_pretrained(model, torch_dtype=torch.float32)
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        out = lm.generate(ids, max_new_tokens=min_tokens, min_new_tokens=min_tokens, do_sample=False)
    new = out[0, ids.shape[-1]:]
    return {"mode": "cpu", "counted_by": "token ids returned by transformers generate (CPU)",
            "per_prompt": [int(new.numel())], "new_tokens": int(new.numel()), "all_prompts_generated": new.numel() > 0,
            "completion": tokenizer.decode(new), "atom_entry_point": entry_note, "atom_entry_ok": entry_ok,
            "proved": ["the image's torch and transformers load the model folder and generate token ids on the CPU",
                       f"ATOM's entry point: {entry_note}"],
            "not_proved": ["ATOM's engine generating: it imports aiter, which needs ROCm and an AMD GPU"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("atom", "cpu"))
    parser.add_argument("--model", required=True)
    parser.add_argument("--min-tokens", type=int, default=10)
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    command = argv[cut + 1:]  # after `--`: the generation command (atom mode)
    try:
        result = run_atom(command) if args.mode == "atom" else run_cpu(args.model, args.min_tokens)
        ok = result["new_tokens"] >= args.min_tokens and result["all_prompts_generated"]
        if args.mode == "cpu":
            ok = ok and result["atom_entry_ok"]
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported as the smoke result, then exit 1
        result = {"mode": args.mode, "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:],
                  "new_tokens": 0}
        ok = False
    result.update(min_tokens=args.min_tokens, passed=ok)
    print("SMOKE_RESULT " + json.dumps(result), flush=True)
    if not ok:
        print(f"smoke: failed: {result.get('error') or str(result['new_tokens']) + ' new tokens'}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
