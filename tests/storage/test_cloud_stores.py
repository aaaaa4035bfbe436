"""What is specific to the stores on object services other than moto's S3 (test_storage.py has
S3Store's own): the servers' conditional writes checked with their own clients, locations and
storage options, ambiguous outcomes, pickling, and the data plane's endpoint and credentials."""

from __future__ import annotations

import json
import pickle
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.core.exceptions import ServiceResponseError
from azure.core.pipeline.transport import RequestsTransport
from azure.storage.blob import ContainerClient, LinearRetry
from google.api_core import exceptions as google_errors

from manifest_table.errors import InvalidArgumentError, NotFound, PreconditionFailed, StoreError
from manifest_table.storage import store_for_uri
from manifest_table.storage.azure import AzureAccount, AzureStore
from manifest_table.storage.gcs import GcsConnection, GcsStore
from tests import azurite_server, seaweedfs_server
from tests.conftest import store_location

CLOUD_KINDS = ["seaweedfs", "gcs", "azure"]


# =========================================================================================
# The servers themselves: conditional writes as the protocol needs them
# =========================================================================================


def test_fake_gcs_server_checks_generations(gcs_uri: str) -> None:
    """With google-cloud-storage alone: ifGenerationMatch=0 creates once, a swap needs the
    current generation, and every write (equal bytes too) makes a new generation."""
    bucket = GcsStore.from_uri(gcs_uri).client.bucket(gcs_uri.split("/")[2])

    def write(name: str, data: bytes, generation: int) -> int | str:
        blob = bucket.blob(name)
        try:
            blob.upload_from_string(data, if_generation_match=generation, retry=None)
        except google_errors.PreconditionFailed:
            return "412"
        return blob.generation

    first = write("k", b"1", 0)
    assert write("k", b"2", 0) == "412"
    assert write("k", b"2", first + 1) == "412"
    assert write("missing", b"2", first) == "412"
    second = write("k", b"1", first)
    assert second not in ("412", first)
    assert write("k", b"1", second) not in ("412", second)
    assert bucket.blob("k").download_as_bytes() == b"1"


def test_seaweedfs_checks_conditions(seaweedfs_endpoint: str) -> None:
    """With boto3 alone, as test_moto_enforces_conditional_puts does for moto; SeaweedFS answers
    412, not 404, to If-Match on a missing key."""
    client: Any = seaweedfs_server.client(seaweedfs_endpoint)
    bucket, key = seaweedfs_server.BUCKET, f"conditions/{datetime.now().timestamp()}"

    def status(**kwargs: Any) -> int:
        with pytest.raises(client.exceptions.ClientError) as info:
            client.put_object(Bucket=bucket, **kwargs)
        return info.value.response["ResponseMetadata"]["HTTPStatusCode"]

    etag = client.put_object(Bucket=bucket, Key=key, Body=b"1", IfNoneMatch="*")["ETag"]
    assert status(Key=key, Body=b"2", IfNoneMatch="*") == 412
    assert status(Key=key, Body=b"2", IfMatch='"0123456789abcdef0123456789abcdef"') == 412
    assert status(Key=key + "-missing", Body=b"2", IfMatch=etag) == 412
    assert client.put_object(Bucket=bucket, Key=key, Body=b"2", IfMatch=etag)["ETag"] != etag
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"2"


def test_azurite_checks_conditions(azure_uri: str) -> None:
    """With azure-storage-blob alone: 409 BlobAlreadyExists for a create over a blob, 412
    ConditionNotMet for a stale or missing If-Match, a new ETag for every write."""
    from azure.core import MatchConditions
    from azure.core.exceptions import HttpResponseError

    blob = AzureStore.from_uri(azure_uri).client.get_blob_client("k")

    def code(data: bytes, **condition: Any) -> tuple[int, str]:
        with pytest.raises(HttpResponseError) as info:
            blob.upload_blob(data, **condition)
        return info.value.status_code, info.value.error_code

    etag = blob.upload_blob(b"1", overwrite=False)["etag"]
    assert code(b"2", overwrite=False) == (409, "BlobAlreadyExists")
    stale = {"overwrite": True, "etag": '"0x8D000000000000"', "match_condition": MatchConditions.IfNotModified}
    assert code(b"2", **stale) == (412, "ConditionNotMet")
    new = blob.upload_blob(b"1", overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified)["etag"]
    assert new != etag
    blob.delete_blob()
    gone = {"overwrite": True, "etag": new, "match_condition": MatchConditions.IfNotModified}
    assert code(b"2", **gone) == (412, "ConditionNotMet")


