"""Regenerate the README's metric table from the registry: python scripts/update_readme.py"""

from pathlib import Path

from assay.outputs.catalogue import update_readme

if __name__ == "__main__":
    readme = Path(__file__).resolve().parent.parent / "README.md"
    print("README.md updated" if update_readme(readme) else "README.md already current")
