"""Write the shipped policies' cards (src/scalesched/policies/trained/cards.json).

    python scripts/derive/policy_cards.py

Each card's ``trained`` entry is read from the policy's checkpoint
(``scalesched.policies.trained.training_facts``), so it says what the file was trained on;
``measured`` is the headline figure from docs/model-card.md, with its date, and
``acting`` how the policy acts unless told otherwise (``{"margin": 0.1}``), both kept from
the current file (a new policy gets an empty headline to fill in). ``scalesched policies``
prints one line per policy from its card; tests/policies/test_trained_cards.py fails when
a card no longer matches its checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from scalesched.nn.checkpoint import load_checkpoint
from scalesched.policies.trained import CARDS, shipped_policies, training_facts

DEST = Path(__file__).resolve().parents[2] / "src/scalesched/policies/trained" / CARDS


def main() -> None:
    old = json.loads(DEST.read_text(encoding="utf-8"))["policies"] if DEST.is_file() else {}
    cards = {
        name: {
            "trained": training_facts(load_checkpoint(path)),
            "measured": old.get(name, {}).get("measured", ""),
            **({"acting": old[name]["acting"]} if old.get(name, {}).get("acting") else {}),
        }
        for name, path in sorted(shipped_policies().items())
    }
    payload = {
        "provenance": "trained: read from each checkpoint by scripts/derive/policy_cards.py; "
        "measured: the headline of docs/model-card.md, dated",
        "policies": cards,
    }
    DEST.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {DEST}")


if __name__ == "__main__":
    main()
