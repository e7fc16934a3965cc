"""reshard's folders and adapters against torch, transformers and PEFT (see
check-hf-clients.sh, which runs this in a virtual environment that has them).

Per case: a small random model saved with save_pretrained, an adapter made and
saved by PEFT (its factors randomised, so that every delta is non-zero), then
reshard's command, then what the libraries say of the result:
- the folder loads with from_pretrained with no missing or unexpected keys, in
  the dtype asked for;
- its logits equal the reference's (0 where the bytes are the same);
- every merged weight is within 1 ulp of W's dtype of PEFT's merge_and_unload;
  ulps are measured at the size of the terms summed, |W| + s * |B| |A| (times
  DoRA's |m| / norm), since PEFT's matmul sums in another order and, on a bf16
  base, rounds the delta before adding it: where W and ΔW nearly cancel, the
  result's own ulp says nothing about rounding. f32 is allowed 4 such ulps.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import warnings

# The table is the output: no progress bars, and the libraries' advice about
# training setups (tied embeddings, sharded saves) is not this check's concern.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
warnings.filterwarnings("ignore", module="(peft|transformers)(\\.|$)")
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

MANTISSA_BITS = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}
DTYPE_FLAG = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


@dataclass
class Row:
    case: str
    loads: str = "-"
    dtype: str = "-"
    logit_diff: float = float("nan")
    ulp: float = float("nan")
    notes: list[str] = field(default_factory=list)
    ok: bool = True


def llama_config(tied: bool, bias: bool = False) -> LlamaConfig:
    return LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=96, max_position_embeddings=64, tie_word_embeddings=tied,
                       attention_bias=bias)


def gpt2_config() -> GPT2Config:
    return GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=96, n_positions=64)


def make_base(config, dtype: torch.dtype, folder: Path, seed: int) -> None:
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).to(dtype)
    with torch.no_grad():  # biases are zero at init: make them count
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0, 0.1)
    model.generation_config.do_sample = False
    model.save_pretrained(folder)


def load(folder: Path, dtype: torch.dtype | str = "auto"):
    """The folder as from_pretrained loads it; "auto" takes the dtype its config.json gives."""
    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True, dtype=dtype)
    return model.eval(), info


def logits(model, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens).logits.float()


def randomise_adapter(model, seed: int) -> None:
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name or "modules_to_save" in name:
                if "magnitude" in name:
                    p.mul_(1 + 0.2 * torch.rand_like(p))
                else:
                    p.copy_(torch.randn_like(p) * 0.2)


def reshard(binary: str, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([binary, *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"reshard {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}")
    return result


def ulp_of(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One unit in the last place of dtype at |x| (the smallest normal's below it)."""
    tiny = torch.finfo(dtype).tiny
    e = torch.floor(torch.log2(torch.clamp(x.abs().double(), min=tiny)))
    return torch.pow(2.0, e - MANTISSA_BITS[dtype])


def term_scales(peft_model) -> dict[str, torch.Tensor]:
    """Per merged tensor, the size of the terms its elements sum, |W| + s * |B| |A| (times DoRA's |m| / norm):
    the scale at which f32 rounding of a sum in another order is measured."""
    scales = {}
    for name, module in peft_model.named_modules():
        embedding = "default" in getattr(module, "lora_embedding_A", {})
        if not embedding and "default" not in getattr(module, "lora_A", {}):
            continue
        key = name.removeprefix("base_model.model.")
        s = module.scaling["default"]
        w = module.get_base_layer().weight.detach().double()
        if embedding:
            a, b = module.lora_embedding_A["default"], module.lora_embedding_B["default"]
        else:
            a, b = module.lora_A["default"].weight, module.lora_B["default"].weight
        a, b = a.detach().double(), b.detach().double()
        transposed = embedding or module.fan_in_fan_out
        terms = (b.abs() @ a.abs()) * s
        delta = (b @ a) * s
        terms, delta = (terms.T, delta.T) if transposed else (terms, delta)
        scale = w.abs() + terms
        if "default" in getattr(module, "lora_magnitude_vector", {}):
            m = module.lora_magnitude_vector["default"].weight.detach().double()
            v = w + delta
            norm = torch.linalg.norm(v, dim=0 if transposed else 1)
            factor = (m / norm).abs()
            scale = scale * (factor.view(1, -1) if transposed else factor.view(-1, 1))
        scales[key + ".weight"] = scale
        if getattr(module, "lora_bias", {}).get("default"):
            bias = module.get_base_layer().bias.detach().double()
            scales[key + ".bias"] = bias.abs() + module.lora_B["default"].bias.detach().double().abs() * s
    # A tied output embedding is the input embedding's tensor: the same terms.
    if getattr(peft_model.config, "tie_word_embeddings", False):
        for inputs, outputs in (("model.embed_tokens.weight", "lm_head.weight"), ("transformer.wte.weight", "lm_head.weight")):
            if inputs in scales:
                scales[outputs] = scales[inputs]
    return scales


