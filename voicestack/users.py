"""`voicestack add-user --stack NAME --email ADDRESS`: give a person an account on a stack open to people.

The stack must set `voicestack:publicAccess: true` and have been deployed (its `userPoolId` output).
Cognito creates the account with the address as its verified e-mail and mails the person a temporary
password and the page's address (the pool's invitation, infra/signin.py); they choose their own
password at the first sign-in. `--resend` mails a new temporary password to someone who has not
signed in yet. One `cognito-idp:AdminCreateUser` call, which infra/deployer-policy/ allows.

Exit codes (voicestack/cli.py): 0 invited; 2 a bad address, a stack that is not open to people or not
deployed (the message names the flag, key or output); 3 Cognito refused or could not be reached (the
message names the error code and what to do).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from voicestack import repository
from voicestack.errors import CommandError, ExitCode, UsageError
from voicestack.preflight import Clients, Target, boto3_clients, read_with_pulumi_cli, target_of
from voicestack.pulumi_stack import StackView

repository.make_importable()

from botocore.exceptions import (  # type: ignore[import-untyped]  # noqa: E402  (after make_importable)
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)

from infra.config import EMAIL_ADDRESS  # noqa: E402  (infra is read from the repository, not installed)
from infra.signin import PASSWORD_POLICY  # noqa: E402

POOL_OUTPUT: Final = "userPoolId"
PAGE_OUTPUT: Final = "pageUrl"
EMAIL_ATTRIBUTE_MAX: Final = 2048
"""Cognito's limit on an attribute value (AttributeValueType)."""
ALLOW_ADD_USER: Final = (
    "attach the deployer policies of infra/deployer-policy/ (they allow cognito-idp:AdminCreateUser)"
)


def email_address(raw: str) -> str:
    """The person's address, as the pool takes it; `UsageError` naming --email otherwise."""
    address = raw.strip()
    if EMAIL_ADDRESS.fullmatch(address) is None or len(address) > EMAIL_ATTRIBUTE_MAX:
        raise UsageError(f"--email must be one e-mail address (name@example.com), got {raw!r}")
    return address


def public_pool(target: Target) -> str:
    """The stack's user pool id; `UsageError` when the stack is not open to people or not deployed yet."""
    key = target.key("publicAccess")
    if target.config.public is None:
        raise UsageError(
            f"stack {target.stack!r} is not open to people ({key} is false): pulumi config set {key} true "
            f"--stack {target.stack}, then pulumi up"
        )
    pool = target.outputs.get(POOL_OUTPUT)
    if not isinstance(pool, str) or not pool:
        raise UsageError(f"stack {target.stack!r} has no output {POOL_OUTPUT!r} yet ({key} is true): run pulumi up")
    return pool


def create_user_request(pool: str, email: str, *, resend: bool) -> dict[str, Any]:
    """AdminCreateUser's parameters: the address is the username and its verified e-mail; Cognito mails the
    invitation (RESEND: a new temporary password for someone who has not signed in yet)."""
    request: dict[str, Any] = {
        "UserPoolId": pool,
        "Username": email,
        "UserAttributes": [{"Name": "email", "Value": email}, {"Name": "email_verified", "Value": "true"}],
        "DesiredDeliveryMediums": ["EMAIL"],
    }
    if resend:
        request["MessageAction"] = "RESEND"
    return request


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))


