"""A DPoP client of another implementation (RFC 9449): keys and proofs from `joserfc`, HTTP
from `httpx2`, MCP from the Python SDK (`mcp` 2.3) with an `httpx2.Auth` that signs a proof
for every request. It signs in with OAuth (the operator approves with the admin token over
REST), gets a DPoP-bound token, calls a tool over MCP, then plays the thief: the token as a
bearer, with a proof of another key, a proof replayed, a proof for another URL or method, and
the refresh token with another key. It follows root's nonce whenever root asks for one.

    python tests/clients/dpop.py ROOT_URL ADMIN_TOKEN TARGET PROFILE

Prints one JSON line: what root answered to each.
"""

import base64
import hashlib
import json
import secrets
import sys
import time
import uuid
from urllib.parse import parse_qs, urlencode, urlparse

import anyio
import httpx2
from joserfc import jws
from joserfc.jwk import ECKey
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REDIRECT = "http://127.0.0.1:47322/callback"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Holder:
    """A P-256 key and the proofs it signs (root's nonce kept once root sends one)."""

    def __init__(self) -> None:
        self.key = ECKey.generate_key("P-256")
        self.nonce: str | None = None

    def public(self) -> dict:
        return self.key.as_dict(private=False)

    def thumbprint(self) -> str:
        return self.key.thumbprint()

    def proof(self, method: str, url: str, token: str | None = None, **over) -> str:
        claims = {
            "jti": str(uuid.uuid4()),
            "htm": method,
            "htu": url.split("?")[0].split("#")[0],
            "iat": int(time.time()),
        }
        if token is not None:
            claims["ath"] = b64(hashlib.sha256(token.encode()).digest())
        if self.nonce is not None:
            claims["nonce"] = self.nonce
        claims.update(over)
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.public()}
        return jws.serialize_compact(header, json.dumps(claims), self.key)

    def heard(self, response) -> bool:
        """Whether root asked for (another) nonce; kept for the next proof."""
        nonce = response.headers.get("dpop-nonce")
        if nonce is None or nonce == self.nonce:
            return False
        self.nonce = nonce
        return True


class DpopAuth(httpx2.Auth):
    """Every request as `Authorization: DPoP` with a fresh proof; once more with root's nonce."""

    def __init__(self, holder: Holder, token: str) -> None:
        self.holder = holder
        self.token = token

    def auth_flow(self, request):
        self.sign(request)
        response = yield request
        if response.status_code == 401 and self.holder.heard(response):
            self.sign(request)
            yield request

    def sign(self, request) -> None:
        request.headers["Authorization"] = f"DPoP {self.token}"
        request.headers["DPoP"] = self.holder.proof(request.method, str(request.url), self.token)


def answer(r) -> dict:
    try:
        body = r.json()
    except Exception:
        body = r.text[:300]
    return {
        "status": r.status_code,
        "www_authenticate": r.headers.get_list("www-authenticate")
        if hasattr(r.headers, "get_list")
        else r.headers.get("www-authenticate"),
        "body": body,
    }


async def token_request(http, base: str, holder: Holder, form: dict):
    """`POST /oauth/token` with a proof, again with root's nonce when it asks for one."""
    for _ in range(2):
        r = await http.post(
            f"{base}/oauth/token",
            content=urlencode(form),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "DPoP": holder.proof("POST", f"{base}/oauth/token"),
            },
        )
        if r.status_code == 400 and r.json().get("error") == "use_dpop_nonce" and holder.heard(r):
            continue
        return r
    return r