def max_ulps(ours: dict, ref: dict, scales: dict, dtype: torch.dtype) -> float:
    """Largest |ours - ref| over all tensors, in ulps of dtype at the terms' scale (the result's own where no
    delta was added). In bf16 too: PEFT rounds the delta to W's dtype before adding it, an error of up to half
    an ulp of the delta's terms, however small the sum."""
    worst = 0.0
    for name, r in ref.items():
        o, r = ours[name].double(), r.double()
        scale = torch.maximum(scales[name], r.abs()) if name in scales else r.abs()
        diff = (o - r).abs() / ulp_of(scale, dtype)
        worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
    return worst


def check_loaded(row: Row, model, info, dtype: torch.dtype) -> None:
    missing, unexpected = info["missing_keys"], info["unexpected_keys"]
    row.loads = "yes" if not missing and not unexpected else f"missing {len(missing)}, unexpected {len(unexpected)}"
    row.dtype = str(model.dtype).removeprefix("torch.")
    if missing or unexpected:
        row.ok = False
        row.notes.append(f"missing {missing[:3]} unexpected {unexpected[:3]}")
    if model.dtype != dtype:
        row.ok = False
        row.notes.append(f"loaded as {model.dtype}, asked for {dtype}")


def convert_case(binary: str, work: Path, name: str, base: Path, dtype: torch.dtype, cast: torch.dtype | None,
                 tokens: torch.Tensor) -> Row:
    row = Row(f"{name}: convert" + (f" --dtype {DTYPE_FLAG[cast]}" if cast else ""))
    out = work / f"{name}-convert-{DTYPE_FLAG[cast] if cast else 'same'}"
    args = ["convert", str(base), str(out), "--max-shard-size", "20KB"]
    if cast:
        args += ["--dtype", DTYPE_FLAG[cast]]
    reshard(binary, *args)
    model, info = load(out)
    check_loaded(row, model, info, cast or dtype)
    for f in ("config.json", "generation_config.json"):
        if not (out / f).exists():
            row.ok = False
            row.notes.append(f"no {f}")
    reference, _ = load(base, cast or dtype)
    row.logit_diff = float((logits(model, tokens) - logits(reference, tokens)).abs().max())
    if row.logit_diff != 0:  # the same bytes (a reference cast by torch rounds as reshard does)
        row.ok = False
    return row


def merge_case(binary: str, work: Path, name: str, base: Path, dtype: torch.dtype, lora: LoraConfig,
               tokens: torch.Tensor, seed: int) -> list[Row]:
    adapter = work / f"{name}-adapter"
    peft_model = get_peft_model(load(base)[0], lora)
    randomise_adapter(peft_model, seed)
    scales = term_scales(peft_model)
    peft_model.save_pretrained(adapter)
    # The reference: PEFT loading its own adapter, merged.
    reference = PeftModel.from_pretrained(load(base)[0], adapter).merge_and_unload().eval()
    ref_state = {k: v.detach() for k, v in reference.state_dict().items()}
    ref_logits = logits(reference, tokens)
    rows = []
    row = Row(f"{name}: merge-lora")
    out = work / f"{name}-merged"
    reshard(binary, "merge-lora", str(base), str(adapter), str(out))
    model, info = load(out)
    check_loaded(row, model, info, dtype)
    ours = {k: v.detach() for k, v in model.state_dict().items()}
    row.ulp = max_ulps(ours, ref_state, scales, dtype)
    row.logit_diff = float((logits(model, tokens) - ref_logits).abs().max())
    limit = 4.0 if dtype == torch.float32 else 1.0
    if row.ulp > limit:
        row.ok = False
        row.notes.append(f"merge off by {row.ulp:.2f} ulp (limit {limit})")
    tolerance = 1e-4 if dtype == torch.float32 else 0.1 * float(ref_logits.abs().max())
    if row.logit_diff > tolerance:
        row.ok = False
        row.notes.append(f"logits off by {row.logit_diff:.3g}")
    rows.append(row)
    rows.extend(export_variant_cases(binary, work, name, base, adapter, dtype, ref_state, scales, tokens))
    if dtype == torch.float32:  # the cast: both dtype keys, loads as bf16
        row = Row(f"{name}: merge-lora --dtype bf16")
        out = work / f"{name}-merged-bf16"
        reshard(binary, "merge-lora", str(base), str(adapter), str(out), "--dtype", "bf16")
        config = json.loads((out / "config.json").read_text())
        model, info = load(out)
        check_loaded(row, model, info, torch.bfloat16)
        for key in ("dtype", "torch_dtype"):
            if key in config and config[key] != "bfloat16":
                row.ok = False
                row.notes.append(f"config {key} {config[key]}")
        ours = {k: v.detach() for k, v in model.state_dict().items()}
        cast_ref = {k: v.to(torch.bfloat16) for k, v in ref_state.items()}
        row.ulp = max_ulps(ours, cast_ref, scales, torch.bfloat16)
        row.logit_diff = float((logits(model, tokens) - logits(reference.to(torch.bfloat16), tokens)).abs().max())
        reference.to(torch.float32)
        if row.ulp > 1.0:
            row.ok = False
            row.notes.append(f"bf16 merge off by {row.ulp:.2f} ulp")
        rows.append(row)
    return rows


