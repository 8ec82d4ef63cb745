// A real OpenID provider on loopback for the operators' sign-in tests: the certified
// `oidc-provider` package (installed by .ci/run into <target>/npm), with two users in
// different groups and a control route the tests use to remove a user.
//
//   node oidc-provider.mjs NPM_PREFIX PORT
//
// Prints `ready <issuer>` once it listens. Users: `alice` (groups `sre`), `bob` (groups
// `auditors`), `carol` (no group). `POST /test/remove?user=NAME` removes a user: the provider
// refuses that user's refresh tokens from then on (as a provider does for a disabled person).
// The login and consent pages are the package's development interactions (any password).

const [npm, portArg] = process.argv.slice(2);
const { default: Provider } = await import(`${npm}/node_modules/oidc-provider/lib/index.js`);

const port = Number(portArg || 0);
const issuer = `http://127.0.0.1:${port}`;

const users = new Map([
  ['alice', { email: 'alice@example.test', groups: ['sre'] }],
  ['bob', { email: 'bob@example.test', groups: ['auditors'] }],
  ['carol', { email: 'carol@example.test', groups: [] }],
]);

const provider = new Provider(issuer, {
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

provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/test/remove') {
    const name = ctx.query.user;
    ctx.body = { removed: users.delete(name) };
    return;
  }
  await next();
});

const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
