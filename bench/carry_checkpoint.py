"""Carry a checkpoint folder off a device machine and back: its weights in bf16, cut into parts small
enough for the device tool's $OUT (16 MiB a file, 8 files), and its .json files (config.json, held_out.json).
The logs (*.jsonl) and generated/ come back in device_call.sh's results tarball, which packs out/.

    python bench/carry_checkpoint.py pack out/sft $OUT/sft       # on the GPU machine, after training
    python bench/carry_checkpoint.py unpack carried/sft out/sft  # later, before train_rl.py --init out/sft

A from-scratch policy of the GPU default (27.8M parameters) is 111 MB in fp32, 53 MiB in bf16 and 42 MiB
gzipped (three parts): gzip is what lets the checkpoint travel back beside the working tree (~15 MB, mostly
results/) within the 64 MiB a device call carries. The optimizer state does not travel (stage 3 starts a
fresh optimizer from --init), so a checkpoint carried this way resumes stage 1 or 2 without its moments.
Unpacked weights are the bf16 values widened to fp32: training continues from the policy as sampled (bf16 on
a GPU).
"""
import argparse
import glob
import gzip
import os
import shutil
import sys

import safetensors.torch
import torch

PART = 15 << 20  # bytes per part, under the tool's 16 MiB per file


def pack(src, dst):
    os.makedirs(dst, exist_ok=True)
    weights = safetensors.torch.load_file(os.path.join(src, "model.safetensors"))
    data = safetensors.torch.save({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in weights.items()})
    data = gzip.compress(data, compresslevel=6)
    for i in range(0, len(data), PART):
        with open(os.path.join(dst, f"model.bf16.part{i // PART}"), "wb") as f:
            f.write(data[i:i + PART])
    for name in sorted(os.listdir(src)):
        if name.endswith(".json") and name != "report.json":  # 3 parts + these + the results tarball: within the
            # tool's 8 files; report.json (10 MB of file lists at the GPU default) comes back in the tarball
            shutil.copy(os.path.join(src, name), dst)
    return (len(data) + PART - 1) // PART


def unpack(src, dst):
    parts = sorted(glob.glob(os.path.join(src, "model.bf16.part*")), key=lambda p: int(p.rsplit("part", 1)[1]))
    if not parts:
        raise SystemExit(f"carry_checkpoint.py: no model.bf16.part* in {src}")
    data = b"".join(open(p, "rb").read() for p in parts)
    weights = safetensors.torch.load(gzip.decompress(data))
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if not name.startswith("model.bf16.part") and os.path.isfile(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), dst)
    full = {k: v.float() if v.is_floating_point() else v for k, v in weights.items()}
    safetensors.torch.save_file(full, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    return len(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("pack", "unpack"))
    p.add_argument("src", help="pack: a checkpoint folder; unpack: a packed folder")
    p.add_argument("dst", help="pack: the folder to write parts to (under $OUT); unpack: the checkpoint folder")
    a = p.parse_args(argv)
    if not os.path.exists(os.path.join(a.src, "config.json")):
        raise SystemExit(f"carry_checkpoint.py: {a.src} holds no config.json: not a checkpoint")
    n = (pack if a.what == "pack" else unpack)(a.src, a.dst)
    print(f"{a.what}ed {a.src} -> {a.dst}: {n} part(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
