"""Where the non-Python parts live: in a wheel under pockmcu/_data, in a checkout at the repo root."""

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory ``name`` (templates, kernels_c or firmware)."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pockmcu installation is missing its '{name}' directory")


def templates_dir() -> Path:
    return data_dir("templates")


def kernels_dir() -> Path:
    return data_dir("kernels_c")


def firmware_dir() -> Path:
    return data_dir("firmware")
