#!/bin/sh
# After installing zkgate: its user, and systemd told of the unit. The
# service is not started: configure /etc/zkgate/zkgate.env, then
# systemctl enable --now zkgate.
set -e
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers zkgate.conf
elif ! getent passwd zkgate >/dev/null; then
	useradd --system --user-group --home-dir /var/lib/zkgate --no-create-home --shell /usr/sbin/nologin zkgate
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
