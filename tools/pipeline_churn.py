"""RSS growth over pipeline create/destroy cycles: bare `vulkan` binding vs workbench.vk (workbench/vk/churn.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from workbench.vk.churn import main  # noqa: E402

if __name__ == "__main__":
    main()
