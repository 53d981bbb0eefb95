#!/bin/sh
# Run a command with the BuildKit secret `ca` (a CA bundle for TLS-intercepting proxies) as the trust store for
# pip, git, curl and Python, when the secret was given. The bundle lives only in the secret mount, never a layer.
set -eu
ca=/run/secrets/ca
if [ -s "$ca" ]; then
  export PIP_CERT="$ca" SSL_CERT_FILE="$ca" REQUESTS_CA_BUNDLE="$ca" GIT_SSL_CAINFO="$ca" CURL_CA_BUNDLE="$ca"
  export APT_CA_OPT="-oAcquire::https::CAInfo=$ca"
else
  export APT_CA_OPT=""
fi
exec "$@"
