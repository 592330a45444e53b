"""AWS Glue's failures, as boto3 reports them, said for a user: what failed and what to do (the
message of the CatalogError a Glue call raises)."""

from __future__ import annotations

import re
from typing import Any

from ..model.storage import GLUE_ENDPOINT

ATTEMPTS = 5  # boto3's standard retries: throttling and dropped connections, with growing pauses

_CREDENTIAL_CODES = frozenset(
    {
        "AccessDeniedException",
        "AccessDenied",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredTokenException",
        "ExpiredToken",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationTokenException",
        "NotAuthorized",
    }
)
_BUSY_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ConcurrentModificationException",
        "ServiceUnavailableException",
        "InternalServiceException",
        "OperationTimeoutException",
    }
)
_XML_FIELD = {tag: re.compile(f"<{tag}>(.*?)</{tag}>", re.DOTALL) for tag in ("Code", "Message")}
_MESSAGE_CHARS = 400
_INPUT_CODES = frozenset({"InvalidInputException", "ValidationException"})
_CHECK_INPUT = (
    "Check the schema and table names (Glue takes lowercase letters, digits and underscores) and the "
    "location."
)


def _answer(error: Any) -> tuple[str, str, int]:
    """A ClientError's code, message (one line) and HTTP status; from an XML body where the server
    answered in XML to a JSON request (as proxies and emulators do)."""
    answer = error.response.get("Error") or {}
    status = int((error.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
    code, message = str(answer.get("Code") or "an error"), str(answer.get("Message") or "no message")
    in_xml = {tag: _XML_FIELD[tag].search(message) for tag in _XML_FIELD}
    if in_xml["Code"]:
        code = in_xml["Code"].group(1)
        message = in_xml["Message"].group(1) if in_xml["Message"] else message
    message = " ".join(message.split())
    return code, message[:_MESSAGE_CHARS] + ("..." if len(message) > _MESSAGE_CHARS else ""), status


def glue_failure(action: str, error: Exception, endpoint: str | None) -> str:
    """What failed in a Glue call `action` (``GetTable``, ...) and what to do, from boto3's error."""
    from botocore import exceptions as aws

    if isinstance(error, aws.ClientError):
        code, message, status = _answer(error)
        said = f"AWS Glue refused {action} ({code}: {message})."
        if code in _CREDENTIAL_CODES or status in (401, 403):
            return (
                f"{said} Check the AWS credentials of the storage connection (storage_conn_id, or "
                f"storage_options): they must be valid, unexpired, and allowed glue:{action}."
            )
        if code in _BUSY_CODES or status == 429 or status >= 500:
            return (
                f"{said} Glue stayed busy through {ATTEMPTS} attempts: retry the task later, or run "
                "fewer loads against the catalog at once."
            )
        if code in _INPUT_CODES:
            return f"{said} {_CHECK_INPUT}"
        return f"{said} Retry the task; where it fails again, look at the catalog in the Glue console."
    if isinstance(error, (aws.NoCredentialsError, aws.PartialCredentialsError)):
        return (
            f"{action}: no complete AWS credentials for Glue ({error}). Give the storage connection a "
            "login and password (access key id and secret), or the worker an AWS profile or role."
        )
    if isinstance(error, aws.NoRegionError):
        return (
            f"{action}: no AWS region for Glue. Set region_name in the storage connection's extra "
            "(AWS_REGION in storage_options)."
        )
    if isinstance(error, (aws.ConnectionError, aws.HTTPClientError)):
        return (
            f"{action}: AWS Glue could not be reached at {endpoint or 'its regional endpoint'} "
            f"({type(error).__name__}). Check the network and the region, and the Glue endpoint "
            "override where one is set (the connection extra's service_config.glue.endpoint_url, "
            f"{GLUE_ENDPOINT} in storage_options)."
        )
    if isinstance(error, aws.ParamValidationError):
        return f"{action}: boto3 refused the request ({error}). {_CHECK_INPUT}"
    return f"{action} failed in boto3 ({type(error).__name__}: {error}). Retry the task."
