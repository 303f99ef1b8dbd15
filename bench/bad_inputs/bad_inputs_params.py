"""Bad-input cases: params.yaml values, keys and files. A new one is a PARAMS row: (id, mutation, regex the error
line must match, the commands to try it with, the finding it covers); each command makes one case."""

from __future__ import annotations

from bad_inputs_runner import CHECK, A, Case, E, T, edit_params, text_params


def _set(path: str, value):
    def fn(p: dict) -> None:
        node, keys = p, path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value

    return fn


def _rekey(new: str):
    def fn(p: dict) -> None:
        p["runs"] = {new: p["runs"]["a"]}

    return fn


SYNTH = {
    "synthetic": "id",
    "premise": "premise",
    "hypothesis": "hypothesis",
    "label": "label",
    "label_map": {"entailment": "entailment", "non_entailment": "non_entailment"},
}


def _testset_named(name: str, notes: bool = False):
    """A synthetic testset declared (and prepared) under `name`; with `notes`, the user's own notes.jsonl at the
    project's top, where `../../notes` from data/prepared leads."""

    def mutate(root):
        if notes:
            (root / "notes.jsonl").write_text("my notes\n")
        edit_params(lambda p: (p["data"]["testsets"].update({name: dict(SYNTH)}), p["data"].update(prepare=[name])))(
            root
        )

    return mutate


P = ["data", "prepare"]


