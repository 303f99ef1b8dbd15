"""The real remotes of the sharing tests (.ci/servers-up.sh): an OpenSSH server whose storage only it can see, and
moto's S3 server with authentication on, both on 127.0.0.1. CI starts them and exports OODCORR_SSH_*/OODCORR_S3_*;
without those variables the session fixture (conftest.py) starts them here and stops them at the end. A server
that cannot start gives the reason its tests skip with.

Helpers to set a project's DVC remote to one of them (credentials with `dvc remote modify --local`, as the docs
say) and to reach the remote's objects through the server itself (sftp, boto3), never as a local path."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from study_helpers import REPO, sh

SCRIPT = REPO / ".ci" / "servers-up.sh"
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # no S3 client in the tests looks for credentials off 127.0.0.1


@dataclass
class Servers:
    env: dict  # the OODCORR_SSH_*, OODCORR_S3_*, OODCORR_SERVERS_DIR values the script printed

    def reason(self, kind: str) -> str | None:
        """None when the `kind` server ('ssh' or 's3') is up, else why not."""
        k = kind.upper()
        if f"OODCORR_{k}_UNAVAILABLE" in self.env:
            return f"{kind} server unavailable: {self.env[f'OODCORR_{k}_UNAVAILABLE']}"
        need = {"ssh": "OODCORR_SSH_URL", "s3": "OODCORR_S3_ENDPOINT"}[kind]
        return None if need in self.env else f"{kind} server unavailable: {need} not set"

    def script(self, *args: str) -> None:
        """.ci/servers-up.sh on these servers (e.g. '--ssh-stop', then no argument to start sshd again)."""
        run_script(Path(self.env["OODCORR_SERVERS_DIR"]), *args)


def run_script(where: Path, *args: str) -> dict:
    import sys

    res = subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, "OODCORR_SERVERS_DIR": str(where), "OODCORR_SERVERS_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return dict(ln.split("=", 1) for ln in res.stdout.splitlines() if ln.startswith("OODCORR_") and "=" in ln)


def from_env() -> Servers | None:
    """The servers CI started (their variables exported), else None."""
    if "OODCORR_SERVERS_DIR" not in os.environ:
        return None
    return Servers(
        {k: v for k, v in os.environ.items() if k.startswith(("OODCORR_SSH_", "OODCORR_S3_", "OODCORR_SERVERS"))}
    )


def s3_key(servers: Servers) -> tuple[str, str]:
    text = Path(servers.env["OODCORR_S3_CREDENTIALS"]).read_text()
    kv = dict(ln.split(" = ", 1) for ln in text.splitlines() if " = " in ln)
    return kv["aws_access_key_id"], kv["aws_secret_access_key"]


def remote_url(servers: Servers, kind: str, prefix: str) -> str:
    if kind == "ssh":
        return f"{servers.env['OODCORR_SSH_URL']}/{prefix}"
    return f"s3://{servers.env['OODCORR_S3_BUCKET']}/{prefix}"


def add_remote(root: Path, servers: Servers, kind: str, prefix: str, name: str = "team", default: bool = False) -> str:
    """`dvc remote add` NAME on the `kind` server under `prefix`; the url (and the S3 endpoint) in .dvc/config, the
    key file or the access key in .dvc/config.local, as docs/studies.md tells the owner and each collaborator."""
    url = remote_url(servers, kind, prefix)
    sh(["dvc", "remote", "add", *(["-d"] if default else []), name, url], root)
    if kind == "s3":
        sh(["dvc", "remote", "modify", name, "endpointurl", servers.env["OODCORR_S3_ENDPOINT"]], root)
    credentials(root, servers, kind, name)
    return url


def credentials(root: Path, servers: Servers, kind: str, name: str = "team", wrong: bool = False) -> None:
    """This clone's own credentials for remote NAME (`dvc remote modify --local`); `wrong`: a refused one."""
    if kind == "ssh":
        key = Path(servers.env["OODCORR_SSH_KEY"])
        if wrong:  # a key the server does not know
            other = root.parent / f"{root.name}-other-key"
            if not other.exists():
                sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other], root.parent)
            key = other
        sh(["dvc", "remote", "modify", "--local", name, "keyfile", key], root)
        return
    key_id, secret = s3_key(servers)
    sh(["dvc", "remote", "modify", "--local", name, "access_key_id", key_id], root)
    sh(["dvc", "remote", "modify", "--local", name, "secret_access_key", secret + ("x" if wrong else "")], root)


class RemoteFiles:
    """A remote's files read and changed THROUGH its server (sftp for SSH, boto3 for S3), by path under `prefix`."""

    def __init__(self, servers: Servers, kind: str, prefix: str):
        self.kind, self.prefix = kind, prefix.strip("/")
        if kind == "ssh":
            import sshfs
            from fsspec.utils import infer_storage_options

            opts = infer_storage_options(servers.env["OODCORR_SSH_URL"])
            self.base = f"{opts['path']}/{self.prefix}"
            self.fs = sshfs.SSHFileSystem(
                opts["host"],
                port=int(opts["port"]),
                username=opts["username"],
                client_keys=[servers.env["OODCORR_SSH_KEY"]],
                known_hosts=servers.env["OODCORR_SSH_KNOWN_HOSTS"],  # the server's own host key, checked
            )
        else:
            import boto3

            key_id, secret = s3_key(servers)
            self.bucket = servers.env["OODCORR_S3_BUCKET"]
            self.s3 = boto3.client(
                "s3",
                endpoint_url=servers.env["OODCORR_S3_ENDPOINT"],
                region_name="us-east-1",
                aws_access_key_id=key_id,
                aws_secret_access_key=secret,
            )

    def list(self) -> list[str]:
        """Every file's path under the prefix, relative to it."""
        if self.kind == "ssh":
            if not self.fs.exists(self.base):
                return []
            return sorted(p[len(self.base) + 1 :] for p in self.fs.find(self.base))
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + "/")
        return sorted(o["Key"][len(self.prefix) + 1 :] for page in pages for o in page.get("Contents", []))

    def read(self, rel: str) -> bytes:
        if self.kind == "ssh":
            return self.fs.cat_file(f"{self.base}/{rel}")
        return self.s3.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{rel}")["Body"].read()

    def write(self, rel: str, data: bytes) -> None:
        if self.kind == "ssh":
            self.fs.pipe_file(f"{self.base}/{rel}", data)
        else:
            self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{rel}", Body=data)

    def delete(self, rel: str) -> None:
        if self.kind == "ssh":
            self.fs.rm_file(f"{self.base}/{rel}")
        else:
            self.s3.delete_object(Bucket=self.bucket, Key=f"{self.prefix}/{rel}")

    def flip(self, rel: str, at: int = 0) -> None:
        """One byte of the file changed, its size kept."""
        data = bytearray(self.read(rel))
        data[at] ^= 0x01
        self.write(rel, bytes(data))


def object_rel(md5: str) -> str:
    """Where DVC 3 keeps the object with this md5 under a remote's url."""
    return f"files/md5/{md5[:2]}/{md5[2:]}"