def export_cases(binary: str, work: Path, name: str, base: Path, dtype: torch.dtype, tokens: torch.Tensor) -> list[Row]:
    """HF folder + PEFT adapter -> import -> checkpoint -> export as a model, an adapter and a merged model."""
    adapter = work / f"{name}-plain-adapter"
    both = work / f"{name}-with-adapter"
    shutil.copytree(base, both, dirs_exist_ok=True)
    for f in ("adapter_model.safetensors", "adapter_config.json"):
        shutil.copy(adapter / f, both / f)
    ckpt = work / f"{name}-ckpt"
    reshard(binary, "import", str(both), str(ckpt), "--map", "levanter-llama", "--mesh", "x=2", "--best-effort", "x")
    base_model = load(base)[0]
    peft_ref = PeftModel.from_pretrained(load(base)[0], adapter).eval()
    peft_logits = logits(peft_ref, tokens)
    rows = []

    row = Row(f"{name}: import + export")
    out = work / f"{name}-export-model"
    reshard(binary, "export", str(ckpt), str(out), "--map", "levanter-llama")
    model, info = load(out)
    check_loaded(row, model, info, dtype)
    if not (out / "generation_config.json").exists():
        row.ok = False
        row.notes.append("no generation_config.json")
    row.logit_diff = float((logits(model, tokens) - logits(base_model, tokens)).abs().max())
    row.ok = row.ok and row.logit_diff == 0
    rows.append(row)

    row = Row(f"{name}: export --adapter-only, PEFT loads it")
    out = work / f"{name}-export-adapter"
    reshard(binary, "export", str(ckpt), str(out), "--map", "levanter-llama", "--adapter-only", "--base", str(base))
    loaded = PeftModel.from_pretrained(load(base)[0], out).eval()
    expected = {k for k in peft_ref.state_dict() if "lora_" in k}
    got = {k for k in loaded.state_dict() if "lora_" in k}
    row.loads = "yes" if expected == got else f"{len(expected ^ got)} keys differ"
    row.dtype = str(next(p for k, p in loaded.named_parameters() if "lora_A" in k).dtype).removeprefix("torch.")
    row.logit_diff = float((logits(loaded, tokens) - peft_logits).abs().max())
    row.ok = expected == got and row.logit_diff == 0
    rows.append(row)

    row = Row(f"{name}: export --merge-lora")
    out = work / f"{name}-export-merged"
    reshard(binary, "export", str(ckpt), str(out), "--map", "levanter-llama", "--merge-lora")
    model, info = load(out)
    check_loaded(row, model, info, dtype)
    ours = {k: v.detach() for k, v in model.state_dict().items()}
    merged_ref = PeftModel.from_pretrained(load(base)[0], adapter)
    scales = term_scales(merged_ref)
    merged_ref = merged_ref.merge_and_unload().eval()
    row.ulp = max_ulps(ours, {k: v.detach() for k, v in merged_ref.state_dict().items()}, scales, dtype)
    row.logit_diff = float((logits(model, tokens) - logits(merged_ref, tokens)).abs().max())
    limit = 4.0 if dtype == torch.float32 else 1.0
    if row.ulp > limit:
        row.ok = False
        row.notes.append(f"merge off by {row.ulp:.2f} ulp (limit {limit})")
    rows.append(row)
    return rows


