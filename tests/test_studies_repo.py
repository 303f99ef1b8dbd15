"""studies/ as a DVC subrepo (oodcorr.records.studies_repo): created as `dvc init --subdir` makes it, and a remote
the user configured in the project copied into it as DVC itself then reads it: the section into the committed
studies/.dvc/config (a relative folder url rebased onto studies/.dvc/), the --local options (credentials) only into
its git-ignored config.local, the project's section winning. DVC's own Config reads the result (no mock)."""

from __future__ import annotations

from pathlib import Path

from oodcorr.records import studies_repo
from study_helpers import new_repo, sh


def dvc_remotes(folder: Path) -> dict:
    from dvc.config import Config

    return dict(Config(dvc_dir=str(folder / ".dvc"), validate=False)["remote"])


def test_the_subrepo_is_what_dvc_init_subdir_writes_and_git_ignores_its_cache_and_local_config(tmp_path):
    made = new_repo(tmp_path / "made")
    studies_repo.ensure(made)
    reference = new_repo(tmp_path / "reference")
    (reference / "studies").mkdir()
    sh(["dvc", "init", "-q", "--subdir"], reference / "studies")
    for rel in (".dvc/.gitignore", ".dvcignore"):
        assert (made / "studies" / rel).read_text() == (reference / "studies" / rel).read_text(), rel
    assert dvc_remotes(made / "studies")["studies"]["url"] == str(made / ".dvc" / "studies-remote")
    (made / "studies" / ".dvc" / "cache").mkdir()
    (made / "studies" / ".dvc" / "config.local").write_text("")
    ignored = sh(["git", "check-ignore", "studies/.dvc/cache", "studies/.dvc/config.local"], made).stdout.split()
    assert ignored == ["studies/.dvc/cache", "studies/.dvc/config.local"], ignored
    # the project's `dvc status` does not look inside it
    (made / "studies" / "x").mkdir()
    (made / "studies" / "x" / "f").write_text("data\n")
    sh(["dvc", "add", "-q", "x"], made / "studies")
    assert "x.dvc" not in sh(["dvc", "status"], made).stdout + sh(["dvc", "status"], made).stderr


def test_a_project_remote_is_copied_with_its_url_rebased_and_its_secrets_kept_local(tmp_path):
    repo = new_repo(tmp_path / "repo")
    sh(["dvc", "remote", "add", "drop", "../shared/drop"], repo)  # given from the project: stored ../../shared/drop
    sh(["dvc", "remote", "add", "team", "s3://bucket/studies"], repo)
    sh(["dvc", "remote", "modify", "team", "endpointurl", "http://127.0.0.1:9"], repo)
    sh(["dvc", "remote", "modify", "--local", "team", "secret_access_key", "s3cr3t"], repo)
    sub = studies_repo.ensure(repo)
    (sub / ".dvc" / ".gitignore").write_text("/tmp\n/cache")  # config.local's line lost (a merge, an edit)
    assert not studies_repo.sync(repo, "team")  # a read (verify, reanalyze): config.local only
    assert (
        "team" not in (sub / ".dvc" / "config").read_text() and dvc_remotes(sub)["team"]["url"] == "s3://bucket/studies"
    )
    assert studies_repo.sync(repo, "drop", commit=True) and studies_repo.sync(repo, "team", commit=True)  # a save
    assert sh(["git", "check-ignore", "studies/.dvc/config.local"], repo).stdout.strip() == "studies/.dvc/config.local"
    remotes = dvc_remotes(sub)
    assert remotes["drop"]["url"] == dvc_remotes(repo)["drop"]["url"] == str(tmp_path / "shared" / "drop")
    assert remotes["team"] == {**dvc_remotes(repo)["team"]} and remotes["team"]["secret_access_key"] == "s3cr3t"
    committed = (sub / ".dvc" / "config").read_text()
    assert "s3cr3t" not in committed and "endpointurl" in committed and "studies-remote" in committed
    assert "s3cr3t" in (sub / ".dvc" / "config.local").read_text()
    assert not studies_repo.sync(repo, "team", commit=True)  # nothing changed: the committed config is left as is

    sh(["dvc", "remote", "modify", "team", "url", "s3://other/studies"], repo)  # the project's options win
    assert not studies_repo.sync(repo, "team") and dvc_remotes(sub)["team"]["url"] == "s3://other/studies"
    assert "s3://bucket/studies" in (sub / ".dvc" / "config").read_text()  # a read left the committed file as is
    assert studies_repo.sync(repo, "team", commit=True) and "s3://other" in (sub / ".dvc" / "config").read_text()
    assert not studies_repo.sync(repo, "elsewhere")  # a remote the project does not name: nothing copied
    assert set(dvc_remotes(sub)) == {"studies", "drop", "team"}
