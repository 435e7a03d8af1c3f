"""Sign-in for the public page: a Cognito user pool, the page's app client, the managed login domain.

People are e-mail addresses. Unless `publicSignUp` is on, only the deployer adds them
(`voicestack add-user`: Cognito e-mails a temporary password, changed at the first sign-in). The page
signs in with the authorization code flow and PKCE on Cognito's managed login pages, as a public
client (no secret: a browser cannot keep one); the tokens it gets are what the public AgentCore
runtime accepts (infra/agent.py): the access token, whose `client_id` claim names this client.

The pool holds the accounts: a stack that retains storage keeps it on `pulumi destroy` (deletion
protection on, `retain_on_delete`); otherwise it goes with the stack. The client, the domain and the
login pages' style are configuration, recreated identically, so they always go: a kept domain would
hold its prefix (unique in the region) and make the next `pulumi up` of the same stack fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pulumi
import pulumi_aws as aws

from infra.config import SignInMfa

USERNAME_ATTRIBUTE: Final = "email"
OAUTH_FLOWS: Final = ("code",)
"""Authorization code only: the implicit flow puts tokens in the URL."""
OAUTH_SCOPES: Final = ("openid", "email")
"""What the page asks for (config.json's `scope`): who the user is, nothing to call Cognito's own APIs with."""
EXPLICIT_AUTH_FLOWS: Final = ("ALLOW_USER_SRP_AUTH",)
"""Password sign-in without the password leaving the browser. Not ALLOW_REFRESH_TOKEN_AUTH: refresh token
rotation is incompatible with it (Cognito developer guide, "Refresh tokens"); the page refreshes at the token
endpoint, which rotates."""
MFA_CONFIGURATION: Final[dict[SignInMfa, str]] = {"off": "OFF", "optional": "OPTIONAL", "required": "ON"}
"""signInMfa -> the pool's MfaConfiguration. The second factor is an authenticator app (TOTP): SMS needs an
SNS role and an origination number, e-mail codes need a developer SES identity."""
USER_POOL_TIER: Final = "ESSENTIALS"
"""Managed login (the pages with a branding style) and refresh token rotation need Essentials or Plus; Essentials
is the default for new pools, stated so that a change of default cannot take them away."""
MANAGED_LOGIN_VERSION: Final = 2
"""The managed login pages (version 1 is the classic hosted UI)."""


@dataclass(frozen=True)
class PasswordPolicy:
    """Twelve characters of four kinds (Cognito's own maximum is 99): long enough that an online guess, which
    Cognito throttles, has no chance; temporary passwords from add-user last a week."""

    minimum_length: int = 12
    require_lowercase: bool = True
    require_uppercase: bool = True
    require_numbers: bool = True
    require_symbols: bool = True
    temporary_password_validity_days: int = 7


PASSWORD_POLICY: Final = PasswordPolicy()


@dataclass(frozen=True)
class TokenValidity:
    """How long the page's tokens live, in the units below.

    Access and ID tokens: 15 minutes, so a token that leaks from a page is good for a quarter of an hour;
    the page renews them silently with the refresh token. The refresh token: 12 hours, a working day. With
    rotation each renewal returns a new refresh token but keeps the first one's expiry, so a person signs
    in again after 12 hours whatever they did meanwhile (oidc-client-ts#2039 reports the same).
    """

    access: int = 15
    access_unit: str = "minutes"
    id: int = 15
    id_unit: str = "minutes"
    refresh: int = 12
    refresh_unit: str = "hours"
    auth_session_minutes: int = 3
    """How long a half-finished sign-in (password given, MFA code awaited) stays valid: Cognito's default."""
    rotation_grace_s: int = 10
    """The old refresh token stays valid this long after a renewal, so a renewal lost on the network can be
    retried (0..60); longer would leave a stolen token usable beside the new one."""


TOKEN_VALIDITY: Final = TokenValidity()


def issuer_url(region: str, user_pool_id: str) -> str:
    """The pool's OpenID issuer (the tokens' `iss`); discovery and JWKS hang below it."""
    return f"https://cognito-idp.{region}.amazonaws.com/{user_pool_id}"


def discovery_url(issuer: str) -> str:
    """The OpenID Connect discovery document of an issuer."""
    return f"{issuer}/.well-known/openid-configuration"


def jwks_url(issuer: str) -> str:
    """Where a Cognito issuer publishes its signing keys."""
    return f"{issuer}/.well-known/jwks.json"


def sign_in_domain_url(prefix: str, region: str) -> str:
    """The managed login domain of a prefix: authorize, token, logout and the sign-in pages."""
    return f"https://{prefix}.auth.{region}.amazoncognito.com"


def invite_message(page_url: str) -> tuple[str, str]:
    """Subject and body of the mail add-user makes Cognito send; Cognito fills {username} and {####}."""
    subject = "Your voice agent account"
    body = (
        f"You can now talk to the voice agent at {page_url}<br><br>"
        "Sign in with {username} and the temporary password {####} (valid for "
        f"{PASSWORD_POLICY.temporary_password_validity_days} days); you will choose your own password then."
    )
    return subject, body


@dataclass(frozen=True)
class SignInArgs:
    """The page the client sends people back to, the login domain's prefix, who may sign up, MFA, retention."""

    client_name: str
    page_url: pulumi.Input[str]
    domain_prefix: pulumi.Input[str]
    region: pulumi.Input[str]
    sign_up: bool
    mfa: SignInMfa
    retain: bool


class SignIn(pulumi.ComponentResource):
    """User pool, the page's app client, the managed login domain and its default style."""

    user_pool: aws.cognito.UserPool
    client: aws.cognito.UserPoolClient
    domain: aws.cognito.UserPoolDomain
    branding: aws.cognito.ManagedLoginBranding
    user_pool_id: pulumi.Output[str]
    client_id: pulumi.Output[str]
    issuer: pulumi.Output[str]
    domain_url: pulumi.Output[str]

    def __init__(self, name: str, args: SignInArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:SignIn", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invitation = pulumi.Output.from_input(args.page_url).apply(invite_message)
        password = PASSWORD_POLICY

        self.user_pool = aws.cognito.UserPool(
            f"{name}-users",
            username_attributes=[USERNAME_ATTRIBUTE],
            auto_verified_attributes=[USERNAME_ATTRIBUTE],
            # Alice@Example.com and alice@example.com are one person.
            username_configuration={"case_sensitive": False},
            password_policy={
                "minimum_length": password.minimum_length,
                "require_lowercase": password.require_lowercase,
                "require_uppercase": password.require_uppercase,
                "require_numbers": password.require_numbers,
                "require_symbols": password.require_symbols,
                "temporary_password_validity_days": password.temporary_password_validity_days,
            },
            mfa_configuration=MFA_CONFIGURATION[args.mfa],
            software_token_mfa_configuration=None if args.mfa == "off" else {"enabled": True},
            admin_create_user_config={
                "allow_admin_create_user_only": not args.sign_up,
                "invite_message_template": {
                    "email_subject": invitation.apply(lambda parts: parts[0]),
                    "email_message": invitation.apply(lambda parts: parts[1]),
                },
            },
            account_recovery_setting={"recovery_mechanisms": [{"name": "verified_email", "priority": 1}]},
            user_pool_tier=USER_POOL_TIER,
            deletion_protection="ACTIVE" if args.retain else "INACTIVE",
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.retain),
        )
        validity = TOKEN_VALIDITY
        self.client = aws.cognito.UserPoolClient(
            f"{name}-page-client",
            name=args.client_name,
            user_pool_id=self.user_pool.id,
            generate_secret=False,
            allowed_oauth_flows_user_pool_client=True,
            allowed_oauth_flows=list(OAUTH_FLOWS),
            allowed_oauth_scopes=list(OAUTH_SCOPES),
            supported_identity_providers=["COGNITO"],
            callback_urls=[args.page_url],
            logout_urls=[args.page_url],
            default_redirect_uri=args.page_url,
            explicit_auth_flows=list(EXPLICIT_AUTH_FLOWS),
            # Sign-in and password reset answer alike whether or not the address has an account.
            prevent_user_existence_errors="ENABLED",
            enable_token_revocation=True,
            access_token_validity=validity.access,
            id_token_validity=validity.id,
            refresh_token_validity=validity.refresh,
            token_validity_units={
                "access_token": validity.access_unit,
                "id_token": validity.id_unit,
                "refresh_token": validity.refresh_unit,
            },
            auth_session_validity=validity.auth_session_minutes,
            refresh_token_rotation={"feature": "ENABLED", "retry_grace_period_seconds": validity.rotation_grace_s},
            read_attributes=[USERNAME_ATTRIBUTE, "email_verified"],
            # Self sign-up writes the address; nobody can change it later (no aws.cognito.signin.user.admin scope).
            write_attributes=[USERNAME_ATTRIBUTE],
            opts=child,
        )
        # A pool has one prefix domain: a new prefix must replace the old one, not stand beside it.
        self.domain = aws.cognito.UserPoolDomain(
            f"{name}-domain",
            domain=args.domain_prefix,
            user_pool_id=self.user_pool.id,
            managed_login_version=MANAGED_LOGIN_VERSION,
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        # Managed login serves a client's pages only once the client has a style: Cognito's own.
        self.branding = aws.cognito.ManagedLoginBranding(
            f"{name}-branding",
            user_pool_id=self.user_pool.id,
            client_id=self.client.id,
            use_cognito_provided_values=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.domain]),
        )
        self.user_pool_id = self.user_pool.id
        self.client_id = self.client.id
        self.issuer = pulumi.Output.all(args.region, self.user_pool.id).apply(
            lambda values: issuer_url(values[0], values[1])
        )
        self.domain_url = pulumi.Output.all(self.domain.domain, args.region).apply(
            lambda values: sign_in_domain_url(values[0], values[1])
        )
        self.register_outputs({"user_pool_id": self.user_pool_id, "client_id": self.client_id})
