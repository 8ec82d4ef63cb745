"""An MCP client from another implementation signs in with OAuth: the Python SDK (`mcp` 2.3)
with its `OAuthClientProvider` finds root's metadata from the 401, registers itself, sends
"the browser" to root's authorization endpoint, exchanges the code, calls a tool with the
token, refreshes it and calls again. This script also plays the browser and the operator:
it follows the authorization redirect to the console, signs in there with the operator's
credential and approves the request in the MCP Server dialog's endpoints.

    python tests/clients/oauth.py MCP_URL OPERATOR_TOKEN TARGET PROFILE [CERT KEY]

With CERT and KEY the client does not register: it serves its client ID metadata document
over HTTPS (that certificate) on 127.0.0.1 and signs in with that URL as its client_id.

Prints one JSON line: the registered client, the tokens the SDK held (first and after the
refresh), the tool's structured results and what the operator's dialog was shown.
"""

import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


REDIRECT = "http://127.0.0.1:47321/callback"


def serve_metadata_document(cert: str, key: str) -> str:
    """Serves this client's metadata document over HTTPS; returns its URL (the client_id)."""
    document: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(document).encode()
            self.send_response(200 if self.path == "/client.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    url = f"https://127.0.0.1:{server.server_address[1]}/client.json"
    document.update(
        {
            "client_id": url,
            "client_name": "python-sdk-cimd-test",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return url


async def main(url: str, operator_token: str, target: str, profile: str, *cimd: str) -> None:
    metadata_url = serve_metadata_document(*cimd) if cimd else None
    base = f"{urlparse(url).scheme}://{urlparse(url).netloc}"
    parse: dict = {}
    shown: dict = {}

    async def browser_and_operator(authorization_url: str) -> None:
        """What a person does: the browser opens the URL, the operator approves."""
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
            r = await browser.get(authorization_url)
            assert r.status_code == 302, (r.status_code, r.text)
            location = r.headers["location"]
            assert location.startswith("/ui/#/sessions?authorize="), location
            sealed = location.split("authorize=", 1)[1]
            page = {"Origin": base}
            login = await browser.post(
                f"{base}/ui/api/login", json={"token": operator_token}, headers=page
            )
            assert login.status_code == 200, login.text
            page["X-MCP-Console-CSRF"] = login.json()["csrf_token"]
            asked = await browser.post(
                f"{base}/oauth/authorize/request", json={"request": sealed}, headers=page
            )
            assert asked.status_code == 200, asked.text
            shown.update(asked.json())
            decided = await browser.post(
                f"{base}/oauth/authorize/approve",
                json={
                    "request": sealed,
                    "target_id": target,
                    "capability_profile": profile,
                    "ttl_sec": 3600,
                },
                headers=page,
            )
            assert decided.status_code == 200, decided.text
            back = urlparse(decided.json()["redirect"])
            parse.update({k: v[0] for k, v in parse_qs(back.query).items()})
            parse["redirect"] = f"{back.scheme}://{back.netloc}{back.path}"

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=parse["code"], state=parse.get("state"), iss=parse.get("iss"))

    storage = Memory()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="python-sdk-oauth-test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=profile,
        ),
        storage=storage,
        redirect_handler=browser_and_operator,
        callback_handler=callback,
        client_metadata_url=metadata_url,
    )
    results = []
    http = httpx2.AsyncClient(auth=provider, timeout=30)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool("hub.get_status", {})
        results.append(result.structured_content)
    first = storage.tokens
    # The access token's lifetime is an hour; the SDK refreshes a token it holds as expired
    # before its next request, so the test says it expired.
    provider.context.token_expiry_time = time.time() - 1
    http = httpx2.AsyncClient(auth=provider, timeout=30)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool("hub.get_status", {})
        results.append(result.structured_content)
    second = storage.tokens
    print(
        json.dumps(
            {
                "client_id": storage.client.client_id,
                "token_endpoint_auth_method": storage.client.token_endpoint_auth_method,
                "shown": shown,
                "redirected_to": parse.get("redirect"),
                "iss": parse.get("iss"),
                "first": first.model_dump(mode="json"),
                "second": second.model_dump(mode="json"),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:7])
