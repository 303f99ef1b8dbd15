"""Items chosen from a pilot (`oodcorr select-items`): which items of each testset tell one run's checkpoints apart.

choose.py holds the arithmetic (numbers in, item indices out); command.py reads a pilot's stored predictions and
writes the choice (data/items.json), which the prepare stage reads. Part of the core: it imports records/ and
stats/, never a stage, launch/ or the planner."""

ITEMS_FILE = "data/items.json"  # the choice, relative to the project root: a dependency of dvc.yaml's prepare stage
