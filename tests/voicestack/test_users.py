"""`voicestack add-user`: Cognito's AdminCreateUser against botocore's Stubber (requests and responses checked
against the cognito-idp model), the stack read through a stand-in Pulumi CLI; exact lines and exit codes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import botocore.session  # type: ignore[import-untyped]
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.stub import Stubber  # type: ignore[import-untyped]
from botocore.validate import ParamValidator  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestack.cli import build_parser, main
from voicestack.errors import UsageError
from voicestack.pulumi_stack import read_stack
from voicestack.repository import REPO_ROOT
from voicestack.users import AddUserCommand, create_user_request, email_address

REGION = "eu-west-1"
POOL = "eu-west-1_AbCdEf123"
PAGE = "https://d111111abcdef8.cloudfront.net/"
EMAIL = "ada@example.com"
SESSION = botocore.session.get_session()
PUBLIC_CONFIG = {
    "aws:region": {"value": REGION, "secret": False},
    "voicestack:publicAccess": {"value": "true", "secret": False},
}
OUTPUTS = {"userPoolId": POOL, "pageUrl": PAGE, "region": REGION}
REQUEST = {
    "UserPoolId": POOL,
    "Username": EMAIL,
    "UserAttributes": [{"Name": "email", "Value": EMAIL}, {"Name": "email_verified", "Value": "true"}],
    "DesiredDeliveryMediums": ["EMAIL"],
}
CREATED = {
    "User": {
        "Username": "7c1e4f0a-3b6d-4a77-9f1e-2d8c5b9a0e11",
        "Attributes": [
            {"Name": "email", "Value": EMAIL},
            {"Name": "email_verified", "Value": "true"},
            {"Name": "sub", "Value": "7c1e4f0a-3b6d-4a77-9f1e-2d8c5b9a0e11"},
        ],
        "UserCreateDate": datetime(2026, 12, 2, 10, 0, tzinfo=UTC),
        "UserLastModifiedDate": datetime(2026, 12, 2, 10, 0, tzinfo=UTC),
        "Enabled": True,
        "UserStatus": "FORCE_CHANGE_PASSWORD",
    }
}


def pulumi_cli(config: Mapping[str, Any], outputs: Mapping[str, Any]) -> Any:
    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        text = json.dumps(outputs) if argv[1] == "stack" else json.dumps(config)
        return subprocess.CompletedProcess(list(argv), 0, text, "")

    return lambda stack: read_stack(stack, runner=run, pulumi="/usr/local/bin/pulumi")


class Cognito:
    """One stubbed cognito-idp client; records the region and profile it was asked for."""

    def __init__(self) -> None:
        self.client = SESSION.create_client(
            "cognito-idp",
            region_name=REGION,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="secret",
            config=Config(retries={"max_attempts": 1, "mode": "standard"}),
        )
        self.stub = Stubber(self.client)
        self.stub.activate()
        self.asked: list[tuple[str, str | None]] = []
        self.services: list[str] = []

    def factory(self, region: str, profile: str | None) -> Any:
        self.asked.append((region, profile))

        def client(service: str) -> Any:
            self.services.append(service)
            return self.client

        return client


@pytest.fixture
def cognito() -> Iterator[Cognito]:
    stubbed = Cognito()
    yield stubbed
    stubbed.stub.assert_no_pending_responses()
    stubbed.stub.deactivate()


def add_user(
    capsys: pytest.CaptureFixture[str],
    cognito: Cognito,
    *args: str,
    config: Mapping[str, Any] = PUBLIC_CONFIG,
    outputs: Mapping[str, Any] = OUTPUTS,
) -> tuple[int, list[str], str]:
    command = AddUserCommand(read=pulumi_cli(config, outputs), clients=cognito.factory)
    code = main(["add-user", "--stack", "dev", *args], commands=[command])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


# --- inviting ---------------------------------------------------------------------------------------


def test_a_person_is_invited_and_cognito_mails_them(capsys: pytest.CaptureFixture[str], cognito: Cognito) -> None:
    cognito.stub.add_response("admin_create_user", CREATED, REQUEST)
    code, lines, err = add_user(capsys, cognito, "--email", EMAIL)
    assert (code, err) == (0, "")
    assert lines == [
        f"invited {EMAIL} to stack dev (user pool {POOL}, {REGION}): status FORCE_CHANGE_PASSWORD",
        f"Cognito mails them a temporary password (valid 7 days); they sign in at {PAGE} and choose their own.",
    ]
    assert (cognito.asked, cognito.services) == ([(REGION, None)], ["cognito-idp"])


def test_the_address_is_trimmed_and_the_stacks_profile_is_used(
    capsys: pytest.CaptureFixture[str], cognito: Cognito
) -> None:
    cognito.stub.add_response("admin_create_user", CREATED, REQUEST)
    config = {**PUBLIC_CONFIG, "aws:profile": {"value": "voice-admin", "secret": False}}
    assert add_user(capsys, cognito, "--email", f"  {EMAIL} ", config=config)[0] == 0
    assert cognito.asked == [(REGION, "voice-admin")]


def test_resend_mails_a_new_temporary_password(capsys: pytest.CaptureFixture[str], cognito: Cognito) -> None:
    cognito.stub.add_response("admin_create_user", CREATED, {**REQUEST, "MessageAction": "RESEND"})
    code, lines, _ = add_user(capsys, cognito, "--email", EMAIL, "--resend")
    assert code == 0
    assert lines[0] == (
        f"mailed a new temporary password to {EMAIL} to stack dev (user pool {POOL}, {REGION}): status "
        "FORCE_CHANGE_PASSWORD"
    )


def test_the_request_is_valid_for_the_cognito_model() -> None:
    shape = SESSION.get_service_model("cognito-idp").operation_model("AdminCreateUser").input_shape
    for resend in (False, True):
        report = ParamValidator().validate(create_user_request(POOL, EMAIL, resend=resend), shape)
        assert not report.has_errors(), report.generate_report()


# --- bad usage: exit 2, nothing asked of AWS ---------------------------------------------------------


@pytest.mark.parametrize("email", ["ada", "ada@example", "ada @example.com", "a@b@example.com", ""])
def test_a_bad_address_is_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], cognito: Cognito, email: str
) -> None:
    code, lines, err = add_user(capsys, cognito, "--email", email)
    assert (code, lines) == (2, [])
    assert err == f"voicestack add-user: --email must be one e-mail address (name@example.com), got {email!r}\n"
    assert cognito.asked == []


def test_a_stack_not_open_to_people_is_exit_2_naming_the_key(
    capsys: pytest.CaptureFixture[str], cognito: Cognito
) -> None:
    config = {"aws:region": {"value": REGION, "secret": False}}
    code, _, err = add_user(capsys, cognito, "--email", EMAIL, config=config, outputs={"region": REGION})
    assert code == 2
    assert err == (
        "voicestack add-user: stack 'dev' is not open to people (voicestack:publicAccess is false): pulumi config "
        "set voicestack:publicAccess true --stack dev, then pulumi up\n"
    )
    assert cognito.asked == []


def test_a_public_stack_not_deployed_yet_is_exit_2(capsys: pytest.CaptureFixture[str], cognito: Cognito) -> None:
    code, _, err = add_user(capsys, cognito, "--email", EMAIL, outputs={})
    assert code == 2
    assert err == (
        "voicestack add-user: stack 'dev' has no output 'userPoolId' yet (voicestack:publicAccess is true): run "
        "pulumi up\n"
    )


def test_an_invalid_stack_value_is_exit_2_naming_the_key(capsys: pytest.CaptureFixture[str], cognito: Cognito) -> None:
    config = {**PUBLIC_CONFIG, "voicestack:signInMfa": {"value": "always", "secret": False}}
    code, _, err = add_user(capsys, cognito, "--email", EMAIL, config=config)
    assert code == 2
    assert err == (
        "voicestack add-user: stack 'dev': voicestack:signInMfa must be one of off, optional, required (got 'always')\n"
    )


# --- refusals: exit 3 with the code and the fix -----------------------------------------------------


@pytest.mark.parametrize(
    ("code", "message", "resend", "expected"),
    [
        (
            "UsernameExistsException",
            "An account with the given email already exists.",
            False,
            f"Cognito refused inviting {EMAIL} (UsernameExistsException: An account with the given email already "
            f"exists.); {EMAIL} already has an account; to mail a new temporary password to someone who has not "
            f"signed in yet: voicestack add-user --stack dev --email {EMAIL} --resend",
        ),
        (
            "UnsupportedUserStateException",
            "Resend not possible. User status is CONFIRMED.",
            True,
            f"Cognito refused resending the invitation of {EMAIL} (UnsupportedUserStateException: Resend not "
            f"possible. User status is CONFIRMED.); {EMAIL} has already chosen a password; they can reset it with "
            "'Forgot your password?' on the sign-in page",
        ),
        (
            "UserNotFoundException",
            "User does not exist.",
            True,
            f"Cognito refused resending the invitation of {EMAIL} (UserNotFoundException: User does not exist.); "
            f"{EMAIL} has no account to resend to: voicestack add-user --stack dev --email {EMAIL}",
        ),
        (
            "AccessDeniedException",
            "User: arn:aws:iam::123456789012:user/dev is not authorized to perform: cognito-idp:AdminCreateUser",
            False,
            f"Cognito refused inviting {EMAIL} (AccessDeniedException: User: arn:aws:iam::123456789012:user/dev is "
            "not authorized to perform: cognito-idp:AdminCreateUser); attach the deployer policies of "
            "infra/deployer-policy/ (they allow cognito-idp:AdminCreateUser)",
        ),
        (
            "ResourceNotFoundException",
            "User pool eu-west-1_AbCdEf123 does not exist.",
            False,
            f"Cognito refused inviting {EMAIL} (ResourceNotFoundException: User pool {POOL} does not exist.); the "
            f"user pool {POOL} is not in {REGION}: run pulumi up on the stack",
        ),
        (
            "CodeDeliveryFailureException",
            "Unable to deliver the message.",
            False,
            f"Cognito refused inviting {EMAIL} (CodeDeliveryFailureException: Unable to deliver the message.); "
            "Cognito could not mail the invitation; its own sender allows about 50 mails a day per account "
            "(infra/README.md, 'Open it to people'): try tomorrow, or give the pool an SES identity",
        ),
        (
            "TooManyRequestsException",
            "",
            False,
            f"Cognito refused inviting {EMAIL} (TooManyRequestsException); Cognito is throttling the account's "
            "requests: try again in a minute",
        ),
        (
            "InternalErrorException",
            "Internal error.",
            False,
            f"Cognito refused inviting {EMAIL} (InternalErrorException: Internal error.); run the command again; if "
            "it fails the same way, see Cognito's message above",
        ),
    ],
)
def test_a_refusal_is_exit_3_naming_the_code_and_the_fix(
    capsys: pytest.CaptureFixture[str], cognito: Cognito, *, code: str, message: str, resend: bool, expected: str
) -> None:
    request = {**REQUEST, "MessageAction": "RESEND"} if resend else REQUEST
    cognito.stub.add_client_error(
        "admin_create_user", service_error_code=code, service_message=message, http_status_code=400,
        expected_params=request,
    )  # fmt: skip
    args = ["--email", EMAIL, *(["--resend"] if resend else [])]
    exit_code, lines, err = add_user(capsys, cognito, *args)
    assert (exit_code, lines) == (3, [])
    assert err == f"voicestack add-user: {expected}\n"


def test_no_credentials_is_exit_3_with_the_fix(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    client = botocore.session.Session().create_client("cognito-idp", region_name=REGION)
    command = AddUserCommand(read=pulumi_cli(PUBLIC_CONFIG, OUTPUTS), clients=lambda region, profile: lambda _: client)
    assert main(["add-user", "--stack", "dev", "--email", EMAIL], commands=[command]) == 3
    assert capsys.readouterr().err == (
        "voicestack add-user: no AWS credentials found: aws configure, aws sso login, or export AWS_PROFILE=<profile>\n"
    )


# --- the command line and the deployer's permissions -------------------------------------------------


def test_add_user_is_a_command_of_voicestack() -> None:
    parser = build_parser()
    args = parser.parse_args(["add-user", "--stack", "dev", "--email", EMAIL])
    assert (args.command, args.stack, args.email, args.resend) == ("add-user", "dev", EMAIL, False)


def test_the_deployer_policies_allow_the_call_add_user_makes(
    capsys: pytest.CaptureFixture[str], cognito: Cognito
) -> None:
    called: list[str] = []
    cognito.client.meta.events.register(
        "before-parameter-build", lambda model, **_: called.append(f"cognito-idp:{model.name}")
    )
    cognito.stub.add_response("admin_create_user", CREATED, REQUEST)
    assert add_user(capsys, cognito, "--email", EMAIL)[0] == 0
    statements = [
        statement
        for path in (REPO_ROOT / "infra" / "deployer-policy").glob("*.json")
        for statement in json.loads(path.read_text(encoding="utf-8"))["Statement"]
    ]
    assert called == ["cognito-idp:AdminCreateUser"]
    [grant] = [s for s in statements if "cognito-idp:AdminCreateUser" in s["Action"]]
    assert grant["Resource"] == ["arn:aws:cognito-idp:*:*:userpool/*"]


def test_the_makefile_runs_add_user_with_stack_and_email() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert '\t"$(PY)" -m voicestack add-user --stack "$(STACK)" --email "$(EMAIL)"\n' in makefile
    assert "make add-user STACK=dev EMAIL=name@example.com" in makefile


@settings(derandomize=True, max_examples=300)
@given(st.text(st.characters(codec="utf-8"), max_size=80))
def test_any_address_is_one_cognito_takes_or_a_usage_error(raw: str) -> None:
    try:
        address = email_address(raw)
    except UsageError as error:
        message = str(error)
    else:
        request = create_user_request(POOL, address, resend=False)
        shape = SESSION.get_service_model("cognito-idp").operation_model("AdminCreateUser").input_shape
        assert not ParamValidator().validate(request, shape).has_errors()
        assert address == raw.strip()
        return
    assert message == f"--email must be one e-mail address (name@example.com), got {raw!r}"
