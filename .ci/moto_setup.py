"""moto's S3 server with authentication on, for .ci/servers-up.sh.

`setup DIR`: wait for the server at DIR/endpoint, create an IAM user with an S3 policy and an access key, the bucket
oodcorr-studies, then switch authentication on (moto's reset-auth: every later request must be signed with a key
IAM knows); write the key as an AWS credentials file DIR/credentials and check that a wrong secret is refused.
`check DIR`: exit 0 when the server answers with that key. Exits 1 with one line on stdout otherwise."""

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
BUCKET = "oodcorr-studies"
REGION = "us-east-1"
FAST = Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10)


def client(service, endpoint, key="test", secret="test"):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=FAST,
    )


def read_key(d: Path):
    lines = dict(ln.split(" = ", 1) for ln in (d / "credentials").read_text().splitlines() if " = " in ln)
    return lines["aws_access_key_id"], lines["aws_secret_access_key"]


def check(d: Path) -> int:
    endpoint = (d / "endpoint").read_text().strip()
    try:
        client("s3", endpoint, *read_key(d)).head_bucket(Bucket=BUCKET)
    except Exception as e:  # noqa: BLE001 - any failure means: not usable, start afresh
        print(f"not answering: {e}")
        return 1
    return 0


def setup(d: Path) -> int:
    endpoint = (d / "endpoint").read_text().strip()
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    else:
        print(f"no answer at {endpoint} within 10 s")
        return 1
    iam = client("iam", endpoint)
    iam.create_user(UserName="oodcorr")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName="oodcorr", PolicyName="s3-all", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="oodcorr")["AccessKey"]
    key_id, secret = key["AccessKeyId"], key["SecretAccessKey"]
    client("s3", endpoint, key_id, secret).create_bucket(Bucket=BUCKET)
    # authentication on from here: moto counts requests, and from INITIAL_NO_AUTH_ACTION_COUNT on checks each one
    auth_on = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
    )
    urllib.request.urlopen(auth_on, timeout=10)
    creds = d / "credentials"
    creds.write_text(f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n")
    creds.chmod(0o600)
    try:
        client("s3", endpoint, key_id, secret[:-1] + ("x" if secret[-1] != "x" else "y")).head_bucket(Bucket=BUCKET)
    except ClientError:
        pass
    except EndpointConnectionError as e:
        print(f"moto stopped answering: {e}")
        return 1
    else:
        print("moto accepted a wrong secret: authentication is not on")
        return 1
    return check(d)


def main() -> int:
    try:
        return {"setup": setup, "check": check}[sys.argv[1]](Path(sys.argv[2]))
    except Exception as e:  # noqa: BLE001 - one line for the caller's reason, never a traceback
        print(f"{type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