def refusal(error: ClientError, *, email: str, pool: str, target: Target, resend: bool) -> CommandError:
    """Cognito's refusal as the command's error: the code, and what to do about it (exit 3)."""
    code = _code(error)
    command = f"voicestack add-user --stack {target.stack} --email {email}"
    fixes: Mapping[str, str] = {
        "UsernameExistsException": f"{email} already has an account; to mail a new temporary password to someone "
        f"who has not signed in yet: {command} --resend",
        "UserNotFoundException": f"{email} has no account to resend to: {command}",
        "UnsupportedUserStateException": f"{email} has already chosen a password; they can reset it with "
        "'Forgot your password?' on the sign-in page",
        "ResourceNotFoundException": f"the user pool {pool} is not in {target.region}: run pulumi up on the stack",
        "AccessDeniedException": ALLOW_ADD_USER,
        "AccessDenied": ALLOW_ADD_USER,
        "NotAuthorizedException": ALLOW_ADD_USER,
        "CodeDeliveryFailureException": "Cognito could not mail the invitation; its own sender allows about 50 mails a "
        "day per account (infra/README.md, 'Open it to people'): try tomorrow, or give the pool an SES identity",
        "LimitExceededException": "Cognito's e-mail limit for the account is reached: try tomorrow, or give the pool "
        "an SES identity (infra/README.md, 'Open it to people')",
        "TooManyRequestsException": "Cognito is throttling the account's requests: try again in a minute",
        "InvalidParameterException": "Cognito refused the address: check it, then run the command again",
        "ExpiredTokenException": "the AWS credentials have expired: renew them (aws sso login, or new keys)",
        "UnrecognizedClientException": "the AWS credentials are not valid: renew them (aws sso login, or new keys)",
    }
    fix = fixes.get(code, "run the command again; if it fails the same way, see Cognito's message above")
    action = "resending the invitation of" if resend else "inviting"
    message = error.response.get("Error", {}).get("Message", "")
    detail = f"{code}: {message}" if message else code
    return CommandError(ExitCode.UNREACHABLE, f"Cognito refused {action} {email} ({detail}); {fix}")


def invite(client: Any, target: Target, pool: str, email: str, *, resend: bool) -> dict[str, Any]:
    """Calls AdminCreateUser; every failure becomes a `CommandError` with exit 3."""
    try:
        response: dict[str, Any] = client.admin_create_user(**create_user_request(pool, email, resend=resend))
    except (NoCredentialsError, PartialCredentialsError):
        raise CommandError(
            ExitCode.UNREACHABLE,
            "no AWS credentials found: aws configure, aws sso login, or export AWS_PROFILE=<profile>",
        ) from None
    except EndpointConnectionError:
        raise CommandError(
            ExitCode.UNREACHABLE,
            f"Cognito does not answer in {target.region} ({client.meta.endpoint_url}): check the network, or the "
            "stack's aws:region",
        ) from None
    except ClientError as error:
        raise refusal(error, email=email, pool=pool, target=target, resend=resend) from None
    return response


def invited_lines(response: Mapping[str, Any], *, email: str, target: Target, pool: str, resend: bool) -> list[str]:
    """What the command prints once Cognito has the account."""
    user = response.get("User", {})
    status = user.get("UserStatus", "FORCE_CHANGE_PASSWORD")
    verb = "mailed a new temporary password to" if resend else "invited"
    page = target.outputs.get(PAGE_OUTPUT)
    where = f" at {page}" if isinstance(page, str) and page else ""
    return [
        f"{verb} {email} to stack {target.stack} (user pool {pool}, {target.region}): status {status}",
        f"Cognito mails them a temporary password (valid {PASSWORD_POLICY.temporary_password_validity_days} days); "
        f"they sign in{where} and choose their own.",
    ]


class AddUserCommand:
    """`voicestack add-user`; the stack reader and the AWS clients can be replaced."""

    def __init__(
        self,
        *,
        read: Callable[[str], StackView] = read_with_pulumi_cli,
        clients: Callable[[str, str | None], Clients] = boto3_clients,
        project_file: Path = repository.PULUMI_YAML,
    ) -> None:
        self._read, self._clients, self._project_file = read, clients, project_file

    def register(self, commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        parser = commands.add_parser(
            "add-user",
            help="give a person an account on a stack open to people (Cognito mails a temporary password)",
            description=__doc__.splitlines()[0] if __doc__ else None,
        )
        parser.add_argument("--stack", required=True, metavar="NAME", help="the Pulumi stack (publicAccess: true)")
        parser.add_argument("--email", required=True, metavar="ADDRESS", help="the person's e-mail address")
        parser.add_argument(
            "--resend", action="store_true", help="mail a new temporary password to someone who has not signed in"
        )
        parser.set_defaults(run=self.run)

    def run(self, args: argparse.Namespace) -> int:
        email = email_address(args.email)
        target = target_of(self._read(args.stack), self._project_file)
        pool = public_pool(target)
        client = self._clients(target.region, target.profile)("cognito-idp")
        response = invite(client, target, pool, email, resend=args.resend)
        for line in invited_lines(response, email=email, target=target, pool=pool, resend=args.resend):
            print(line)
        return int(ExitCode.OK)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds `add-user` with the real Pulumi CLI and AWS."""
    AddUserCommand().register(commands)
