#!/usr/bin/env bash
# Per-call authentication, in one window: the same requests with a pasted lease bearer and
# with a token an OAuth sign-in issued (root with [oauth] discovery on; the test plays the
# client, the browser and the admin approving). Stateless 2026-07-28 requests (`mcp-load
# --lifecycle wire`), so every request is authenticated on its own: `server/discover` (the
# bearer and the front door only) and a routed `hub.get_status` (audited). Rounds alternate;
# prints each line and the medians. COUNT stays small enough that the hub's replay cache (65,536 call
# ids, each kept 60 s past its deadline) does not fill.
#   bash tests/bench/auth.sh [COUNT] [ROUNDS]
count=${1:-5000}
rounds=${2:-3}
config=$(mktemp)
printf '[oauth]\ndiscovery = true\n' >"$config"
export MCP_BENCH_ROOT_CONFIG=$config
source "$(dirname "$0")/setup.sh"
start_hub hub:bench "$(printf '[skill]\nadapter_concurrency = 32\n')"
wait_online 1
pasted=$(leases hub:bench InfraOpsRead 1)
# The OAuth sign-in, by hand: register, authorize, approve (admin), exchange with PKCE.
redirect=http://127.0.0.1:9/cb
client=$(curl -fsS "$base/oauth/register" -H 'content-type: application/json' \
  -d "{\"client_name\":\"bench\",\"redirect_uris\":[\"$redirect\"]}" | json client_id)
verifier=$(python3 -c 'import secrets; print(secrets.token_urlsafe(48))')
challenge=$(python3 -c "import base64,hashlib,sys; print(base64.urlsafe_b64encode(hashlib.sha256(sys.argv[1].encode()).digest()).decode().rstrip('='))" "$verifier")
location=$(curl -fsS -o /dev/null -w '%{redirect_url}' -G "$base/oauth/authorize" \
  --data-urlencode response_type=code --data-urlencode "client_id=$client" \
  --data-urlencode "redirect_uri=$redirect" --data-urlencode "code_challenge=$challenge" \
  --data-urlencode code_challenge_method=S256)
sealed=${location#*authorize=}
redirected=$(curl -fsS "$base/oauth/authorize/approve" -H 'content-type: application/json' \
  -H "authorization: Bearer $(cat "$work/root/admin.token")" \
  -d "{\"request\":\"$sealed\",\"target_id\":\"hub:bench\",\"capability_profile\":\"InfraOpsRead\",\"ttl_sec\":3600}" | json redirect)
code=$(python3 -c "import sys,urllib.parse as u; print(u.parse_qs(u.urlparse(sys.argv[1]).query)['code'][0])" "$redirected")
oauth=$(curl -fsS "$base/oauth/token" --data-urlencode grant_type=authorization_code \
  --data-urlencode "client_id=$client" --data-urlencode "code=$code" \
  --data-urlencode "redirect_uri=$redirect" --data-urlencode "code_verifier=$verifier" | json access_token)
rate() { sed -n 's/.* calls\/s=\([0-9]*\) .*/\1/p' <<<"$1"; }
declare -A rates
for r in $(seq "$rounds"); do
  for tool in discover hub.get_status; do
    for kind in pasted oauth; do
      token=$pasted
      [ "$kind" = oauth ] && token=$oauth
      line=$("$bin/mcp-load" --url "$base/mcp" --token "$token" --tool "$tool" \
        --lifecycle wire --count "$count" --concurrency 4)
      echo "round $r $tool $kind: $line"
      rates[$tool.$kind]="${rates[$tool.$kind]:-} $(rate "$line")"
    done
  done
done
median() { printf '%s\n' $@ | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for tool in discover hub.get_status; do
  echo "median calls/s $tool: pasted lease $(median ${rates[$tool.pasted]}), OAuth token $(median ${rates[$tool.oauth]})"
done
rm -f "$config"
