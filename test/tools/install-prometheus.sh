#!/usr/bin/env bash
# Installs Prometheus from Debian's package for the autoscaling cluster test, which runs the
# binary itself (its own config, a loopback port, a temp data folder). The package's service
# must not run on a CI machine: it is kept from starting during the install and disabled after.
# Prints the binary's path on its last line; MODELMUX_PROMETHEUS, when it names an executable,
# wins and nothing is installed.
set -euo pipefail

if [ -n "${MODELMUX_PROMETHEUS:-}" ] && [ -x "$MODELMUX_PROMETHEUS" ]; then
  echo "$MODELMUX_PROMETHEUS"
  exit 0
fi

if ! [ -x /usr/bin/prometheus ]; then
  echo "installing Debian's prometheus package" >&2
  # policy-rc.d answering 101 tells invoke-rc.d (the package's postinst) not to start it.
  own_policy=0
  if ! [ -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    own_policy=1
  fi
  apt-get update >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >&2
  if [ "$own_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

# On a machine booted with systemd the unit may still be enabled (or running, if the package
# came in earlier): stop and disable it, so only the test's own Prometheus runs.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now prometheus >&2 2>/dev/null || true
fi
/usr/bin/prometheus --version >&2
echo /usr/bin/prometheus
