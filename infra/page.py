"""The page, hosted: the files of local/web in a private S3 bucket, served by CloudFront, and its config.json.

Only the distribution reads the bucket: origin access control signs CloudFront's requests, and the
bucket policy allows `s3:GetObject` to the CloudFront service for this one distribution
(`AWS:SourceArn`), besides refusing every request not made over TLS. Viewers get HTTPS only
(`redirect-to-https`) and a response headers policy: a content security policy that lets the page
talk to itself, to Cognito (the pool's issuer and the managed login domain) and to the AgentCore
endpoint of the region, and nothing else; HSTS, nosniff, no framing, no referrer.

Every browser file of local/web is uploaded at deploy time (`page_files`: globbed, typed by extension;
package manifests, node_modules and other files not for the browser are left out), and the stack's
own `config.json` (`page_config`, the page's contract with the stack) is written next to them.
index.html and config.json are revalidated on every load, the rest is cached for a few minutes.

The bucket holds nothing but what `pulumi up` uploads, so it always goes with the stack, retained
storage or not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from infra.storage import deny_insecure_transport, make_private
from infra.weights import file_sha256

CONFIG_FILE: Final = "config.json"
INDEX_FILE: Final = "index.html"
AGENT_QUALIFIER: Final = "DEFAULT"
"""The runtime endpoint the page invokes (every runtime has it)."""

CONTENT_TYPES: Final[Mapping[str, str]] = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".webmanifest": "application/manifest+json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".ico": "image/x-icon",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".wasm": "application/wasm",
    ".wav": "audio/wav",
    ".txt": "text/plain; charset=utf-8",
}
"""The browser's files, by extension. Served with the wrong type, a module script or the audio worklet does not
load (nosniff), so every uploaded file must have one of these."""
TEXT_NAMES: Final = frozenset({"LICENSE", "NOTICE"})
"""Extension-less files a vendored library ships and may be served as text."""
NOT_FOR_THE_BROWSER: Final = frozenset({"package.json", "package-lock.json", "node_modules", "README.md"})
"""Names left out wherever they appear (a directory's whole tree), like dot files: the page's build manifests and
dependencies. A config.json at the top is left out too: the stack's own replaces it."""
NOT_FOR_THE_BROWSER_SUFFIXES: Final = (".md", ".test.js", ".spec.js", ".ts")

REVALIDATE: Final = "no-cache"
"""index.html and config.json: the browser asks every time (a 304 when unchanged), so a new deploy is seen at the
next load; CloudFront's own copy is kept for the cache policy's minimum TTL, 1 s."""
ASSET_MAX_AGE_S: Final = 300
"""The page's modules, styles and worklet: names without a content hash, so a long lifetime would pair a new
index.html with old modules; five minutes keeps a session's reloads local and a deploy visible soon after."""
ASSET_CACHE: Final = f"public, max-age={ASSET_MAX_AGE_S}"
CACHING_OPTIMIZED_POLICY_ID: Final = "658327ea-f89d-4fab-a63d-7e88639e58f6"
"""CloudFront's managed cache policy CachingOptimized (CloudFront developer guide, "Use managed cache policies"):
it honours the objects' Cache-Control within 1 s .. 1 year and compresses."""
HSTS_MAX_AGE_S: Final = 63_072_000
"""Two years, the HSTS preload list's recommendation (the page is not submitted to it: the domain is CloudFront's)."""
CSP_MAX_CHARACTERS: Final = 1783
"""CloudFront's quota on a response headers policy's Content-Security-Policy value."""
PRICE_CLASS: Final = "PriceClass_100"
"""Edges in North America and Europe: the page is a few small files and the agent answers from one region anyway;
a wider class costs more per request without making the voice faster."""


class PageSourceError(ValueError):
    """A file under the page's directory that the hosted page cannot serve (the message names it)."""


@dataclass(frozen=True)
class PageFile:
    """One browser file: its path under the page's directory (also its key), type and caching."""

    relative: str
    content_type: str
    cache_control: str


def _excluded(relative: PurePosixPath) -> bool:
    if str(relative) == CONFIG_FILE:
        return True
    if any(part in NOT_FOR_THE_BROWSER or part.startswith(".") for part in relative.parts):
        return True
    return relative.name.endswith(NOT_FOR_THE_BROWSER_SUFFIXES)


def page_file(relative: str) -> PageFile:
    """The type and caching of one browser file; `PageSourceError` for a file no browser type fits."""
    path = PurePosixPath(relative)
    content_type = CONTENT_TYPES.get(path.suffix.lower())
    if content_type is None and path.name in TEXT_NAMES:
        content_type = CONTENT_TYPES[".txt"]
    if content_type is None:
        raise PageSourceError(
            f"{relative}: no browser content type for {path.suffix or 'a file without extension'!r}; give it one "
            "in infra/page.py CONTENT_TYPES, or leave it out (NOT_FOR_THE_BROWSER)"
        )
    cache = REVALIDATE if relative == INDEX_FILE else ASSET_CACHE
    return PageFile(relative, content_type, cache)


def page_files(directory: Path) -> tuple[PageFile, ...]:
    """Every browser file under `directory`, sorted by path; `PageSourceError` if the page cannot be served."""
    if not (directory / INDEX_FILE).is_file():
        raise PageSourceError(f"{directory} has no {INDEX_FILE}: the hosted page's root object")
    files = []
    for path in sorted(directory.rglob("*")):
        relative = PurePosixPath(path.relative_to(directory).as_posix())
        if _excluded(relative) or not path.is_file():
            continue
        files.append(page_file(str(relative)))
    return tuple(files)


def page_url(domain_name: str) -> str:
    """The page's address: the distribution's root, which serves index.html."""
    return f"https://{domain_name}/"


def agentcore_host(region: str) -> str:
    """The AgentCore data plane of a region: InvokeAgentRuntime (https) and the runtime's WebSocket (wss)."""
    return f"bedrock-agentcore.{region}.amazonaws.com"


def content_security_policy(*, region: str, sign_in_domain: str) -> str:
    """The page may load only its own files and talk only to Cognito and AgentCore in `region`.

    connect-src: config.json ('self'), the pool's discovery document (cognito-idp), the token, user info and
    revocation endpoints of the managed login domain, and AgentCore over https (SSE) and wss (WebSocket).
    Sign-in and sign-out are top-level navigations, which CSP does not restrict. `data:` images: the page's
    empty favicon. No inline script or style, no eval, no framing, no plugins, no <base>.
    """
    agentcore = agentcore_host(region)
    directives = (
        ("default-src", ("'none'",)),
        ("script-src", ("'self'",)),
        ("style-src", ("'self'",)),
        ("img-src", ("'self'", "data:")),
        ("font-src", ("'self'",)),
        ("manifest-src", ("'self'",)),
        (
            "connect-src",
            (
                "'self'",
                f"https://cognito-idp.{region}.amazonaws.com",
                sign_in_domain,
                f"https://{agentcore}",
                f"wss://{agentcore}",
            ),
        ),
        ("base-uri", ("'none'",)),
        ("form-action", ("'self'",)),
        ("frame-ancestors", ("'none'",)),
        ("object-src", ("'none'",)),
    )
    policy = "; ".join(f"{name} {' '.join(sources)}" for name, sources in directives)
    if len(policy) > CSP_MAX_CHARACTERS:
        raise ValueError(
            f"the content security policy is {len(policy)} characters, CloudFront takes {CSP_MAX_CHARACTERS}"
        )
    return policy


CLOUDFRONT_PRINCIPAL: Final = "cloudfront.amazonaws.com"


def page_bucket_policy(bucket_arn: str, distribution_arn: str) -> dict[str, Any]:
    """TLS only, and read access for one CloudFront distribution through origin access control.

    `AWS:SourceArn` is the confused-deputy guard: without it, any distribution of any account that knows
    the bucket's name could read it through its own origin access control.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            deny_insecure_transport(bucket_arn),
            {
                "Sid": "CloudFrontReadsThePage",
                "Effect": "Allow",
                "Principal": {"Service": CLOUDFRONT_PRINCIPAL},
                "Action": "s3:GetObject",
                "Resource": f"{bucket_arn}/*",
                "Condition": {"StringEquals": {"AWS:SourceArn": distribution_arn}},
            },
        ],
    }


def page_config(
    *,
    stack: str,
    region: str,
    runtime_arn: str,
    issuer: str,
    client_id: str,
    page_url: str,
    sign_in_domain: str,
    scopes: Sequence[str],
) -> dict[str, Any]:
    """The page's config.json: where its agent is and how its people sign in (infra/README.md, "The page
    contract"). `authority` is the OIDC issuer (discovery below it); `signInDomain` is the managed login
    domain, for the logout endpoint, which Cognito's discovery document does not list."""
    return {
        "stack": stack,
        "region": region,
        "runtimeArn": runtime_arn,
        "qualifier": AGENT_QUALIFIER,
        "auth": {
            "kind": "oidc",
            "authority": issuer,
            "clientId": client_id,
            "redirectUri": page_url,
            "postLogoutRedirectUri": page_url,
            "scope": " ".join(scopes),
            "signInDomain": sign_in_domain,
        },
    }


def config_json(config: Mapping[str, Any]) -> str:
    """config.json's text: stable key order, one trailing newline."""
    return json.dumps(config, indent=2) + "\n"


@dataclass(frozen=True)
class PageSiteArgs:
    """Names the API requires (unique in the account), and the content security policy."""

    access_control_name: str
    headers_policy_name: str
    description: str
    content_security_policy: pulumi.Input[str]


class PageSite(pulumi.ComponentResource):
    """A private bucket that only one CloudFront distribution reads, and that distribution."""

    bucket: aws.s3.Bucket
    access_control: aws.cloudfront.OriginAccessControl
    headers_policy: aws.cloudfront.ResponseHeadersPolicy
    distribution: aws.cloudfront.Distribution
    url: pulumi.Output[str]

    def __init__(self, name: str, args: PageSiteArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:PageSite", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.bucket = aws.s3.Bucket(f"{name}-bucket", force_destroy=True, opts=child)
        make_private(f"{name}-bucket", self.bucket, child)
        # ACLs off: the bucket owns every object, and only the policy below decides who reads.
        aws.s3.BucketOwnershipControls(
            f"{name}-bucket-ownership",
            bucket=self.bucket.id,
            rule={"object_ownership": "BucketOwnerEnforced"},
            opts=child,
        )
        self.access_control = aws.cloudfront.OriginAccessControl(
            f"{name}-access",
            name=args.access_control_name,
            description=args.description,
            origin_access_control_origin_type="s3",
            signing_behavior="always",
            signing_protocol="sigv4",
            opts=child,
        )
        self.headers_policy = aws.cloudfront.ResponseHeadersPolicy(
            f"{name}-headers",
            name=args.headers_policy_name,
            comment=args.description,
            security_headers_config={
                "content_security_policy": {
                    "content_security_policy": args.content_security_policy,
                    "override": True,
                },
                "strict_transport_security": {
                    "access_control_max_age_sec": HSTS_MAX_AGE_S,
                    "include_subdomains": True,
                    "preload": False,
                    "override": True,
                },
                "content_type_options": {"override": True},
                "frame_options": {"frame_option": "DENY", "override": True},
                "referrer_policy": {"referrer_policy": "no-referrer", "override": True},
            },
            opts=child,
        )
        origin_id = "page-bucket"
        self.distribution = aws.cloudfront.Distribution(
            f"{name}-distribution",
            enabled=True,
            comment=args.description,
            default_root_object=INDEX_FILE,
            origins=[
                {
                    "origin_id": origin_id,
                    "domain_name": self.bucket.bucket_regional_domain_name,
                    "origin_access_control_id": self.access_control.id,
                }
            ],
            default_cache_behavior={
                "target_origin_id": origin_id,
                "viewer_protocol_policy": "redirect-to-https",
                "allowed_methods": ["GET", "HEAD"],
                "cached_methods": ["GET", "HEAD"],
                "cache_policy_id": CACHING_OPTIMIZED_POLICY_ID,
                "response_headers_policy_id": self.headers_policy.id,
                "compress": True,
            },
            price_class=PRICE_CLASS,
            http_version="http2and3",
            is_ipv6_enabled=True,
            restrictions={"geo_restriction": {"restriction_type": "none"}},
            # The default *.cloudfront.net certificate (a custom domain would bring its own ACM certificate).
            viewer_certificate={"cloudfront_default_certificate": True},
            # `pulumi up` returns once the edges serve the page, so pageUrl works when it prints.
            wait_for_deployment=True,
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-bucket-policy",
            bucket=self.bucket.id,
            policy=pulumi.Output.all(self.bucket.arn, self.distribution.arn).apply(
                lambda values: json.dumps(page_bucket_policy(values[0], values[1]))
            ),
            opts=child,
        )
        self.url = self.distribution.domain_name.apply(page_url)
        self.register_outputs({"url": self.url, "bucket_name": self.bucket.bucket})


@dataclass(frozen=True)
class PageFilesArgs:
    """Upload `files` from `source_dir`, and `config` as config.json, into `bucket`."""

    bucket: pulumi.Input[str]
    source_dir: Path
    files: tuple[PageFile, ...]
    config: pulumi.Input[str]


class PageFiles(pulumi.ComponentResource):
    """One S3 object per browser file, each updated when its bytes change, and the stack's config.json."""

    objects: tuple[aws.s3.BucketObjectv2, ...]
    config: aws.s3.BucketObjectv2

    def __init__(self, name: str, args: PageFilesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:PageFiles", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.objects = tuple(
            aws.s3.BucketObjectv2(
                f"{name}-{file.relative.replace('/', '-')}",
                bucket=args.bucket,
                key=file.relative,
                source=pulumi.FileAsset(args.source_dir / file.relative),
                source_hash=file_sha256(args.source_dir / file.relative),
                content_type=file.content_type,
                cache_control=file.cache_control,
                opts=child,
            )
            for file in args.files
        )
        self.config = aws.s3.BucketObjectv2(
            f"{name}-{CONFIG_FILE}",
            bucket=args.bucket,
            key=CONFIG_FILE,
            content=args.config,
            content_type=CONTENT_TYPES[".json"],
            cache_control=REVALIDATE,
            opts=child,
        )
        self.register_outputs({"config_key": self.config.key})