# =========================================================================================
# Locations and options
# =========================================================================================


@pytest.mark.parametrize("uri,bucket,prefix", [
    ("gs://bkt", "bkt", ""), ("gs://bkt/tables/t/", "bkt", "tables/t"),
    ("gs://my.bucket_1/a=1/b", "my.bucket_1", "a=1/b"),
    ("az://ctr", "ctr", ""), ("az://ctr/tables/t/", "ctr", "tables/t"), ("az://$root/t", "$root", "t"),
])
def test_from_uri_parses(uri: str, bucket: str, prefix: str) -> None:
    store = store_for_uri(uri, {"account_name": "acct"} if uri.startswith("az") else None)
    assert (store.bucket, store.prefix) == (bucket, prefix)  # type: ignore[attr-defined]


@pytest.mark.parametrize("uri", ["gs://", "gs:///t", "gs://Bkt/t", "gs://bkt//t", "gs://bkt/a/../b", "gs://bkt/t?x=1",
                                 "az://", "az://Ctr/t", "az://ctr/./t", "az://ctr/t#f", "az://ctr/t\\u"])
def test_from_uri_rejects_malformed(uri: str) -> None:
    with pytest.raises(InvalidArgumentError):
        store_for_uri(uri, {"account_name": "acct"} if uri.startswith("az") else None)


def test_unknown_options_name_the_known_ones() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown GCS storage option.*region.*expected one of endpoint_url, "
                                                   "project, token"):
        store_for_uri("gs://bkt/t", {"region": "x"})
    with pytest.raises(InvalidArgumentError, match="unknown Azure storage option.*sas.*expected one of account_name, "
                                                   "account_key, connection_string, endpoint_url"):
        store_for_uri("az://ctr/t", {"sas": "x"})
    with pytest.raises(InvalidArgumentError, match="conflicting values given for GCS option project"):
        store_for_uri("gs://bkt/t", {"project": "a", "GOOGLE_CLOUD_PROJECT": "b"})
    with pytest.raises(InvalidArgumentError, match=r"apply only to s3://, gs:// and az://"):
        store_for_uri("/tmp/t", {"project": "a"})


def test_a_missing_client_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import google.cloud

    monkeypatch.delitem(sys.modules, "manifest_table.storage.gcs", raising=False)
    monkeypatch.setitem(sys.modules, "google.cloud.storage", None)  # what an absent package looks like
    monkeypatch.delattr(google.cloud, "storage")
    with pytest.raises(InvalidArgumentError, match=r"GcsStore needs google.cloud.storage: pip install "
                                                   r"'manifest_table\[gcs\]'"):
        store_for_uri("gs://bkt/t")


def test_gcs_token_must_be_anonymous_or_a_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="neither 'anonymous' nor a service account key file"):
        store_for_uri("gs://bkt/t", {"token": str(tmp_path / "missing.json")})
    (tmp_path / "user.json").write_text(json.dumps({"type": "authorized_user", "client_id": "x"}))
    with pytest.raises(InvalidArgumentError, match="user.json' is neither"):
        store_for_uri("gs://bkt/t", {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "user.json")})


def test_gcs_endpoint_from_option_or_emulator_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")  # the emulators' host:port form
    fs, root = GcsStore.from_uri("gs://bkt/t").arrow_filesystem()
    options = fs.__reduce__()[1][0]
    assert (options["scheme"], options["endpoint_override"], options["anonymous"]) == ("http", "127.0.0.1:4443", True)
    assert options["retry_time_limit"] == timedelta(seconds=60)  # pyarrow's own default retries for 15 minutes
    assert root == "bkt/t"
    store = GcsStore.from_uri("gs://bkt/t", {"endpoint_url": "https://gcs.example:8443/", "token": "anonymous"})
    options = store.arrow_filesystem()[0].__reduce__()[1][0]
    assert (options["scheme"], options["endpoint_override"]) == ("https", "gcs.example:8443")
    assert store.client._connection.API_BASE_URL == "https://gcs.example:8443"
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    assert GcsStore.from_uri("gs://bkt/t")._anonymous() is False  # Google's default credentials, then
    # The variable's name is an option name too; what Spark's connector is given names no key file
    # for token="anonymous".
    assert GcsStore.from_uri("gs://bkt/t", {"STORAGE_EMULATOR_HOST": "127.0.0.1:4443"}).connection == GcsConnection(
        "http://127.0.0.1:4443", None, None, True
    )
    assert GcsStore.from_uri("gs://bkt/t", {"token": "anonymous"}).connection == GcsConnection(None, None, None, True)


