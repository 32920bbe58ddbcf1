"""Run the calibration (same as `procure calibrate`): python bench/calibrate.py [--csv PATH]."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solver.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "calibrate", *sys.argv[1:]]
    main()
