// A real OpenID provider on loopback for the operators' sign-in tests: the certified
// `oidc-provider` package (installed by .ci/run into <target>/npm), with two users in
// different groups and a control route the tests use to remove a user.
//
//   node oidc-provider.mjs NPM_PREFIX PORT
//
// Prints `ready <issuer>` once it listens. Users: `alice` (groups `sre`), `bob` (groups
// `auditors`), `carol` (no group). `POST /test/remove?user=NAME` removes a user: the provider
// refuses that user's refresh tokens from then on (as a provider does for a disabled person).
// `POST /test/tamper?claim=aud|iss|exp|nonce|no_nonce|replay|key` makes the next token
// response's ID token a bad one, signed again (with the provider's own key, but for `key`):
// for another audience, from another issuer, expired, with another nonce or none, the
// previous sign-in's token, or signed by a key the provider does not publish. As a broken or hostile provider would.
// The login and consent pages are the package's development interactions (any password).

const [npm, portArg] = process.argv.slice(2);
const { default: Provider } = await import(`${npm}/node_modules/oidc-provider/lib/index.js`);
const jose = await import(`${npm}/node_modules/jose/dist/webapi/index.js`);

// The provider's signing key (published at its JWKS), and one it never publishes.
const KID = 'tests-rs256';
const signing = await jose.generateKeyPair('RS256', { extractable: true });
const unpublished = await jose.generateKeyPair('RS256', { extractable: true });
const signingJwk = { ...(await jose.exportJWK(signing.privateKey)), kid: KID, alg: 'RS256', use: 'sig' };

const port = Number(portArg || 0);
const issuer = `http://127.0.0.1:${port}`;

const users = new Map([
  ['alice', { email: 'alice@example.test', groups: ['sre'] }],
  ['bob', { email: 'bob@example.test', groups: ['auditors'] }],
  ['carol', { email: 'carol@example.test', groups: [] }],
]);

const provider = new Provider(issuer, {
  jwks: { keys: [signingJwk] },
  clients: [
    {
      client_id: 'mcp-root',
      client_secret: 'mcp-root-test-secret',
      // A native client: loopback redirects match whatever port root listens on.
      application_type: 'native',
      redirect_uris: ['http://127.0.0.1/ui/oidc/callback'],
      grant_types: [
        'authorization_code',
        'refresh_token',
        'urn:ietf:params:oauth:grant-type:device_code',
      ],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      // Another client of the same provider: its ID tokens are for another audience.
      client_id: 'other-app',
      client_secret: 'other-app-test-secret',
      application_type: 'native',
      redirect_uris: ['http://127.0.0.1/cb'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
  ],
  async findAccount(_ctx, sub) {
    const user = users.get(sub);
    if (!user) {
      return undefined;
    }
    return {
      accountId: sub,
      async claims() {
        return { sub, email: user.email, email_verified: true, groups: user.groups };
      },
    };
  },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  scopes: ['openid', 'offline_access', 'email', 'groups'],
  features: {
    devInteractions: { enabled: true },
    deviceFlow: { enabled: true },
  },
  pkce: { required: () => true },
  // Refresh tokens for every sign-in: root checks each person against the provider with it.
  async issueRefreshToken(_ctx, client) {
    return client.grantTypeAllowed('refresh_token');
  },
  ttl: {
    AccessToken: 300,
    IdToken: 300,
    RefreshToken: 86400,
    DeviceCode: 600,
  },
  cookies: { keys: ['mcp-root-tests-only'] },
});

// The next token response's ID token made bad (`/test/tamper`), and the last good one.
let tamper = null;
let previous = null;

async function tampered(idToken, how) {
  const claims = jose.decodeJwt(idToken);
  const now = Math.floor(Date.now() / 1000);
  let key = signing.privateKey;
  switch (how) {
    case 'aud': claims.aud = 'other-app'; break;
    case 'iss': claims.iss = 'http://127.0.0.1:9'; break;
    case 'exp': claims.iat = now - 1200; claims.exp = now - 600; break;
    case 'nonce': claims.nonce = 'not-the-nonce-root-sent'; break;
    case 'no_nonce': delete claims.nonce; break;
    case 'replay': return previous;
    case 'key': key = unpublished.privateKey; break;
    default: return idToken;
  }
  return new jose.SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: KID }).sign(key);
}

provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/test/remove') {
    const name = ctx.query.user;
    ctx.body = { removed: users.delete(name) };
    return;
  }
  if (ctx.method === 'POST' && ctx.path === '/test/tamper') {
    tamper = ctx.query.claim;
    ctx.body = { tamper };
    return;
  }
  await next();
  if (ctx.path === '/token' && ctx.body && typeof ctx.body.id_token === 'string') {
    const genuine = ctx.body.id_token;
    if (tamper) {
      const how = tamper;
      tamper = null;
      ctx.body = { ...ctx.body, id_token: await tampered(genuine, how) };
    }
    previous = genuine;
  }
});

const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
