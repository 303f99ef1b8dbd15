"""The planner: `oodcorr plan`, which study design (items per testset, checkpoints, seeds) answers the question
within a budget, planned with the interval and reliability gate that decide the verdicts (oodcorr.stats) and
with the study's own `analyze` settings (oodcorr.settings.analyze).

  plan.py         `oodcorr plan`: its options and modes
  budget.py       the design a compute budget buys (stats.gp_design's model, the search)
  budget_cmd.py   the budget mode's inputs, printout and params fragment
  pilot.py        a pilot's testsets under the interval's model; measured scoring / training rates
  simulate.py     a design's power by simulation through the interval itself

Imports the core (stats/ included), never a stage, launch/ or an entry point; no stage imports it, so a change
here never marks `analyze` stale in DVC.
"""
