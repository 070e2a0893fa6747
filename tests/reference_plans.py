"""The 13B analysis of docs/references.md as command-line flags, for the tests that run it."""

#: 13B on 4 x 80 GB, the model's memory alone (no runtime overhead).
ANALYSIS_13B_FLAGS = (
    "--params",
    "13B",
    "--gpus",
    "4",
    "--gpu-memory",
    "80GB",
    "--overhead",
    "none",
    # the textbook step the analyses state, named: without --stack the most demanding
    # framework stack that runs the plan is chosen
    "--stack",
    "generic",
)