def identity_map(*files: Path) -> str:
    """A map file that keeps every tensor of `files` under its own name."""
    from safetensors import safe_open

    names = []
    for f in files:
        with safe_open(str(f), "pt") as opened:
            names.extend(opened.keys())
    return json.dumps({"rules": [{"from": n, "to": n} for n in names]})


def export_variant_cases(binary: str, work: Path, name: str, base: Path, adapter: Path, dtype: torch.dtype,
                         ref_state: dict, scales: dict, tokens: torch.Tensor) -> list[Row]:
    """Base + adapter -> import -> checkpoint (2 shards) -> export --merge-lora and --adapter-only."""
    both = work / f"{name}-with-adapter"
    shutil.copytree(base, both, dirs_exist_ok=True)
    for f in ("adapter_model.safetensors", "adapter_config.json"):
        shutil.copy(adapter / f, both / f)
    map_file = work / f"{name}-identity-map.json"
    map_file.write_text(identity_map(*sorted(base.glob("*.safetensors")), adapter / "adapter_model.safetensors"))
    ckpt = work / f"{name}-variant-ckpt"
    reshard(binary, "import", str(both), str(ckpt), "--map", str(map_file), "--mesh", "x=2", "--best-effort", "x")
    rows = []

    row = Row(f"{name}: import + export --merge-lora")
    out = work / f"{name}-export-merged"
    reshard(binary, "export", str(ckpt), str(out), "--map", str(map_file), "--merge-lora")
    model, info = load(out)
    check_loaded(row, model, info, dtype)
    ours = {k: v.detach() for k, v in model.state_dict().items()}
    row.ulp = max_ulps(ours, ref_state, scales, dtype)
    merge_lora_out = load(work / f"{name}-merged")[0]
    row.logit_diff = float((logits(model, tokens) - logits(merge_lora_out, tokens)).abs().max())
    limit = 4.0 if dtype == torch.float32 else 1.0
    if row.ulp > limit:
        row.ok = False
        row.notes.append(f"merge off by {row.ulp:.2f} ulp (limit {limit})")
    if row.logit_diff != 0:  # the same bytes as merge-lora's
        row.ok = False
        row.notes.append("logits differ from merge-lora's")
    rows.append(row)

    row = Row(f"{name}: import + export --adapter-only, PEFT loads it")
    out = work / f"{name}-export-adapter-variant"
    reshard(binary, "export", str(ckpt), str(out), "--map", str(map_file), "--adapter-only", "--base", str(base))
    theirs = PeftModel.from_pretrained(load(base)[0], adapter).eval()
    loaded = PeftModel.from_pretrained(load(base)[0], out).eval()
    expected, got = set(theirs.state_dict()), set(loaded.state_dict())
    row.loads = "yes" if expected == got else f"{len(expected ^ got)} keys differ"
    row.dtype = str(next(p for k, p in loaded.named_parameters() if "lora_" in k).dtype).removeprefix("torch.")
    row.logit_diff = float((logits(loaded, tokens) - logits(theirs, tokens)).abs().max())
    merged_logits = logits(merge_lora_out, tokens)
    tolerance = 1e-4 if dtype == torch.float32 else 0.1 * float(merged_logits.abs().max())
    merged_diff = float((logits(loaded, tokens) - merged_logits).abs().max())
    peft_own_diff = float((logits(theirs, tokens) - merged_logits).abs().max())
    if merged_diff > tolerance and peft_own_diff > tolerance:
        # PEFT's own adapter differs from its own merge here too: a LoRA on a
        # tied embedding, merged, also changes the head tied to it.
        row.notes.append(f"unmerged vs merged {merged_diff:.3g}, as PEFT's own ({peft_own_diff:.3g}): tied embedding")
    elif merged_diff > tolerance:
        row.notes.append(f"logits {merged_diff:.3g} from the merged model's")
    row.ok = expected == got and row.logit_diff == 0 and (merged_diff <= tolerance or peft_own_diff > tolerance)
    rows.append(row)
    return rows