@pytest.mark.parametrize("options,environment,expected", [
    ({"connection_string": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;"
                           "EndpointSuffix=core.chinacloudapi.cn"}, {},
     ("acct", "https://acct.blob.core.chinacloudapi.cn", "a2V5", None)),
    ({"connection_string": "BlobEndpoint=http://127.0.0.1:1/acct;AccountName=acct;SharedAccessSignature=sv=1&sig=x"},
     {}, ("acct", "http://127.0.0.1:1/acct", None, "sv=1&sig=x")),
    ({"connection_string": "UseDevelopmentStorage=true"}, {},
     ("devstoreaccount1", "http://127.0.0.1:10000/devstoreaccount1", azurite_server.KEY, None)),
    ({"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=True"}, {},
     ("devstoreaccount1", "http://127.0.0.1:10000/devstoreaccount1", azurite_server.KEY, None)),
    ({"account_name": "acct"}, {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=other"},
     ("acct", "https://acct.blob.core.windows.net", None, None)),
    ({"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_KEY": "a2V5", "endpoint_url": "http://h:1/acct/"}, {},
     ("acct", "http://h:1/acct", "a2V5", None)),
    ({}, {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=env;AccountKey=a2V5"},
     ("env", "https://env.blob.core.windows.net", "a2V5", None)),
    ({}, {"AZURE_STORAGE_ACCOUNT": "cli", "AZURE_STORAGE_KEY": "a2V5"},
     ("cli", "https://cli.blob.core.windows.net", "a2V5", None)),
])
def test_azure_account_from_options_then_environment(options: dict[str, str], environment: dict[str, str],
                                                     expected: tuple[Any, ...],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    account = AzureStore.from_uri("az://ctr/t", options).account
    assert (account.name, account.blob_url, account.key, account.sas_token) == expected


@pytest.mark.parametrize("options,match", [
    ({}, "Azure needs a storage account"),
    ({"account_key": "a2V5"}, "need account_name"),
    ({"connection_string": "AccountName=a", "account_name": "a"}, "not both"),
    ({"connection_string": "AccountKey=a2V5"}, "no AccountName"),
    ({"account_name": "acct", "endpoint_url": "https://elsewhere.example"}, "is neither https://acct.blob"),
])
def test_azure_account_errors(options: dict[str, str], match: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InvalidArgumentError, match=match):
        AzureStore.from_uri("az://ctr/t", options)


@pytest.mark.parametrize("blob_url,authority,dfs", [
    ("https://acct.blob.core.windows.net", ".blob.core.windows.net", ".dfs.core.windows.net"),
    ("http://127.0.0.1:10000/acct", "127.0.0.1:10000", "127.0.0.1:10000"),
])
def test_azure_data_plane_addresses_the_same_account(blob_url: str, authority: str, dfs: str) -> None:
    store = AzureStore("ctr", "t", account=AzureAccount("acct", blob_url, "a2V5"))
    fs, root = store.arrow_filesystem()
    options = fs.__reduce__()[1][0]
    assert (options["account_name"], options["account_key"], options["blob_storage_authority"],
            options["dfs_storage_authority"]) == ("acct", "a2V5", authority, dfs)
    assert options["blob_storage_scheme"] == blob_url.split(":")[0]
    assert root == "ctr/t"


def test_azure_without_a_key_signs_in_with_the_default_credential() -> None:
    from azure.identity import DefaultAzureCredential

    store = AzureStore.from_uri("az://ctr/t", {"account_name": "acct"})
    assert isinstance(store.client.credential, DefaultAzureCredential)
    options = store.arrow_filesystem()[0].__reduce__()[1][0]
    assert (options["account_key"], options["sas_token"]) == ("", "")  # pyarrow's default credential too


def test_azure_with_a_sas_token_signs_both_planes_with_it() -> None:
    store = AzureStore.from_uri(
        "az://ctr/t", {"connection_string": "BlobEndpoint=http://127.0.0.1:1/acct;AccountName=acct;SharedAccessSignature=sv=1&sig=x"}
    )
    assert store.client.url.endswith("/acct/ctr?sv=1&sig=x") and store.client.credential is None
    assert store.arrow_filesystem()[0].__reduce__()[1][0]["sas_token"] == "sv=1&sig=x"


# =========================================================================================
# Behaviour on the servers
# =========================================================================================


@pytest.mark.parametrize("kind", CLOUD_KINDS)
def test_keys_live_under_the_prefix(kind: str, request: pytest.FixtureRequest) -> None:
    uri, options = store_location(kind, request)
    store = store_for_uri(uri, options)
    store.put_if_absent("manifest/v1.json", b"{}")
    sibling = store_for_uri(uri + "2/", options)  # a table whose name extends ours
    sibling.put_if_absent("x", b"")
    assert [i.key for i in store.list()] == ["manifest/v1.json"]
    assert [i.key for i in sibling.list()] == ["x"]
    scheme, rest = uri.split("://")
    bucket, prefix = rest.split("/", 1)
    whole = store_for_uri(f"{scheme}://{bucket}", options)
    assert [i.key for i in whole.list(prefix)] == [f"{prefix}/manifest/v1.json", f"{prefix}2/x"]
    assert whole.get(f"{prefix}/manifest/v1.json") == b"{}"


@pytest.mark.parametrize("kind", CLOUD_KINDS)
def test_store_pickles(kind: str, request: pytest.FixtureRequest) -> None:
    store = store_for_uri(*store_location(kind, request))
    store.put_if_absent("k", b"v")
    store.arrow_filesystem()  # build the lazy parts, which must not travel
    clone = pickle.loads(pickle.dumps(store))
    assert clone._client is None and clone._fs is None  # type: ignore[attr-defined]
    assert clone.get("k") == b"v"
    fs, root = clone.arrow_filesystem()
    assert fs.open_input_file(root + "/k").read() == b"v"


@pytest.mark.parametrize("uri", ["gs://no-such-bucket-here/t", "az://no-such-container-here/t"])
def test_missing_bucket_is_a_store_error_on_write_and_list(uri: str, gcs_endpoint: str, azurite_endpoint: str) -> None:
    """Azure names a missing container in every answer, so its reads fail too; GCS answers a read
    of a missing bucket's object exactly as one of a missing object (a plain 404), so there a
    read says the key is missing."""
    store = store_for_uri(uri)
    calls = [lambda: store.put_if_absent("k", b""), lambda: list(store.list())]
    if uri.startswith("az://"):
        calls += [lambda: store.get("k"), lambda: store.head("k"), lambda: store.delete("k")]
    for call in calls:
        with pytest.raises(StoreError, match="no-such-") as info:
            call()
        assert not isinstance(info.value, (NotFound, PreconditionFailed))


# --- a conditional write whose response was lost -------------------------------------------


class _LoseFirstUpload(requests.adapters.HTTPAdapter):
    """Sends the first upload, then loses its response, as a reset connection would."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[int] = []

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().send(request, *args, **kwargs)
        if not self.lost and "/upload/" in request.url:
            self.lost.append(response.status_code)
            raise requests.ConnectionError("response lost")
        return response


class _LoseFirstPut(RequestsTransport):
    def __init__(self) -> None:
        super().__init__()
        self.lost: list[int] = []

    def send(self, request: Any, **kwargs: Any) -> Any:
        response = super().send(request, **kwargs)
        if not self.lost and request.method == "PUT":
            self.lost.append(response.status_code)
            raise ServiceResponseError("response lost")
        return response


def _losing_store(kind: str, uri: str, options: dict[str, str] | None) -> tuple[Any, list[int]]:
    """A store whose client loses the response to its first write after the write landed."""
    store: Any = store_for_uri(uri, options)
    if kind == "gcs":
        adapter = _LoseFirstUpload()
        store.client._http.mount("http://", adapter)
        return store, adapter.lost
    transport = _LoseFirstPut()
    store._client = ContainerClient(store.account.blob_url, store.bucket, credential=store._credential(),
                                    transport=transport, retry_policy=LinearRetry(backoff=0.01, random_jitter_range=0))
    return store, transport.lost


@pytest.mark.parametrize("kind", ["gcs", "azure"])
@pytest.mark.parametrize("op", ["put_if_absent", "put_if_match"])
def test_lost_race_after_a_retry_is_outcome_unknown(kind: str, op: str, request: pytest.FixtureRequest) -> None:
    """The client library repeats the write, which is refused because of our own first attempt:
    that must not read as "someone else won" (test_s3_lost_race_after_a_retry_is_outcome_unknown)."""
    uri, options = store_location(kind, request)
    etag = store_for_uri(uri, options).put_if_absent("_latest_manifest", b"v1") if op == "put_if_match" else ""
    store, lost = _losing_store(kind, uri, options)
    with pytest.raises(StoreError, match="outcome unknown after a retry") as info:
        if op == "put_if_absent":
            store.put_if_absent("_latest_manifest", b"mine")
        else:
            store.put_if_match("_latest_manifest", b"mine", etag)
    assert not isinstance(info.value, PreconditionFailed)
    assert lost and lost[0] in (200, 201)
    assert store.get("_latest_manifest") == b"mine"  # reading back resolves it


class _UncodedRefusals(RequestsTransport):
    """Strips the error code from a 412's headers and body, as a proxy in front of the service
    may: the status alone must still read as a lost race."""

    def send(self, request: Any, **kwargs: Any) -> Any:
        response = super().send(request, **kwargs)
        if response.status_code == 412:
            response.headers.pop("x-ms-error-code", None)
            response.read()
            response._content = b""  # (the XML body names the code too)
        return response


def test_azure_refusal_without_an_error_code_is_a_lost_race(azure_uri: str) -> None:
    store: Any = store_for_uri(azure_uri)
    etag = store.put_if_absent("_latest_manifest", b"v1")
    store.put_if_match("_latest_manifest", b"v2", etag)
    store._client = ContainerClient(store.account.blob_url, store.bucket, credential=store._credential(),
                                    transport=_UncodedRefusals())
    with pytest.raises(PreconditionFailed):
        store.put_if_match("_latest_manifest", b"v3", etag)
    assert store.get("_latest_manifest") == b"v2"


# --- GCS credentials from a file -----------------------------------------------------------


@pytest.fixture
def token_endpoint() -> Iterator[tuple[str, list[str]]]:
    """A local OAuth token endpoint, as a service account's ``token_uri`` names: each request
    gets a new access token valid for 270 s (past google-auth's 225 s refresh
    threshold, inside the store's 5-minute margin). Yields its URL and the tokens it issued."""
    issued: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            issued.append(f"token-{len(issued)}")
            body = json.dumps({"access_token": issued[-1], "expires_in": 270, "token_type": "Bearer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/token", issued
    finally:
        server.shutdown()
        server.server_close()


def _service_account_file(path: Path, token_uri: str) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path.write_text(json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "1",
                                "private_key": pem, "client_email": "tables@p.iam.gserviceaccount.com",
                                "client_id": "1", "token_uri": token_uri}))
    return path


def test_gcs_token_file_signs_in_both_planes(gcs_uri: str, gcs_endpoint: str, tmp_path: Path,
                                             token_endpoint: tuple[str, list[str]]) -> None:
    """pyarrow takes no credentials file, only an access token: the store gets one from the
    file's account and renews the data plane before it expires (here at every use: the
    tokens last less than the 5-minute margin)."""
    url, issued = token_endpoint
    token = _service_account_file(tmp_path / "account.json", url)
    store = GcsStore.from_uri(gcs_uri, {"token": str(token), "endpoint_url": gcs_endpoint})
    store.put_if_absent("k", b"v")
    signed_in = len(issued)
    assert signed_in >= 1  # the control plane signed in with the file's account
    fs, root = store.arrow_filesystem()
    options = fs.__reduce__()[1][0]
    # Tokens compared by the order the endpoint issued them, not by count: a loaded CI run saw
    # one token request more than the store's own (google-auth's, between the two planes).
    assert options["anonymous"] is False and issued.index(options["access_token"]) >= signed_in
    assert options["credential_token_expiration"] - datetime.now(UTC) < timedelta(seconds=271)
    renewed, _ = store.arrow_filesystem()
    renewed_token = renewed.__reduce__()[1][0]["access_token"]
    assert renewed is not fs and issued.index(renewed_token) > issued.index(options["access_token"])
    assert renewed.open_input_file(root + "/k").read() == b"v"
