"""Object store servers for the tests, on 127.0.0.1 only: moto's S3 server and Azurite's blob service.

Each is started by a fixture and stopped by it. Azurite comes from the npm registry: scripts/setup.sh
installs it into the repository's .tools folder, where `azurite_command` finds it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AZURITE = ROOT / ".tools" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's one built-in account and its documented, public development key.
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURE_API_VERSION = "2021-08-06"
S3_REGION = "us-east-1"
STARTUP_SECONDS = 60  # a bound on waiting for a server to listen, so that a broken setup fails, not hangs


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {STARTUP_SECONDS} s")


# moto checks credentials after this many requests: those that create the tests' user and its key.
UNAUTHENTICATED_SETUP_REQUESTS = 3
ALLOW_ALL = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}'


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str

    def storage_options(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": S3_REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def create_bucket(self, name: str) -> str:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=S3_REGION,
        )
        client.create_bucket(Bucket=name)
        return f"s3://{name}"


def start_moto(folder: Path) -> tuple[subprocess.Popen, S3Server]:
    """moto's S3 server in its own process (``python -m moto.server``), on a free loopback port, checking
    credentials as S3 does: requests signed with anything but the key of the user created here are
    refused (403).

    Not a thread of this process: delta-rs holds the interpreter lock through some of its requests,
    and a server thread waiting for that lock would never answer them."""
    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(UNAUTHENTICATED_SETUP_REQUESTS)}
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=folder,
        env=env,
    )
    try:
        wait_for_port(port, process)
        endpoint = f"http://127.0.0.1:{port}"
        access_key, secret_key = create_user(endpoint, ("setup", "setup"), "loader", ALLOW_ALL)
    except Exception:
        stop(process)
        raise
    return process, S3Server(endpoint, access_key, secret_key)


@contextmanager
def moto_running(folder: Path) -> Iterator[S3Server]:
    """moto's server (`start_moto`) for the block, stopped after it."""
    process, server = start_moto(folder)
    try:
        yield server
    finally:
        stop(process)


def create_user(endpoint: str, signer: tuple[str, str], name: str, policy: str) -> tuple[str, str]:
    """A user of moto's IAM allowed what `policy` allows, and its access key; the request signed with
    `signer`'s key (the first three requests to the server need none)."""
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        aws_access_key_id=signer[0],
        aws_secret_access_key=signer[1],
        region_name=S3_REGION,
    )
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="policy", PolicyDocument=policy)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def azurite_command() -> str | None:
    """The azurite-blob that scripts/setup.sh installs; None where node is missing."""
    if shutil.which("node") is None:
        return None
    return str(AZURITE)


@dataclass(frozen=True)
class AzureServer:
    endpoint: str  # http://127.0.0.1:<port>/devstoreaccount1

    def storage_options(self, key: str = AZURE_KEY) -> dict[str, str]:
        return {
            "azure_storage_account_name": AZURE_ACCOUNT,
            "azure_storage_account_key": key,
            "azure_endpoint": self.endpoint,
            "azure_allow_http": "true",
        }

    def create_container(self, name: str) -> str:
        """Create a container with Azure's Shared Key authorisation (the REST call, signed here)."""
        date = formatdate(usegmt=True)
        headers = f"x-ms-date:{date}\nx-ms-version:{AZURE_API_VERSION}\n"
        to_sign = (
            "PUT\n" + "\n" * 11 + headers + f"/{AZURE_ACCOUNT}/{AZURE_ACCOUNT}/{name}\nrestype:container"
        )
        digest = hmac.new(base64.b64decode(AZURE_KEY), to_sign.encode(), hashlib.sha256).digest()
        request = urllib.request.Request(
            f"{self.endpoint}/{name}?restype=container",
            method="PUT",
            headers={
                "x-ms-date": date,
                "x-ms-version": AZURE_API_VERSION,
                "Authorization": f"SharedKey {AZURE_ACCOUNT}:{base64.b64encode(digest).decode()}",
                "Content-Length": "0",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 201, answer.status
        return f"az://{name}"


def start_azurite(command: str, folder: Path) -> tuple[subprocess.Popen, AzureServer]:
    """Azurite's blob service on a free loopback port, keeping its data in `folder`."""
    port = free_port()
    process = subprocess.Popen(
        [
            command,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(folder),
            "--silent",
            "--skipApiVersionCheck",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
    except RuntimeError:
        stop(process)
        raise
    return process, AzureServer(f"http://127.0.0.1:{port}/{AZURE_ACCOUNT}")


STOP_GRACE_SECONDS = 5  # Azurite, asked to stop, waits for its clients' idle keep-alive connections


def stop(process: subprocess.Popen) -> None:
    """Ask the server to stop; kill it if it has not after a few seconds (its data is the test's own)."""
    process.terminate()
    try:
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
