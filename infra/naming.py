"""Physical names the stack chooses itself, derived from the project and stack names (pure functions).

Most resources are auto-named by Pulumi. Two are named explicitly: the AgentCore runtime (the API
requires a name, pattern `^[a-zA-Z][a-zA-Z0-9_]{0,47}$`) and the SageMaker endpoint, whose name
must be known before it exists so that its execution role can be scoped to its log group (the role
has to exist before the endpoint does). A stack open to people (publicAccess) adds the public
runtime, the CloudFront origin access control and response headers policy (names unique in the
account, required by the API) and the managed login domain's prefix, which is unique in the whole
region across every AWS account: derived from the stack and a digest of account and region.

The endpoint's name carries its instance type. SageMaker refuses `UpdateEndpoint` when the update
changes the instance type of a variant registered with Application Auto Scaling
(terraform-provider-aws#14337); a new name instead makes a type change a replacement: Pulumi creates
the new endpoint (and its scalable target) beside the old one, points the agent at it, then deletes
the old endpoint and deregisters its target, all in one `pulumi up`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

RUNTIME_NAME_PATTERN: Final = re.compile(r"[a-zA-Z][a-zA-Z0-9_]{0,47}")
RUNTIME_NAME_MAX: Final = 48
ENDPOINT_NAME_PATTERN: Final = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
ENDPOINT_NAME_MAX: Final = 63
_DIGEST_CHARS: Final = 8
RUNTIME_LOG_GROUP_ROOT: Final = "/aws/bedrock-agentcore/runtimes/"
RUNTIME_ENDPOINT: Final = "DEFAULT"
"""The runtime endpoint AgentCore creates with every runtime (its logs are under `<id>-DEFAULT`)."""
SIGN_IN_DOMAIN_PREFIX: Final = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
"""CreateUserPoolDomain's pattern for a prefix domain (botocore's cognito-idp model)."""
SIGN_IN_DOMAIN_RESERVED: Final = ("aws", "amazon", "cognito")
"""Words Cognito refuses in a domain prefix (Cognito developer guide, "Using the Amazon Cognito domain")."""
CLOUDFRONT_NAME_MAX: Final = 64
"""Origin access control names are at most 64 characters (the response headers policy's 128 is looser)."""
_SIGN_IN_DIGEST_CHARS: Final = 10


def runtime_name(project: str, stack: str) -> str:
    """`<project>_<stack>_agent` squeezed into the AgentCore runtime name pattern.

    Characters outside [a-zA-Z0-9_] become `_`; a name that must be shortened keeps a digest of the
    full name so two long stack names that share a prefix still get different runtimes.
    """
    return _agentcore_name(f"{project}_{stack}_agent")


def public_runtime_name(project: str, stack: str) -> str:
    """`<project>_<stack>_public`: the runtime that accepts the sign-in pool's tokens (publicAccess)."""
    return _agentcore_name(f"{project}_{stack}_public")


def memory_name(project: str, stack: str) -> str:
    """`<project>_<stack>_memory`: AgentCore Memory names follow the runtime name pattern."""
    return _agentcore_name(f"{project}_{stack}_memory")


def runtime_log_group(runtime_id: str, endpoint: str = RUNTIME_ENDPOINT) -> str:
    """The log group AgentCore writes a runtime endpoint's container output to (AgentCore picks the id)."""
    return f"{RUNTIME_LOG_GROUP_ROOT}{runtime_id}-{endpoint}"


def runtime_log_group_prefix(runtime_name: str) -> str:
    """What every log group of the runtime named `runtime_name` starts with: AgentCore's runtime ids are
    `<name>-<suffix>`, and a runtime name cannot contain `-`, so no other runtime's groups share it."""
    return f"{RUNTIME_LOG_GROUP_ROOT}{runtime_name}-"


def dashboard_name(project: str, stack: str) -> str:
    """`<project>-<stack>`: CloudWatch dashboard names allow letters, digits, `-` and `_` (255 at most)."""
    return re.sub(r"[^a-zA-Z0-9_-]+", "-", f"{project}-{stack}")[:255]


def page_resource_name(project: str, stack: str, purpose: str) -> str:
    """`<project>-<stack>-<purpose>` for the page's CloudFront resources whose name the API requires and the
    account must not hold twice (letters, digits, `-` and `_`)."""
    name = re.sub(r"[^a-zA-Z0-9_-]+", "-", f"{project}-{stack}-{purpose}").strip("-")
    return _shorten(name, CLOUDFRONT_NAME_MAX, separator="-")


def sign_in_domain_prefix(project: str, stack: str, account_id: str, region: str) -> str:
    """The managed login domain's prefix: `<project>-<stack>-<10 hex digits>`, at most 63 characters.

    Cognito prefixes are unique per region across all accounts, so a readable name alone would collide
    with someone else's stack of the same name: the digest of account, region, project and stack makes
    it this stack's own (two stacks share one only if all four match, i.e. never). The words Cognito
    refuses (aws, amazon, cognito) are taken out of the readable part; hex digits cannot spell them.
    """
    readable = re.sub(r"[^a-z0-9]+", "-", f"{project}-{stack}".lower())
    while any(word in readable for word in SIGN_IN_DOMAIN_RESERVED):  # until no removal spells one anew
        for word in SIGN_IN_DOMAIN_RESERVED:
            readable = readable.replace(word, "")
    readable = re.sub(r"-{2,}", "-", readable).strip("-")
    digest = hashlib.sha256(f"{account_id}:{region}:{project}:{stack}".encode()).hexdigest()[:_SIGN_IN_DIGEST_CHARS]
    head = readable[: 63 - _SIGN_IN_DIGEST_CHARS - 1].rstrip("-")
    return f"{head}-{digest}" if head else digest


def _agentcore_name(raw: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9_]+", "_", raw).strip("_")
    if not name or not name[0].isalpha():
        name = f"a_{name}"
    return _shorten(name, RUNTIME_NAME_MAX, separator="_")


def endpoint_name(project: str, stack: str, instance_type: str) -> str:
    """`<project>-<stack>-speech-<family>-<size>` squeezed into the SageMaker endpoint name pattern."""
    instance = instance_type.removeprefix("ml.")
    name = re.sub(r"[^a-zA-Z0-9]+", "-", f"{project}-{stack}-speech-{instance}").strip("-")
    return _shorten(name, ENDPOINT_NAME_MAX, separator="-")


def _shorten(name: str, limit: int, *, separator: str) -> str:
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST_CHARS]
    head = name[: limit - _DIGEST_CHARS - 1].rstrip(separator)
    return f"{head}{separator}{digest}"