async def sign_in(http, base: str, admin: str, target: str, profile: str, holder: Holder):
    reg = await http.post(
        f"{base}/oauth/register",
        json={"client_name": "python-dpop-test", "redirect_uris": [REDIRECT]},
    )
    client_id = reg.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = b64(hashlib.sha256(verifier.encode()).digest())
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "dpop-state",
            "resource": f"{base}/mcp",
            "scope": profile,
        }
    )
    r = await http.get(f"{base}/oauth/authorize?{query}")
    assert r.status_code == 302, (r.status_code, r.text)
    sealed = r.headers["location"].split("authorize=", 1)[1]
    decided = await http.post(
        f"{base}/oauth/authorize/approve",
        json={"request": sealed, "target_id": target, "capability_profile": profile, "ttl_sec": 3600},
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert decided.status_code == 200, decided.text
    code = parse_qs(urlparse(decided.json()["redirect"]).query)["code"][0]
    form = {
        "grant_type": "authorization_code",
        "client_id": client_id,
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        "resource": f"{base}/mcp",
    }
    return client_id, await token_request(http, base, holder, form)


async def mcp_post(http, base: str, headers: dict) -> dict:
    """A `tools/list` over MCP's HTTP with exactly `headers` (a thief's request)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "thief", "version": "1"}}}
    r = await http.post(
        f"{base}/mcp",
        json=body,
        headers={"Accept": "application/json, text/event-stream", **headers},
    )
    return answer(r)


async def main(base: str, admin: str, target: str, profile: str) -> None:
    out: dict = {}
    holder, thief = Holder(), Holder()
    out["thumbprint"] = holder.thumbprint()
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as http:
        client_id, r = await sign_in(http, base, admin, target, profile, holder)
        out["nonce_asked"] = holder.nonce is not None
        out["token"] = answer(r)
        tokens = r.json()
        access = tokens["access_token"]

        # The holder, over MCP with the Python SDK.
        mcp_http = httpx2.AsyncClient(auth=DpopAuth(holder, access), timeout=30)
        async with Client(streamable_http_client(f"{base}/mcp", http_client=mcp_http)) as client:
            result = await client.call_tool("hub.get_status", {})
            out["call"] = result.structured_content

        url = f"{base}/mcp"
        # The thief: the token as a bearer; with a proof of its own key.
        out["as_bearer"] = await mcp_post(http, base, {"Authorization": f"Bearer {access}"})
        thief.nonce = holder.nonce
        out["other_key"] = await mcp_post(
            http, base, {"Authorization": f"DPoP {access}", "DPoP": thief.proof("POST", url, access)}
        )
        # A proof naming the holder's key in its header, signed by the thief's.
        forged = jws.serialize_compact(
            {"typ": "dpop+jwt", "alg": "ES256", "jwk": holder.public()},
            json.dumps({"jti": str(uuid.uuid4()), "htm": "POST", "htu": url, "iat": int(time.time()),
                        "ath": b64(hashlib.sha256(access.encode()).digest()), "nonce": holder.nonce}),
            thief.key,
        )
        out["forged"] = await mcp_post(http, base, {"Authorization": f"DPoP {access}", "DPoP": forged})
        # A proof the holder made, sent again.
        proof = holder.proof("POST", url, access)
        first = await mcp_post(http, base, {"Authorization": f"DPoP {access}", "DPoP": proof})
        out["first_use"] = first["status"]
        out["replayed"] = await mcp_post(http, base, {"Authorization": f"DPoP {access}", "DPoP": proof})
        # A proof for another URL, another method, and without the token's hash.
        out["other_url"] = await mcp_post(
            http, base,
            {"Authorization": f"DPoP {access}", "DPoP": holder.proof("POST", f"{base}/v1/root/mcp/call", access)},
        )
        out["other_method"] = await mcp_post(
            http, base, {"Authorization": f"DPoP {access}", "DPoP": holder.proof("GET", url, access)}
        )
        out["other_token"] = await mcp_post(
            http, base, {"Authorization": f"DPoP {access}", "DPoP": holder.proof("POST", url, "mcpl_other")}
        )
        out["stale"] = await mcp_post(
            http, base,
            {"Authorization": f"DPoP {access}", "DPoP": holder.proof("POST", url, access, iat=int(time.time()) - 3600)},
        )
        # The refresh token: with the thief's key, then the holder's.
        refresh = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": tokens["refresh_token"]}
        out["refresh_other_key"] = answer(await token_request(http, base, thief, refresh))
        r = await token_request(http, base, holder, refresh)
        out["refresh"] = answer(r)
        # The refreshed token works for its holder.
        again = r.json()["access_token"]
        mcp_http = httpx2.AsyncClient(auth=DpopAuth(holder, again), timeout=30)
        async with Client(streamable_http_client(f"{base}/mcp", http_client=mcp_http)) as client:
            result = await client.call_tool("hub.get_status", {})
            out["call_after_refresh"] = result.structured_content
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