def refusal_case(binary: str, work: Path, base: Path) -> Row:
    row = Row("refusals: IA3, garbage config, no magnitudes")
    adapter = work / "refusal-adapter"
    shutil.rmtree(adapter, ignore_errors=True)
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes((work / "llama-f32-untied-plain-adapter" /
                                                         "adapter_model.safetensors").read_bytes())
    for config, needle in [('{"peft_type": "IA3"}', "IA3"), ("{ nope", "JSON"),
                           ('{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_dora": true}', "use_dora")]:
        (adapter / "adapter_config.json").write_text(config)
        out = work / "refused"
        result = subprocess.run([binary, "merge-lora", str(base), str(adapter), str(out)], capture_output=True,
                                text=True)
        if result.returncode != 1 or needle not in result.stderr or out.exists():
            row.ok = False
            row.notes.append(f"{needle}: exit {result.returncode}: {result.stderr.strip()[:80]}")
    row.loads = "n/a"
    return row


def variants(arch: str, tied: bool) -> list[tuple[str, LoraConfig]]:
    if arch == "gpt2":
        return [
            ("fan_in_fan_out", LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"],
                                          fan_in_fan_out=True)),
            ("fan_in_fan_out+dora", LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True,
                                               use_dora=True)),
            ("lora_bias", LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True,
                                     lora_bias=True)),
        ]
    out = [
        ("plain", LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])),
        ("rslora+patterns", LoraConfig(r=4, lora_alpha=8, use_rslora=True,
                                       target_modules=["q_proj", "v_proj", "down_proj"],
                                       rank_pattern={"v_proj": 2}, alpha_pattern={"layers\\.1\\.self_attn\\.q_proj": 3})),
        ("dora", LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "o_proj", "up_proj"], use_dora=True)),
        ("embedding", LoraConfig(r=4, lora_alpha=8, target_modules=["embed_tokens", "q_proj"])),
    ]
    if not tied:
        out.append(("modules_to_save", LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"],
                                                  modules_to_save=["lm_head"])))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reshard", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    tokens = torch.randint(0, 96, (2, 12))
    rows: list[Row] = []
    seed = 1
    models = [("llama", "untied", llama_config(False)), ("llama", "tied", llama_config(True)),
              ("gpt2", "tied", gpt2_config())]
    for arch, ties, config in models:
        for dtype in (torch.float32, torch.bfloat16):
            name = f"{arch}-{DTYPE_FLAG[dtype]}-{ties}"
            base = work / f"{name}-base"
            seed += 1
            make_base(config, dtype, base, seed)
            rows.append(convert_case(args.reshard, work, name, base, dtype, None, tokens))
            if dtype == torch.float32:
                rows.append(convert_case(args.reshard, work, name, base, dtype, torch.bfloat16, tokens))
            for variant, lora in variants(arch, ties == "tied"):
                seed += 1
                try:
                    rows.extend(merge_case(args.reshard, work, f"{name}-{variant}", base, dtype, lora, tokens, seed))
                except Exception as e:  # one case's failure is a row, not the end of the table
                    rows.append(Row(f"{name}-{variant}", ok=False, notes=[f"{type(e).__name__}: {e}"[:200]]))
            if arch == "llama":  # the levanter-llama map: a Llama through a training framework's layout
                try:
                    rows.extend(export_cases(args.reshard, work, name, base, dtype, tokens))
                except Exception as e:
                    rows.append(Row(f"{name}: import + export", ok=False, notes=[f"{type(e).__name__}: {e}"[:200]]))
    rows.append(refusal_case(args.reshard, work, work / "llama-f32-untied-base"))

    width = max(len(r.case) for r in rows)
    print(f"\n{'case':<{width}}  {'loads (no missing/unexpected)':<30} {'dtype':<9} {'max logit diff':>14} "
          f"{'max merge ulp':>13}  result")
    for r in rows:
        ulp = "-" if math.isnan(r.ulp) else f"{r.ulp:.2f}"
        diff = "-" if math.isnan(r.logit_diff) else f"{r.logit_diff:.3g}"
        print(f"{r.case:<{width}}  {r.loads:<30} {r.dtype:<9} {diff:>14} {ulp:>13}  "
              f"{'ok' if r.ok else 'FAIL'}{'  ' + '; '.join(r.notes) if r.notes else ''}")
    failed = sum(not r.ok for r in rows)
    print(f"\n{len(rows) - failed} of {len(rows)} cases pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
