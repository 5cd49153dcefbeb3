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
# /etc/zkgate is group zkgate's, and setgid: a tokens file made there
# (zkgate token new, then chmod 0640 once) stays readable by the service
# through every rewrite.
chgrp zkgate /etc/zkgate
chmod 2750 /etc/zkgate
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