# params mutations: (id, mutate, regex the error must match, commands to try it with, finding)
PARAMS: list[tuple] = [
    ("lr-1e30", edit_params(_set("train.lr", 1e30)), r"lr", [CHECK, T], "accepted: lr 1e30"),
    ("lr-nan", text_params(lambda t: t.replace("lr: 0.005", "lr: .nan")), r"lr", [CHECK, T], ""),
    ("lr-negative", edit_params(_set("train.lr", -0.1)), r"lr", [CHECK, T], ""),
    ("lr-string", edit_params(_set("train.lr", "fast")), r"lr", [CHECK, T], ""),
    ("max_length-1", edit_params(_set("train.max_length", 1)), r"max_length", [CHECK, T, E], "accepted: max_length 1"),
    ("max_length-0", edit_params(_set("train.max_length", 0)), r"max_length", [CHECK, T], ""),
    (
        "eval-max_length-0",
        edit_params(_set("evaluate.max_length", 0)),
        r"evaluate\.max_length",
        [CHECK, E],
        "accepted: evaluate.max_length 0",
    ),
    ("eval-max_length-3", edit_params(_set("evaluate.max_length", 3)), r"evaluate\.max_length", [CHECK, E], ""),
    (
        "eval-testsets-empty",
        edit_params(_set("evaluate.testsets", [])),
        r"evaluate\.testsets",
        [CHECK, E],
        "accepted: evaluate.testsets []",
    ),
    ("eval-testsets-unknown", edit_params(_set("evaluate.testsets", ["synth_id", "nope"])), r"nope", [CHECK, E], ""),
    ("eval-testsets-number", edit_params(_set("evaluate.testsets", [3])), r"evaluate\.testsets", [CHECK, E], ""),
    ("eval-batch_size-0", edit_params(_set("evaluate.batch_size", 0)), r"batch_size", [CHECK, E], ""),
    ("eval-batch_size-str", edit_params(_set("evaluate.batch_size", "big")), r"batch_size", [CHECK, E], ""),
    ("runs-empty", edit_params(_set("runs", {})), r"runs", [CHECK, A, T], "accepted: runs {}"),
    ("params-empty-file", text_params(lambda t: ""), r"runs|empty", [CHECK, A], "accepted: empty params file"),
    ("params-a-list", text_params(lambda t: "- a\n- b\n"), r"params\.yaml", [CHECK, A, T], ""),
    (
        "dup-run-key",
        text_params(lambda t: t.replace("runs:\n  a:\n", "runs:\n  a:\n    model: tiny-opt\n  a:\n", 1)),
        r"params\.yaml:\d+: .*duplicate key 'a'",
        [CHECK, T, A],
        "accepted: duplicate run key",
    ),
    (
        "dup-top-key",
        text_params(lambda t: t + "train:\n  lr: 0.1\n"),
        r"params\.yaml:\d+: .*duplicate key 'train'",
        [CHECK, T],
        "",
    ),
    (
        "top-level-typo",
        text_params(lambda t: t + "analyse:\n  methods: [linear]\n"),
        r"analyse",
        [CHECK, A, T],
        "accepted: top-level typo",
    ),
    ("train-key-typo", edit_params(_set("train.learning_rate", 0.1)), r"learning_rate", [CHECK, T], ""),
    (
        "threads-lots",
        edit_params(_set("study.threads", "lots")),
        r"study\.threads",
        [CHECK, T, E, A],
        "accepted: threads lots",
    ),
    (
        "threads-negative",
        edit_params(_set("study.threads", -3)),
        r"study\.threads",
        [CHECK, T, E],
        "accepted: threads -3",
    ),
    ("threads-zero", edit_params(_set("study.threads", 0)), r"study\.threads", [CHECK, T], ""),
    (
        "lora-dropout-1.5",
        edit_params(_set("train.lora.dropout", 1.5)),
        r"lora\.dropout",
        [CHECK, T],
        "traceback: lora.dropout 1.5",
    ),
    ("lora-dropout-neg", edit_params(_set("train.lora.dropout", -0.1)), r"lora\.dropout", [CHECK, T], ""),
    ("lora-r-0", edit_params(_set("train.lora.r", 0)), r"lora\.r", [CHECK, T], ""),
    ("lora-alpha-0", edit_params(_set("train.lora.alpha", 0)), r"lora\.alpha", [CHECK, T], ""),
    ("key-shell", edit_params(_rekey("x;touch PWNED;echo")), r"run key", [CHECK, T, A], "run key injection"),
    ("key-dotdot", edit_params(_rekey("../../evil")), r"run key", [CHECK, T], "run key path escape"),
    ("key-leading-dot", edit_params(_rekey(".hidden")), r"run key", [CHECK, T], ""),
    ("key-too-long", edit_params(_rekey("k" * 300)), r"run key", [CHECK, T], ""),
    ("key-space", edit_params(_rekey("a b")), r"run key", [CHECK, T], ""),
    ("key-unicode", edit_params(_rekey("lauf-ä")), r"run key", [CHECK], ""),
    ("key-dollar", edit_params(_rekey("$(id)")), r"run key", [CHECK, E], ""),
    ("model-shell", edit_params(_set("runs.a.model", "a/b;touch X")), r"runs\.a\.model", [CHECK, T], ""),
    ("model-unknown", edit_params(_set("runs.a.model", "nope-model")), r"runs\.a\.model", [CHECK, T], ""),
    ("train_set-unknown", edit_params(_set("runs.a.train_set", "nope_train")), r"train_set", [CHECK, T], ""),
    ("id_testset-unknown", edit_params(_set("runs.a.id_testset", "nope")), r"id_testset", [CHECK, E], ""),
    ("shots-0", edit_params(_set("runs.a.shots", 0)), r"shots", [CHECK, T], ""),
    ("shots-odd", edit_params(_set("runs.a.shots", 3)), r"shots", [CHECK, T], ""),
    ("shots-string", edit_params(_set("runs.a.shots", "many")), r"shots", [CHECK, T], ""),
    ("seed-string", edit_params(_set("runs.a.seed", "x")), r"seed", [CHECK], ""),
    ("batch_size-0", edit_params(_set("train.batch_size", 0)), r"batch_size", [CHECK, T], ""),
    ("grad_accum-0", edit_params(_set("train.grad_accum", 0)), r"grad_accum", [CHECK], ""),
    ("warmup-1.5", edit_params(_set("train.warmup_ratio", 1.5)), r"warmup_ratio", [CHECK, T], ""),
    ("max_steps-0", edit_params(_set("train.max_steps", 0)), r"max_steps", [CHECK], ""),
    ("every-0", edit_params(_set("train.checkpoints.every", 0)), r"checkpoints", [CHECK], ""),
    ("log_spaced-1", edit_params(_set("train.checkpoints.log_spaced", 1)), r"checkpoints", [CHECK], ""),
    ("loss-mse", edit_params(_set("train.loss", "mse")), r"loss", [CHECK, T], ""),
    ("sampling-random", edit_params(_set("train.sampling", "random")), r"sampling", [CHECK], ""),
    ("finetune-adapter", edit_params(_set("train.finetune", "adapter")), r"finetune", [CHECK], ""),
    ("quantization-int8", edit_params(_set("train.quantization", "int8")), r"quantization", [CHECK, E], ""),
    ("dtype-float64", edit_params(_set("train.dtype", "float64")), r"dtype", [CHECK], ""),
    ("optim-sgd", edit_params(_set("train.optim", "sgd")), r"optim", [CHECK], ""),
    ("gc-maybe", edit_params(_set("train.gradient_checkpointing", "maybe")), r"gradient_checkpointing", [CHECK], ""),
    ("pattern-no-premise", edit_params(_set("train.pattern", "{hypothesis}?")), r"premise", [CHECK, T], ""),
    (
        "pattern-huge",
        edit_params(_set("train.pattern", "{premise} {hypothesis} " + "word " * 60000)),
        r"pattern",
        [CHECK, T],
        "traceback: huge train.pattern",
    ),
    ("verbalizer-string", edit_params(_set("train.verbalizer", "yes")), r"verbalizer", [CHECK, T], ""),
    ("epochs-0", edit_params(_set("train.epochs", 0)), r"epochs", [CHECK], ""),
    (
        "weight_decay-inf",
        text_params(lambda t: t.replace("\ntrain:\n", "\ntrain:\n  weight_decay: .inf\n", 1)),
        r"weight_decay",
        [CHECK],
        "",
    ),
    ("max_grad_norm-str", edit_params(_set("train.max_grad_norm", "x")), r"max_grad_norm", [CHECK], ""),
    (
        "methods-pearson",
        edit_params(_set("analyze.methods", ["pearson"])),
        r"analyze\.methods",
        [CHECK, A],
        "outputs deleted before params rejected",
    ),
    ("bootstrap-negative", edit_params(_set("analyze.bootstrap", -1)), r"analyze\.bootstrap", [CHECK, A], ""),
    (
        "bootstrap-1e9",
        edit_params(_set("analyze.bootstrap", 10**9)),
        r"analyze\.bootstrap: must be in \[0, 100000\]",
        [CHECK, A],
        "accepted: analyze.bootstrap 1e9 (arrays of 1e9 rows: memory)",
    ),
    (
        "reliability-splits-1e7",
        edit_params(_set("analyze.reliability_splits", 10**7)),
        r"analyze\.reliability_splits: must be in \[1, 100000\]",
        [CHECK, A],
        "accepted: reliability_splits 1e7",
    ),
    (
        "analyze-seed-negative",
        edit_params(_set("analyze.seed", -1)),
        r"analyze\.seed: must be an integer in \[0, ",
        [CHECK, A],
        "analyze.seed -1: numpy's ValueError at analysis time",
    ),
    (
        "run-seed-negative",
        edit_params(_set("runs.a.seed", -1)),
        r"runs\.a\.seed: must be an integer in \[0, ",
        [CHECK, T],
        "run seed -1: np.random.seed's ValueError in training",
    ),
    (
        "run-seed-2e32",
        edit_params(_set("runs.a.seed", 2**32)),
        r"runs\.a\.seed: must be an integer in \[0, ",
        [CHECK, T],
        "",
    ),
    ("alpha-1.5", edit_params(_set("analyze.alpha", 1.5)), r"analyze\.alpha", [CHECK, A], ""),
    ("metric-f1", edit_params(_set("analyze.metric", "f1")), r"analyze\.metric", [CHECK, A], ""),
    ("noise-maybe", edit_params(_set("analyze.noise", "maybe")), r"analyze\.noise", [CHECK, A], ""),
    ("reliability_min-2", edit_params(_set("analyze.reliability_min", 2)), r"reliability_min", [CHECK], ""),
    ("reliability_splits-0", edit_params(_set("analyze.reliability_splits", 0)), r"reliability_splits", [CHECK], ""),
    ("scatter_pair-one", edit_params(_set("analyze.scatter_pair", ["synth_overlap"])), r"scatter_pair", [CHECK], ""),
    ("tracking-wandb", edit_params(_set("study.tracking", "wandb")), r"study\.tracking", [CHECK, T], ""),
    ("max_examples-all", edit_params(_set("data.max_examples", "all")), r"data\.max_examples", [CHECK], ""),
    (
        "params-not-utf8",
        lambda r: (r / "params.yaml").write_bytes((r / "params.yaml").read_bytes() + b"# caf\xe9\n"),
        r"params\.yaml:\d+: not UTF-8",
        [CHECK, T],
        "",
    ),
    ("params-bad-yaml", text_params(lambda t: t + "runs: [\n"), r"params\.yaml:\d+", [CHECK, A], ""),
    (
        "launch-executor-k8s",
        edit_params(_set("study.launch", {"executor": "k8s"})),
        r"study\.launch\.executor",
        [CHECK],
        "",
    ),
    # names that become paths; values study check missed while a stage refused them (after DVC deleted outputs)
    (
        "testset-name-dotdot",
        _testset_named("../../notes", notes=True),
        r"data\.testsets: testset '\.\./\.\./notes'",
        [CHECK, P],
        "testset name used as a path: prepare overwrote, then deleted, the user's file",
    ),
    (
        "testset-name-300",
        _testset_named("t" * 300),
        r"data\.testsets: .*300 characters",
        [CHECK, P],
        "traceback: a 300-character testset name (ENAMETOOLONG)",
    ),
    (
        "data-out-outside",
        edit_params(_set("data.out", "../elsewhere")),
        r"data\.out",
        [CHECK, P],
        "data.out outside the project",
    ),
    ("analyze-out-absolute", edit_params(_set("analyze.out", "/tmp/oodcorr-results")), r"analyze\.out", [CHECK, A], ""),
    (
        "eval-dtype-float8",
        edit_params(_set("evaluate.dtype", "float8")),
        r"evaluate\.dtype",
        [CHECK, E],
        "study check accepted evaluate.dtype float8 (dvc repro then deleted the evaluation outputs)",
    ),
    (
        "scatter_pair-unknown",
        edit_params(_set("analyze.scatter_pair", ["foo", "bar"])),
        r"analyze\.scatter_pair",
        [CHECK, A],
        "study check accepted analyze.scatter_pair [foo, bar] (dvc repro then deleted results/)",
    ),
    (
        "scatter_pair-id",
        edit_params(_set("analyze.scatter_pair", ["synth_id", "synth_vocab"])),
        r"analyze\.scatter_pair",
        [CHECK],
        "",
    ),
    (
        "max_examples-0",
        edit_params(_set("data.max_examples", 0)),
        r"max_examples",
        [CHECK, P],
        "study check accepted what prepare refused",
    ),
    (
        "params-nested-5000",
        text_params(lambda t: t + "x: " + "[" * 5000 + "]" * 5000 + "\n"),
        r"params\.yaml: nested too deeply",
        [CHECK, T],
        "traceback: a 5,000-level nested params.yaml (RecursionError)",
    ),
    (
        "threads-1e9-int",
        edit_params(_set("study.threads", 1000000000)),
        r"study\.threads",
        [CHECK, T],
        "accepted: study.threads 1000000000 (1e9 refused)",
    ),
    (
        "tracking_uri-junk",
        edit_params(_set("study.tracking_uri", "not a uri ;rm -rf /")),
        r"study\.tracking_uri",
        [CHECK, T],
        "accepted: study.tracking_uri 'not a uri ;rm -rf /'",
    ),
    (
        "key-int-beside-named",
        edit_params(lambda p: p["runs"].update({123: dict(p["runs"]["a"])})),
        r"runs: run key 123 is read as a number",
        [CHECK, T, A],
        "run key 123 beside named ones: DVC failed sorting the keys ('<' between int and str) before the check ran",
    ),
    (
        "key-int",
        edit_params(_rekey(123)),
        r"run key 123 is read as a number.*quote it",
        [CHECK, T],
        "run key 123: a cryptic DVC error, and study check's advice did not apply",
    ),
    (
        "launch-time-forever",
        edit_params(_set("study.launch", {"time": "forever"})),
        r"study\.launch\.time",
        [CHECK],
        "",
    ),
]
# one per finding of the fault campaign: also in the fast test run (with its first command)
FAST = {
    "lr-1e30",
    "key-shell",
    "methods-pearson",
    "dup-run-key",
    "threads-lots",
    "lora-dropout-1.5",
    "runs-empty",
    "top-level-typo",
    "pattern-huge",
    "eval-testsets-empty",
    "testset-name-dotdot",
    "eval-dtype-float8",
    "params-nested-5000",
    "threads-1e9-int",
    "key-int",
}


def cases() -> list[Case]:
    out = [
        Case(
            f"params:{pid}:{args[0] if args[0] != 'study' else 'check'}",
            list(args),
            mutate,
            must=must,
            item=item,
            fast=pid in FAST and args is commands[0],
        )
        for pid, mutate, must, commands, item in PARAMS
        for args in commands
    ]
    return out
