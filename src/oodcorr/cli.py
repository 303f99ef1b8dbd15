"""The `oodcorr` command line. Each subcommand lives with its stage and is imported only when used,
so `oodcorr --help` stays fast (no torch import)."""

from __future__ import annotations

import importlib
import sys

import click

from oodcorr.core.errors import UserError

# name -> "module:attribute" of a click command/group: each stage package's stage.py (the entry dvc.yaml runs).
COMMANDS = {
    "data": "oodcorr.data.stage:data",
    "testsets": "oodcorr.data.stage:testsets",
    "train": "oodcorr.train.stage:train_cmd",
    "evaluate": "oodcorr.evaluate.stage:evaluate_cmd",
    "analyze": "oodcorr.analysis.stage:analyze_cmd",
    "plan": "oodcorr.planner.plan:plan_cmd",
    "select-items": "oodcorr.select.command:select_items_cmd",
    "study": "oodcorr.study:study",
    "ui": "oodcorr.tracking.commands:ui_cmd",
    "sync": "oodcorr.tracking.commands:sync_cmd",
}


class _UserErrorExit(click.ClickException):
    exit_code = 2

    def show(self, file=None):
        from oodcorr.core.credentials import mask_secrets

        click.echo(mask_secrets(f"error: {self.message}"), err=True)


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx, name):
        if name in COMMANDS:
            module, attr = COMMANDS[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        from oodcorr.core.io import os_error_line

        try:
            return super().invoke(ctx)
        except UserError as e:
            raise _UserErrorExit(str(e)) from None
        except OSError as e:  # disk full, read-only folder, ...: one line naming the path
            line = os_error_line(e)
            if line is None:
                raise
            raise _UserErrorExit(line) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="oodcorr")
def cli():
    """oodcorr: when a fine-tuned LM improves on one OOD testset, does it improve on the others
    once in-domain progress is regressed out?

    Pipeline: data prepare -> train -> evaluate -> analyze (run it all with `dvc repro`).
    """
    quiet_third_party()


def quiet_third_party() -> None:
    """Known third-party noise, filtered at the source for every command (progress bars stay, on stderr):
    transformers' FutureWarning on `is_gradient_checkpointing` (called by peft), MLflow/alembic INFO lines
    (store creation and migrations) that repeat on every stage under `dvc repro`, and MLflow's logged copy of
    a store error's traceback."""
    import logging
    import os
    import warnings

    warnings.filterwarnings("ignore", message=r".*`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # MLflow logs a store error with its whole traceback before raising it; oodcorr reports each one it catches
    # in one line (the local records stay the truth), so MLflow's copy is noise (e.g. a full disk)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


def main(argv=None):
    try:
        cli.main(args=argv, prog_name="oodcorr")
    except UserError as e:  # raised outside a command's invoke (e.g. while building a command)
        from oodcorr.core.credentials import mask_secrets

        click.echo(mask_secrets(f"error: {e}"), err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
