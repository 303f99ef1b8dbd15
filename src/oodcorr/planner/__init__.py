"""The planner: `oodcorr plan`, which study design (items per testset, checkpoints, seeds) answers the question
within a budget, planned with the interval and reliability gate that decide the verdicts (oodcorr.stats) and
with the study's own `analyze` settings (oodcorr.settings.analyze).

  plan.py         `oodcorr plan`: the command, the half-width and power modes' inputs and printout
  options.py      its options: the few shown by --help, the stated inputs grouped in the help text
  study.py        the study planned for: its params.yaml, analysis settings, models, dtype, testset sizes
  rates.py        this machine's scoring and training rates for a model and dtype (.oodcorr/rates.json, rates.json)
  measure.py      measuring those rates when a plan first needs them
  budget.py       the design a compute budget buys (stats.gp_design's model, the gate, the search)
  budget_cmd.py   the budget mode's checks, rates, search at the study's settings, JSON and params fragment
  budget_inputs.py  its model's inputs: a pilot's testsets (stated values overriding), or stated values
  modes.py        the half-width and power (--detect-r) modes on the same model
  settle.py       the pairs a design is expected to settle, and the hours per settled pair
  report.py       how a budget plan reads (first lines in a user's words, details under --details)
  pilot.py        a pilot's testsets under the interval's model
  simulate.py     a design's power by simulation through the interval itself (the gate included)

Imports the core (stats/ included), never a stage, launch/ or an entry point; no stage imports it, so a change
here never marks `analyze` stale in DVC.
"""
