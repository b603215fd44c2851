"""Episode videos (GIF or MP4) from agentview frames."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["write_video"]


def write_video(path: str | Path, frames: Sequence[np.ndarray], fps: int = 20) -> Path:
    """Write uint8 (H, W, 3) frames as GIF or MP4 (chosen by the suffix).

    MP4 needs ``imageio-ffmpeg`` (``pip install wmrl-libero[video]``).
    """
    import imageio.v2 as imageio

    path = Path(path)
    if path.suffix == ".gif":
        imageio.mimsave(path, list(frames), duration=1000 / fps, loop=0)
    elif path.suffix == ".mp4":
        try:
            imageio.mimsave(path, list(frames), fps=fps)
        except (ImportError, ValueError) as exc:
            raise RuntimeError(
                f"writing {path} needs imageio-ffmpeg: pip install 'wmrl-libero[video]' ({exc})"
            ) from exc
    else:
        raise ValueError(f"video format must be .gif or .mp4, got {path.suffix!r}")
    return path
